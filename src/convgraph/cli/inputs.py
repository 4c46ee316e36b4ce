"""What a command is given, read and checked before anything is written.

* Content and payloads (`CONTENT`): the text itself, `-` for standard input, or `@FILE` for a
  file's contents (curl's convention); `@@…` stands for text that begins with a literal `@`.
  A 20 MB payload thus never meets the shell's limit on an argument list.
* CIDs (`cid`): a whole CID or a short one, at least 4 characters from its start or its end,
  as `log` prints it (`core/short_cid.py`).
* Actors (`actor`): a whole actor id (52 characters; it may name a key that has written
  nothing yet) or a short one, at least 4 characters from the start of the id or of its
  fingerprint, among the keys the replica knows in the conversations concerned
  (`core/short_actor.py`).
* Conversations that must exist (`existing`): a command that reads one, or that adds to one
  but must not start it (`checkpoint`, `merge`, `branch`), names what it looked for and the
  conversations held, rather than answering "0 records" or creating it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from convgraph.cli import aliases
from convgraph.core import safe_text, short_actor, short_cid, suggestions
from convgraph.core.cid import CID
from convgraph.core.rooted import is_rooted
from convgraph.core.text import check_text
from convgraph.errors import InvalidTextError, UnknownConversationError

if TYPE_CHECKING:  # the commands that take inputs have imported it already
    from convgraph.replica import Replica

_KNOWN_SHOWN: Final = 20


class _Content(click.types.StringParamType):
    """Text given inline, as `-` (standard input) or as `@FILE`; it must be UTF-8."""

    name = "text|-|@file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = super().convert(value, param, ctx)
        try:
            if text == "-":
                text = sys.stdin.buffer.read().decode("utf-8")
            elif text.startswith("@@"):
                text = text[1:]
            elif text.startswith("@"):
                text = _read(Path(text[1:]))
            return check_text(text, "the value")
        except UnicodeDecodeError as exc:
            self.fail(f"the input is not UTF-8 text ({exc.reason} at byte {exc.start})", param, ctx)
        except InvalidTextError as exc:
            self.fail(exc.message, param, ctx)
        except OSError as exc:
            self.fail(f"cannot read {text[1:]!r}: {exc.strerror} (a value that starts with @ names a file; "
                      "write @@ for a literal @, or give the text on standard input with -)", param, ctx)


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


CONTENT = _Content()


def cid(replica: Replica, text: str) -> CID:
    """The record `text` names (a whole or short CID) among those `replica` holds."""
    return short_cid.resolve(text.strip(), replica.store.cids_like)


def actor(replica: Replica, text: str, convs: Iterable[str]) -> bytes:
    """The key `text` names (a whole or short actor id) among those `replica` knows in `convs`."""
    wanted = list(convs)
    where = f"conversation {wanted[0]}" if len(wanted) == 1 else "this replica"
    return short_actor.resolve(text.strip(), lambda: known_actors(replica, wanted), where)


def known_actors(replica: Replica, convs: Iterable[str]) -> set[bytes]:
    """The keys `replica` knows in `convs`: the authors of their records, and the keys their
    grants and revocations name (members included, whose grants a checkpoint compacted)."""
    keys: set[bytes] = set()
    for conv in convs:
        for entry in replica.state(conv).entries.values():
            keys.add(entry.actor)
            named = entry.payload.get("grantee") if entry.kind in ("grant", "revocation") else None
            if isinstance(named, bytes):
                keys.add(named)
        if is_rooted(conv):
            authority = replica.authority(conv)
            keys.update(authority.members())
            keys.update([authority.owner] if authority.owner is not None else [])
    return keys


def existing(home: Path, replica: Replica, name: str | None) -> str:
    """The conversation `--conv name` stands for (the alias `default` when None), which must
    hold a record here: else `UnknownConversationError` listing the ones that do."""
    table = aliases.load(home)
    conv = aliases.resolve(table, aliases.DEFAULT if name is None else name, replica.conversations)
    if replica.store.heads(conv):
        return conv
    held = replica.conversations()
    named = [f"{conv} ({', '.join(aliases.names_of(table, conv))})" if aliases.names_of(table, conv) else conv
             for conv in held[:_KNOWN_SHOWN]]
    more = f" and {len(held) - _KNOWN_SHOWN} more" if len(held) > _KNOWN_SHOWN else ""
    asked = "no conversation given, and the alias 'default' names none" if name is None else (
        f"no conversation {safe_text.line(repr(name))}" + (f" (alias of {conv})" if conv != name else ""))
    known = f"the replica holds: {', '.join(named)}{more}" if held else "it holds no conversation yet"
    hint = f"; `{suggestions.CONVERSATIONS}` lists them, `{suggestions.NEW}` starts one"
    raise UnknownConversationError(f"{asked} in this replica; {known}{hint}", conv=conv, known=tuple(held))
