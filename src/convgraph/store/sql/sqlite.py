"""The embedded default store: one SQLite file in WAL mode, nothing to start.

Writes take SQLite's write lock up front (`BEGIN IMMEDIATE`), so two processes sharing one
file serialise their read-then-write steps instead of failing at commit. Durability is a
choice: `synchronous="NORMAL"` (the default) makes every acknowledged write survive a killed
process and keeps the file consistent across power loss, which may drop the last few
commits; `"FULL"` fsyncs every commit so they survive power loss too, at about half
the single-record write rate on this machine (bench/README.md). This module holds only what
SQLite does differently (store/sql/core.py); every `sqlite3` error leaves it as a
`StoreError` subclass. One writer per file: every transaction, of any conversation, holds
the file (and this connection, whose reads wait for it) until it ends, so callers keep
transactions short and judge outside them (the server lands a push in parts, docs/sync.md,
*Concurrency*). Invariant: a commit lands whole or not at all.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Literal

from convgraph.errors import (
    NonceLogFullError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreSchemaError,
)
from convgraph.store.sql import v5
from convgraph.store.sql.core import Batch, ConvRow
from convgraph.store.sql.forget import SqlStore
from convgraph.store.sql.migrate import copy_v5
from convgraph.store.sql.schema import CONV_TABLES, SCHEMA_VERSION, V5_INDEXES, conv_ddl
from convgraph.store.sql_rows import split_cids

# version 2 added the witnessed-history tables (remembered … finding_cites), version 3 the turn
# index (turn_line … turn_hidden_as_of, docs/conversation.md §8); an older file is upgraded in
# place when opened: `v5.SQLITE` creates what it lacks, the index is filled from the records;
# version 4 added the artifact tables, version 5 `forgotten` (the conversations forgotten here),
# version 6 keyed every conversation table by `conv` (store/sql/schema.py, store/sql/migrate.py)
_UPGRADABLE: Final = frozenset({"1", "2", "3", "4", "5"})
_INDEXED: Final = frozenset({"3", "4", "5"})  # versions that have the turn index already
_REFERENCED: Final = frozenset({"4", "5"})  # versions that have `artifact_refs` filled already
_TYPES: Final = {"conv": "TEXT", "text": "TEXT", "blob": "BLOB", "int": "INTEGER"}
# rows of these hold a payload: a rowid table keeps the key's index apart from the bytes
_ROWID: Final = frozenset({"records", "pending", "remembered", "receipts", "gossip", "pending_checks",
                           "findings"})
_KEYED: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS http_nonces (actor BLOB NOT NULL, nonce TEXT NOT NULL, expires INTEGER NOT NULL,
    PRIMARY KEY (actor, nonce)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS http_nonces_expiry ON http_nonces (expires);
CREATE TABLE IF NOT EXISTS blocks (id INTEGER PRIMARY KEY, cid BLOB NOT NULL UNIQUE, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS block_links (manifest BLOB NOT NULL, chunk BLOB NOT NULL,
    PRIMARY KEY (manifest, chunk)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS block_links_chunk ON block_links (chunk, manifest);
"""
_CHUNK: Final = 500  # keys a query: SQLite's limit on arguments is 999 in older builds

Synchronous = Literal["FULL", "NORMAL"]


