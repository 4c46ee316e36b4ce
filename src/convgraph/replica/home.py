"""The replica's directory: what must be in it before a replica opens there.

A replica's home holds `actor.key` (its signing key) and `replica.sqlite` (its store). A
missing, empty or foreign part is never replaced on its own: a new key is a new author who
owns none of the old one's conversations, and an emptied database may be the only copy of
its records. So `check` raises a typed error that names the path and the way back, and only
a caller that asks to create (`convgraph init`, `Replica.open(path)`) makes what is absent.
Invariant: with `create` false, `check` returns only when both parts are there (or, when the
caller only reads, the store alone) and the database is not an empty file.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final, TypeVar

from convgraph.core import suggestions
from convgraph.core.keys import SigningKey, load_or_create_key, save_key
from convgraph.errors import (
    ConvgraphError,
    KeyFileError,
    MissingKeyError,
    NoReplicaError,
    StoreCorruptError,
    UnusableStoreError,
)

KEY_FILE: Final = "actor.key"
DB_FILE: Final = "replica.sqlite"

S = TypeVar("S")


def init_command(home: Path) -> str:
    """The command that creates a replica in `home`, quoted for a shell."""
    return suggestions.INIT(home=home)


def missing_key(home: Path) -> MissingKeyError:
    """The error of a replica in `home` whose store is there and whose key is not."""
    key, db = home / KEY_FILE, home / DB_FILE
    return MissingKeyError(
        f"{db} is there but its key {key} is missing, so nothing can be signed as this replica's "
        f"author: restore {KEY_FILE} from a backup; or, to go on as a new author (who owns none of the "
        f"old key's conversations), run `{suggestions.INIT_NEW_KEY(home=home)}`", path=str(key))


def lost_key(home: Path) -> bool:
    """True when `home` holds a store and no key: a replica that can be read, not written."""
    return (home / DB_FILE).exists() and not (home / KEY_FILE).exists()


def check(home: Path, *, create: bool, need_key: bool = True) -> None:
    """Raise unless `home` holds a replica that may be opened as it is; with `create`, what is
    wholly absent (the directory, the key with no store, the store) may be made instead; with
    `need_key` false, a store whose key is lost may be opened to be read."""
    key, db = home / KEY_FILE, home / DB_FILE
    has_key, has_db = key.exists(), db.exists()
    if has_db and not has_key and need_key:
        raise missing_key(home)
    if has_db and db.stat().st_size == 0:
        raise UnusableStoreError(
            f"{db} is an empty file (0 bytes), not a replica store: restore it from a backup; or, to "
            f"start again with no records and the same key, delete it and run `{init_command(home)}`",
            path=str(db))
    if not create and not has_db:
        held = f" (it holds {KEY_FILE} but no {DB_FILE})" if has_key else ""
        where = "no replica in" if home.is_dir() else "no replica: there is no directory"
        raise NoReplicaError(
            f"{where} {home}{held}: `{init_command(home)}` creates one, or point --home (or "
            "CONVGRAPH_HOME) at an existing replica", home=str(home))


@contextmanager
def opening(home: Path) -> Iterator[None]:
    """Hold an exclusive lock on the directory `home` (no file is made) while a replica is
    opened there: SQLite creates the database file empty and writes its first page a moment
    later, and a concurrent opener must not take that moment's 0-byte file for an emptied one."""
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # no directory: `check` says so
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def unusable(home: Path, exc: StoreCorruptError) -> UnusableStoreError:
    """`exc` (the store refused the file `home/replica.sqlite`) as an error that says what to do."""
    db = home / DB_FILE
    return UnusableStoreError(
        f"{db} cannot be used as a replica store ({exc.message}): restore it from a backup; or move it "
        f"aside and run `{init_command(home)}` to start again with no records and the same key",
        path=str(db))


def replace_lost_key(home: Path) -> None:
    """Give a replica whose store is there and whose key is gone a new key (`init --new-key`):
    asked for by name only, since the new key is a new author. Never overwrites a key."""
    key = home / KEY_FILE
    if key.exists():
        raise KeyFileError(f"{key} is there: --new-key only replaces a key that is lost, never one that "
                           "exists (leave it out to keep this replica's author)")
    if (home / DB_FILE).exists():
        save_key(SigningKey.generate(), key)


def open_parts(
    home: Path, open_store: Callable[[Path], S], *, create: bool, need_key: bool
) -> tuple[SigningKey | None, S]:
    """The key (None: lost, and `need_key` false) and the store `open_store` opens in `home`,
    after `check`; with `create`, the directory, the key and the store are made when absent."""
    if create:
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConvgraphError(f"cannot create replica directory {home}: {exc}") from exc
    with opening(home):
        check(home, create=create, need_key=need_key)
        lost = not need_key and lost_key(home)
        key = None if lost else load_or_create_key(home / KEY_FILE)
        try:
            store = open_store(home / DB_FILE)
        except StoreCorruptError as exc:
            raise unusable(home, exc) from exc
    return key, store
