"""Short actor ids: an actor's key cut short, as a short CID names a record (`short_cid`).

An actor id is its Ed25519 key in base32 (52 characters, `keys.actor_text`); listings print
it short: the start of the key (`members`), or its fingerprint, a hash of the key, of which
`log`, `why` and `members` print the start. A short actor id is therefore read both ways: as
the start of a key's text and as the start of its fingerprint; every key known to the replica
that either reading matches is a candidate. A whole id needs no candidates: it may name a key
that has never written anything (a `grant` to a new device). Pure: the known keys come from a
function, asked only when the id is short. Invariant: `resolve` returns a whole id given, or
the one known key that a short id matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Final

from convgraph.core import suggestions
from convgraph.core.keys import actor_text, fingerprint, parse_actor
from convgraph.errors import AmbiguousActorError, DecodeError, KeyFileError, NotFoundError

MIN_CHARS: Final = 4
_TEXT_LEN: Final = 52
_BASE32: Final = re.compile(r"[a-z2-7]+")
_SHOWN: Final = 10  # candidates an ambiguity error lists


def resolve(text: str, known: Callable[[], Iterable[bytes]], where: str = "this replica") -> bytes:
    """The key `text` names: a whole actor id, or at least `MIN_CHARS` characters from the start
    of a known key's id or of its fingerprint. `NotFoundError` when no known key matches,
    `AmbiguousActorError` listing the candidates when several do, `DecodeError` when `text`
    cannot be part of an actor id. `where` names whose keys `known` gives, for the messages."""
    if len(text) == _TEXT_LEN:
        try:
            return parse_actor(text)
        except KeyFileError as exc:
            raise DecodeError(f"{exc.message}: a 52-character actor id is base32, a-z and 2-7") from None
    if len(text) < MIN_CHARS or len(text) > _TEXT_LEN or not _BASE32.fullmatch(text):
        raise DecodeError(
            f"{text[:80]!r} is not an actor id: expected the whole 52-character actor id (as "
            f"`{suggestions.INIT_HERE}` and `{suggestions.DEVICE_ADD}` print it) or at least {MIN_CHARS} "
            "characters from the start of the id "
            "or of its fingerprint (as `log` and `members` print them)")
    found = sorted({k for k in known() if actor_text(k).startswith(text) or fingerprint(k).startswith(text)})
    if not found:
        raise NotFoundError(
            f"no key known to {where} (an author of its records or a key named in a grant) has an id or "
            f"fingerprint that starts with {text!r}: a short id names only a key the replica knows; give "
            f"the whole 52-character actor id (`{suggestions.DEVICE_ADD}` prints it on that device)")
    if len(found) > 1:
        shown = tuple(f"{actor_text(k)} ({fingerprint(k)})" for k in found[:_SHOWN])
        more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
        raise AmbiguousActorError(
            f"{text!r} matches {len(found)} keys known to {where}: {', '.join(shown)}{more}; give more "
            "characters", prefix=text, candidates=tuple(actor_text(k) for k in found[:_SHOWN]))
    return found[0]
