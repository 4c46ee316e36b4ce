"""Local aliases: the names a person types for rooted conversation ids, never synced.

`aliases.json` in the replica directory maps each alias to a rooted id (docs/authority.md §2,
"Titles and aliases"). A `--conv` value resolves as: an alias → its id; a rooted id → itself;
the start of exactly one rooted id held here (a short id) → that id; anything else → the
literal name, a legacy conversation. The file is replaced atomically
(temporary file, fsync, rename) under an exclusive lock, so a reader sees the old table or the
new one and two writers never lose each other's change. Invariant: every stored value is a
rooted id and no alias has the rooted form, so an id always names itself.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from convgraph.core.rooted import is_rooted
from convgraph.core.text import check_text
from convgraph.errors import AliasError, AmbiguousConversationError, InvalidTextError

ALIASES_FILE: Final = "aliases.json"
LOCK_FILE: Final = ".aliases.lock"
DEFAULT: Final = "default"  # the alias `--conv` stands for when it is not given
MAX_NAME: Final = 200
ANY: Final = "*"  # a server's access rules read it as every conversation: never a name here
SHORT_MIN: Final = 8  # `cg1` and 5 characters: a short id shorter than this is taken as a name
SHORT_CHARS: Final = 12  # a short id as tables print it: `cg1` and 45 bits
_SHORT: Final = re.compile(rf"cg1[a-z2-7]{{{SHORT_MIN - 3},31}}")  # shorter than a whole id (35)
_SHOWN: Final = 8


def check_name(name: str) -> str:
    """`name` if it can be an alias (short one-line text, not of the rooted form), else `AliasError`."""
    try:
        check_text(name, "alias")
    except InvalidTextError as exc:
        raise AliasError(exc.message) from None
    if not name.strip() or len(name) > MAX_NAME or not name.isprintable():
        raise AliasError(f"an alias is one line of 1 to {MAX_NAME} printable characters, not {name[:64]!r}")
    if is_rooted(name):
        raise AliasError(f"{name} has the form of a conversation id, which always names itself")
    if name == ANY:
        raise AliasError(f"{ANY!r} cannot be an alias: it names no conversation")
    return name


def resolve(aliases: Mapping[str, str], name: str, held: Callable[[], Sequence[str]] | None = None) -> str:
    """The conversation `name` stands for: its alias's id; else, given the conversations `held`
    here, one held under that very name or the one rooted id that starts with `name` (a short id,
    at least `SHORT_MIN` characters, as tables print them; `AmbiguousConversationError` when
    several do); else `name` itself (an id or a legacy name). `*` names none: a server's
    `--allow` reads it as every conversation."""
    if name == ANY:
        raise AliasError(f"{ANY!r} is not a conversation name (in `serve --allow` it stands for every "
                         "conversation): give an alias, a conversation id or a legacy name")
    if name in aliases:
        return aliases[name]
    if held is None or not _SHORT.fullmatch(name):
        return name
    convs = held()
    if name in convs:
        return name
    found = sorted(c for c in convs if is_rooted(c) and c.startswith(name))
    if len(found) > 1:
        more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
        shown = ", ".join(found[:_SHOWN]) + more
        raise AmbiguousConversationError(
            f"{name} is the start of {len(found)} conversation ids held here ({shown}): give more characters",
            prefix=name, candidates=tuple(found))
    return found[0] if found else name


def short(conv: str) -> str:
    """How a table prints a conversation id: a rooted one cut to `SHORT_CHARS`, which `--conv`
    takes back (`resolve`); a legacy name whole."""
    return conv[:SHORT_CHARS] if is_rooted(conv) else conv


def names_of(aliases: Mapping[str, str], conv: str) -> list[str]:
    """The aliases that name `conv`, sorted."""
    return sorted(name for name, target in aliases.items() if target == conv)


def parse(data: bytes) -> dict[str, str]:
    """The table a file holds; `AliasError` unless it is a JSON object of alias → rooted id."""
    try:
        table = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AliasError(f"{ALIASES_FILE} is not JSON: {exc}") from None
    if not isinstance(table, dict):
        raise AliasError(f"{ALIASES_FILE} must hold a JSON object")
    for name, conv in table.items():
        check_name(name)
        if not (isinstance(conv, str) and is_rooted(conv)):
            raise AliasError(f"{ALIASES_FILE}: alias {name!r} must name a rooted conversation id")
    return table


def render(aliases: Mapping[str, str]) -> bytes:
    """The file's bytes for `aliases`: sorted, indented, one alias a line."""
    return (json.dumps(dict(sorted(aliases.items())), indent=2, ensure_ascii=False) + "\n").encode()


def load(home: Path) -> dict[str, str]:
    """The aliases of the replica in `home` (none when it has no file)."""
    try:
        return parse((home / ALIASES_FILE).read_bytes())
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise AliasError(f"cannot read {home / ALIASES_FILE}: {exc}") from exc


@contextmanager
def editing(home: Path) -> Iterator[dict[str, str]]:
    """The aliases of `home`, locked against other writers; what the block leaves is saved."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        lock = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise AliasError(f"cannot lock the aliases in {home}: {exc}") from exc
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        table = load(home)
        before = dict(table)
        yield table
        if table != before:
            for name, conv in table.items():
                check_name(name)
                if not is_rooted(conv):
                    raise AliasError(f"alias {name!r} must name a rooted conversation id, not {conv[:64]!r}")
            _replace(home / ALIASES_FILE, render(table))
    finally:
        os.close(lock)  # closing releases the lock


def _replace(path: Path, body: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a crash
        finally:
            os.close(directory)
    except OSError as exc:
        raise AliasError(f"cannot write {path}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