@contextmanager
def _translated() -> Iterator[None]:
    """Turn driver exceptions into the `StoreError` vocabulary at the boundary."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise StoreBusyError(f"database is locked: {exc}") from exc
        raise StoreError(f"sqlite operation failed: {exc}") from exc
    except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError) as exc:
        raise StoreError(f"sqlite refused the operation: {exc}") from exc
    except sqlite3.DatabaseError as exc:  # "file is not a database", corruption
        raise StoreCorruptError(f"sqlite database unusable: {exc}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"sqlite failed: {exc}") from exc


class SqliteStore(SqlStore):
    """A `Store` in one SQLite file; safe to share between threads and processes."""

    # Python 3.11's sqlite3 offers every `bytes` parameter to its adapters first (a failed
    # attribute look-up that formats an error message: ~3,000 instructions a value, more than
    # its row costs SQLite) but binds a `bytearray` as it is; both are stored as the same BLOB,
    # and read back as `bytes`. The per-record paths (commit, the look-ups by CID) bind these.
    _blob = bytearray
    _CAST_DATA = "CAST({} AS BLOB)"
    _GREATEST = "max"
    _MAX_HLC = (
        "SELECT r.wall, r.counter FROM (SELECT DISTINCT conv FROM heads) h JOIN records r ON r.id ="
        " (SELECT id FROM records q WHERE q.conv = h.conv ORDER BY q.wall DESC, q.counter DESC LIMIT 1)"
        " ORDER BY r.wall DESC, r.counter DESC LIMIT 1"
    )

    def __init__(
        self, path: Path | str, *, synchronous: Synchronous = "NORMAL", busy_timeout_s: float = 30.0
    ) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._depth = 0
        self._rows: dict[str, ConvRow] | None = None  # the open transaction's (`_hold`)
        self._commits = 0  # ours; `PRAGMA data_version` moves only for other connections'
        self._texts: dict[str, str] = {}
        with _translated():
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        try:
            with _translated():
                if not self._refuse_foreign():
                    # before the first table, or never: pages freed by `forget` go back to the
                    # file system (`incremental_vacuum`) instead of staying in the file
                    self._db.execute("PRAGMA auto_vacuum = INCREMENTAL")
                self._enter_wal(busy_timeout_s)
                self._db.execute(f"PRAGMA synchronous={synchronous}")
                self._db.execute("PRAGMA foreign_keys=OFF")
                with self.transaction():
                    self._check_version()
        except BaseException:
            self._db.close()
            raise

    def _enter_wal(self, timeout_s: float) -> None:
        """Switch to WAL, retrying while another opener holds the lock.

        Changing the journal mode needs an exclusive lock and SQLite does not run the busy
        handler for it, so concurrent first opens of one new file would fail at once.
        """
        deadline, pause = time.monotonic() + timeout_s, 0.001
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _refuse_foreign(self) -> bool:
        """Never adopt somebody else's database: tables but no convgraph version row. Whether
        the file holds any table (a store's file always holds `convs` from version 6 on)."""
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" not in tables:
            raise StoreCorruptError(f"{self.path} is a SQLite database, but not a convgraph store")
        return bool(tables)

    def _check_version(self) -> None:
        ddl = [*filter(str.strip, _KEYED.split(";")), *conv_ddl(_TYPES, " WITHOUT ROWID", _ROWID)]
        if not self._refuse_foreign():
            for statement in ddl:
                self._x(statement)
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            if self._db.execute("SELECT 1 FROM records LIMIT 1").fetchone():
                raise StoreCorruptError(f"{self.path} holds records but no schema version")
            self._db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif row[0] in _UPGRADABLE:
            for statement in filter(str.strip, v5.SQLITE.split(";")):
                self._db.execute(statement)
            if row[0] not in _INDEXED:
                self._backfill_index()
            if row[0] not in _REFERENCED:
                self._backfill_artifact_refs()
            self._upgrade_v5(ddl)
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        elif row[0] != str(SCHEMA_VERSION):
            raise StoreSchemaError(f"{self.path} has schema version {row[0]}, expected {SCHEMA_VERSION}")

    def _upgrade_v5(self, ddl: list[str]) -> None:
        """Move the v5 conversation tables aside, make the v6 ones and copy every row across."""
        moved = [t for t in CONV_TABLES if t != "convs"]
        for table in moved:
            self._db.execute(f"ALTER TABLE {table} RENAME TO {table}_v5")
        for index in V5_INDEXES:
            self._db.execute(f"DROP INDEX IF EXISTS {index}")
        for statement in ddl:
            self._x(statement)
        copy_v5(self, lambda table: f"{table}_v5")
        for table in moved:
            self._db.execute(f"DROP TABLE {table}_v5")

    # ------------------------------------------------------------ the dialect's hooks

    def _sql(self, text: str) -> str:
        found = self._texts.get(text)
        if found is None:
            found = self._texts[text] = text.replace("{s}.", "").replace("%s", "?")
        return found

    def _q(self, text: str, *args: object, binary: bool = False) -> list[Any]:  # noqa: ARG002
        with self._lock, _translated():
            return self._db.execute(self._sql(text), args).fetchall()

    def _x(self, text: str, *args: object) -> sqlite3.Cursor:
        with _translated():
            return self._db.execute(self._sql(text), args)

    def _xm(self, text: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            with _translated():
                self._db.executemany(self._sql(text), rows)

    def _any(self, select: str, keys: Iterable[object], *head: object, text: bool = False) -> list[Any]:
        bind: Any = str if text else self._blob
        ordered, rows, sql = [bind(k) for k in keys], [], self._sql(select)
        for i in range(0, len(ordered), _CHUNK):
            part = ordered[i : i + _CHUNK]
            rows += self._q(sql.replace("{in}", f"IN ({','.join('?' * len(part))})"), *head, *part)
        return rows

    def _moved(self) -> None:
        self._commits += 1

    def _announce(self, convs: list[str]) -> list[Batch]:  # noqa: ARG002 (no listeners: readers poll)
        return []

    def _unpend(self, cids: list[tuple[bytes]]) -> list[Batch]:
        # `pending_missing` is keyed by what is missing: its rows of an entry are found from it
        pairs: list[tuple[bytes, bytes]] = []
        for (cid,) in cids:
            row = self._x("DELETE FROM pending WHERE cid = ? RETURNING missing", cid).fetchone()
            if row is not None:
                pairs += [(bytes(m), cid) for m in split_cids(row[0])]
        return [("DELETE FROM pending_missing WHERE missing = ? AND cid = ?", pairs)]

    def _insert_records(self, rows: list[tuple[object, ...]]) -> list[Batch]:
        # one writer a file: the store-wide ids are drawn here, in commit order
        first = self.cursor() + 1
        return [("INSERT INTO records (cid, conv, actor, seq, wall, counter, parents, data, arrival, id)"
                 " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [(*row, first + i) for i, row in enumerate(rows)])]

    @contextmanager
    def transaction(self, *convs: str) -> Iterator[None]:  # noqa: ARG002 (one writer a file)
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            with _translated():
                self._db.execute("BEGIN IMMEDIATE")
            self._depth, self._rows = 1, {}
            try:
                yield
            except BaseException:
                self._depth, self._rows = 0, None
                self._commits += 1  # a token read after a commit inside must not match what is left
                with _translated():
                    self._db.execute("ROLLBACK")
                raise
            self._depth, self._rows = 0, None
            try:
                with _translated():
                    self._db.execute("COMMIT")
            except StoreError:
                if self._db.in_transaction:  # leave the connection usable for the next writer
                    self._db.execute("ROLLBACK")
                raise

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._lock:
            if self._db.in_transaction:
                yield
                return
            with _translated():
                self._db.execute("BEGIN")  # deferred: one WAL snapshot from the first read on
            try:
                yield
            finally:
                with _translated():
                    self._db.execute("COMMIT")

    def in_transaction(self) -> bool:
        return self._depth > 0

    def _held_rows(self) -> dict[str, ConvRow] | None:
        return self._rows

    def _held_row(self, conv: str) -> ConvRow | None:
        with self._lock:  # a transaction holds the lock to its end: another thread's waits for it
            return None if self._rows is None else self._rows.get(conv)

    @property
    def synchronous(self) -> str:
        """The durability this connection commits with, as SQLite reports it (`FULL`, `NORMAL`, ...)."""
        with self._lock, _translated():
            level = int(self._db.execute("PRAGMA synchronous").fetchone()[0])
        return ("OFF", "NORMAL", "FULL", "EXTRA")[level]

    def change_token(self) -> object:
        return (self._q("PRAGMA data_version")[0][0], self._commits)

    # ------------------------------------------------------------ forgetting and closing

    def forget(self, conv: str) -> None:
        with self._lock:
            outer = self._depth > 0
            with _translated():  # deleted cells are zeroed, not left in the pages' free space
                self._db.execute("PRAGMA secure_delete = ON")
            try:
                super().forget(conv)
            finally:
                with _translated():
                    self._db.execute("PRAGMA secure_delete = OFF")
            if not outer:
                self._shrink()

    def _shrink(self) -> None:
        """Return the free pages to the file system and empty the WAL (it still holds the old
        pages' bytes); a checkpoint that a reader blocks leaves the WAL for a later one."""
        with _translated():
            # `executescript` steps the pragma to its end: `execute` frees one page a call
            self._db.executescript("PRAGMA incremental_vacuum;")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def vacuum(self) -> None:
        with self._lock:
            if self._depth:
                raise StoreError("vacuum cannot run inside a transaction")
            with _translated():
                # a store made before version 5 has no auto_vacuum: VACUUM is what switches it on
                self._db.execute("PRAGMA auto_vacuum = INCREMENTAL")
                self._db.execute("VACUUM")
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def close(self) -> None:
        with self._lock, _translated():
            self._db.close()


class SqliteNonces:
    """The sync server's `NonceLog` in the replica's own SQLite file, so a restart forgets nothing.

    The primary key decides (the first insert wins, an expired row may be reused), as in
    `server/pg_nonces.py`. Expired rows are swept at most once per `sweep_ms` of request
    time, and the count is taken again then. Invariant: within its window a nonce is
    accepted once, across restarts and processes sharing the file; when `max_entries`
    unexpired nonces are held, `first_use` raises `NonceLogFullError` rather than forget one.
    """

    def __init__(self, store: SqliteStore, *, max_entries: int = 1_000_000, sweep_ms: int = 1000) -> None:
        self._store, self._max, self._sweep_ms = store, max_entries, sweep_ms
        self._held, self._next_sweep = 0, -1  # `_held` counts our inserts since the last sweep's count

    def first_use(self, actor: bytes, nonce: str, expires_ms: int, now_ms: int) -> bool:
        with self._store.transaction(), _translated():
            db = self._store._db
            if now_ms >= self._next_sweep:
                db.execute("DELETE FROM http_nonces WHERE expires < ?", (now_ms,))
                self._held = int(db.execute("SELECT count(*) FROM http_nonces").fetchone()[0])
                self._next_sweep = now_ms + self._sweep_ms
            if self._held >= self._max:
                found = db.execute(
                    "SELECT 1 FROM http_nonces WHERE actor = ? AND nonce = ?", (actor, nonce)
                ).fetchone()
                if found:  # a replay is still a replay, full or not
                    return False
                raise NonceLogFullError(limit=self._max)
            inserted = db.execute(
                "INSERT INTO http_nonces AS n VALUES (?, ?, ?) ON CONFLICT (actor, nonce)"
                " DO UPDATE SET expires = excluded.expires WHERE n.expires < ?",
                (actor, nonce, expires_ms, now_ms),
            ).rowcount == 1
            self._held += inserted
            return inserted
