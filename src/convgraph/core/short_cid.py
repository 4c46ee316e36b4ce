"""Short CIDs: a CID's text cut short, as git accepts a short hash.

Every record's CID text begins `bafyrei`, so the part that tells records apart is the end;
`convgraph log` prints the last 10 characters. A short CID is therefore read both ways: as
the start of a CID's text (`bafyreigbtj4x`) and as its end (`6jiieb2yqi`); every stored CID
that either reading matches is a candidate. The store narrows by whole bytes (`Lookup`:
CIDs whose binary form starts with `head` and ends with `tail`, an index range and a
comparison), and the text comparison here decides. Pure: a lookup function in, a CID out.
Invariant: `resolve` returns a CID whose text starts or ends with the text given, and only
when no other candidate does.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Final

from convgraph.core import suggestions
from convgraph.core.cid import CID
from convgraph.errors import AmbiguousCidError, DecodeError, NotFoundError

Lookup = Callable[[bytes, bytes, int], list[CID]]
"""`(head, tail, limit)`: up to `limit` stored CIDs whose binary form starts with `head` and
ends with `tail`, sorted."""

MIN_CHARS: Final = 4
_TEXT_LEN: Final = 58  # base32 characters after the multibase `b`: ceil(36 * 8 / 5)
_BASE32: Final = re.compile(r"[a-z2-7]+")
_SHOWN: Final = 10  # candidates an ambiguity error lists
_SCAN: Final = 1000  # byte-level candidates read before the text comparison


def resolve(text: str, lookup: Lookup) -> CID:
    """The one stored CID `text` names: a whole CID text, or at least `MIN_CHARS` characters
    from its start or its end. `NotFoundError` when none matches, `AmbiguousCidError` listing
    the candidates when several do, `DecodeError` when `text` cannot be part of a CID."""
    if len(text) == _TEXT_LEN + 1 and text.startswith("b"):
        return CID.parse(text)
    if len(text) < MIN_CHARS or len(text) > _TEXT_LEN + 1 or not _BASE32.fullmatch(text):
        raise DecodeError(
            f"{text[:80]!r} is not a CID: expected its base32 text (bafyrei…, 59 characters) or at least "
            f"{MIN_CHARS} of its characters from the start or the end "
            f"(the short id `{suggestions.LOG}` prints)")
    found: set[CID] = set()
    if text.startswith("b"):
        found.update(c for c in lookup(_head(text[1:]), b"", _SCAN) if str(c).startswith(text))
    if len(text) <= _TEXT_LEN:
        found.update(c for c in lookup(b"", _tail(text), _SCAN) if str(c).endswith(text))
    if not found:
        raise NotFoundError(f"no record held here has a CID that starts or ends with {text!r} "
                            f"(`{suggestions.LOG}` lists the records of a conversation)")
    if len(found) > 1:
        shown = tuple(str(c) for c in sorted(found)[:_SHOWN])
        more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
        raise AmbiguousCidError(
            f"{text!r} matches {len(found)} records: {', '.join(shown)}{more}; give more characters",
            prefix=text, candidates=shown)
    return found.pop()


def _decode(chars: str) -> bytes:
    """The 36 bytes of the full-length base32 text `chars` (58 characters)."""
    return base64.b32decode(chars.upper() + "=" * (-len(chars) % 8))


def _head(chars: str) -> bytes:
    """The whole bytes the first `len(chars)` characters after `b` fix."""
    full = _decode(chars + "a" * (_TEXT_LEN - len(chars)))
    return full[: len(chars) * 5 // 8]


def _tail(chars: str) -> bytes:
    """The whole bytes the last `len(chars)` characters fix: they carry 5 bits each but the
    last, which carries 3 (and 2 bits of padding)."""
    full = _decode("a" * (_TEXT_LEN - len(chars)) + chars)
    whole = (len(chars) * 5 - 2) // 8
    return full[len(full) - whole:] if whole else b""

