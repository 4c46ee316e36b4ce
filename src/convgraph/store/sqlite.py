"""The embedded default store: one SQLite file in WAL mode, nothing to start.

Writes take SQLite's write lock up front (`BEGIN IMMEDIATE`), so two processes sharing one
file serialise their read-then-write steps instead of failing at commit. Durability is a
choice: `synchronous="NORMAL"` (the default) makes every acknowledged write survive a killed
process and keeps the file consistent across power loss, which may drop the last few
commits; `"FULL"` fsyncs every commit so they survive power loss too, at about half
the single-record write rate on this machine (bench/README.md). Every `sqlite3` error
leaves this module as a `StoreError` subclass. One writer per file: every transaction, of any
conversation, holds the file (and this connection, whose reads wait for it) until it ends, so
callers keep transactions short and judge outside them (the server lands a push in parts,
docs/sync.md, *Concurrency*). Invariant: a commit lands whole or not at all, and `heads`
always equals the records that no stored record names as a parent.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Literal

from convgraph.artifacts.links import ARTIFACT_KINDS
from convgraph.core.cid import CID
from convgraph.core.hlc import ZERO, Hlc
from convgraph.core.record import Record, RecordMeta, load_trusted
from convgraph.errors import (
    NonceLogFullError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreSchemaError,
)
from convgraph.integrity.statement import Statement
from convgraph.projections.index_rows import (
    BranchRow,
    LineRow,
    OrderKey,
    Row,
    TargetRow,
    row_of,
    snapshot_rows,
)
from convgraph.projections.state import entry_from_bytes
from convgraph.store.base import unshared_blocks
from convgraph.store.rows import (
    GOSSIP_KEEP,
    FindingRow,
    Pending,
    PendingCheck,
    QuarantineBounds,
    WriteSet,
    finding_cids,
    key_summary,
    manifest_links,
    sort_pairs,
    unique_checks,
)
from convgraph.store.sql_rows import (
    IndexParams,
    artifact_rows,
    branch_row,
    decode_blobs,
    encode_blobs,
    finding_of_row,
    group,
    header_row,
    index_params,
    line_row,
    meta_of_row,
    pending_of_row,
    prefix_range,
    record_params,
    split_cids,
    target_row,
)

# version 2 added the witnessed-history tables (remembered … finding_cites), version 3 the turn
# index (turn_line … turn_hidden_as_of, docs/conversation.md §8); an older file is upgraded in
# place when opened: the DDL below creates what it lacks, the index is filled from the records;
# version 4 added the artifact tables, version 5 `forgotten` (the conversations forgotten here)
SCHEMA_VERSION: Final = 5
_UPGRADABLE: Final = frozenset({"1", "2", "3", "4"})
_INDEXED: Final = frozenset({"3", "4"})  # versions that have the turn index already
_REFERENCED: Final = frozenset({"4"})  # versions that have `artifact_refs` filled already
# the per-conversation tables `forget` empties of one conversation (besides records, pending, blocks)
_CONV_TABLES: Final = ("heads", "snapshots", "equivocations", "remembered", "receipts", "gossip",
                       "pending_checks", "findings", "finding_cites", "turn_line", "turn_targets",
                       "turn_branches", "turn_hidden", "turn_hidden_as_of", "artifact_refs",
                       "block_admitted")
_PAGE: Final = 1000
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    cid BLOB NOT NULL UNIQUE,
    conv TEXT NOT NULL,
    actor BLOB NOT NULL,
    seq INTEGER NOT NULL,
    wall INTEGER NOT NULL,
    counter INTEGER NOT NULL,
    parents BLOB NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS records_order ON records (conv, wall, counter, actor, cid);
CREATE INDEX IF NOT EXISTS records_chain ON records (actor, conv, seq);
CREATE TABLE IF NOT EXISTS heads (conv TEXT NOT NULL, cid BLOB NOT NULL,
    PRIMARY KEY (conv, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending (
    id INTEGER PRIMARY KEY,
    cid BLOB NOT NULL UNIQUE,
    reason TEXT NOT NULL,
    wall INTEGER NOT NULL,
    missing BLOB NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS pending_due ON pending (reason, wall);
CREATE TABLE IF NOT EXISTS pending_missing (missing BLOB NOT NULL, cid BLOB NOT NULL,
    PRIMARY KEY (missing, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (conv TEXT PRIMARY KEY, checkpoint BLOB NOT NULL,
    data BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS equivocations (a BLOB NOT NULL, b BLOB NOT NULL, conv TEXT NOT NULL,
    PRIMARY KEY (a, b)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS http_nonces (actor BLOB NOT NULL, nonce TEXT NOT NULL, expires INTEGER NOT NULL,
    PRIMARY KEY (actor, nonce)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS http_nonces_expiry ON http_nonces (expires);
CREATE TABLE IF NOT EXISTS remembered (peer BLOB NOT NULL, conv TEXT NOT NULL, statement BLOB NOT NULL,
    PRIMARY KEY (peer, conv));
CREATE TABLE IF NOT EXISTS receipts (peer BLOB NOT NULL, conv TEXT NOT NULL, cid BLOB NOT NULL,
    time_ms INTEGER NOT NULL, statement BLOB NOT NULL, PRIMARY KEY (peer, conv, cid));
CREATE TABLE IF NOT EXISTS gossip (conv TEXT NOT NULL, key BLOB NOT NULL, cid BLOB NOT NULL,
    time_ms INTEGER NOT NULL, statement BLOB NOT NULL, PRIMARY KEY (conv, key, cid));
CREATE TABLE IF NOT EXISTS pending_checks (id INTEGER PRIMARY KEY, peer BLOB NOT NULL, conv TEXT NOT NULL,
    reason TEXT NOT NULL, statements BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS pending_checks_of ON pending_checks (peer, conv, id);
CREATE TABLE IF NOT EXISTS findings (id BLOB PRIMARY KEY, conv TEXT NOT NULL, kind TEXT NOT NULL,
    found INTEGER NOT NULL, summary TEXT NOT NULL, cites BLOB NOT NULL, statements BLOB NOT NULL,
    bundle BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS findings_order ON findings (found, id);
CREATE TABLE IF NOT EXISTS finding_cites (conv TEXT NOT NULL, cid BLOB NOT NULL, finding BLOB NOT NULL,
    PRIMARY KEY (conv, cid, finding)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_line (conv TEXT NOT NULL, line TEXT NOT NULL, wall INTEGER NOT NULL,
    counter INTEGER NOT NULL, actor BLOB NOT NULL, cid BLOB NOT NULL, kind TEXT NOT NULL,
    PRIMARY KEY (conv, line, wall, counter, actor, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_targets (conv TEXT NOT NULL, target BLOB NOT NULL, wall INTEGER NOT NULL,
    counter INTEGER NOT NULL, actor BLOB NOT NULL, cid BLOB NOT NULL, kind TEXT NOT NULL,
    PRIMARY KEY (conv, target, wall, counter, actor, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_branches (conv TEXT NOT NULL, name TEXT NOT NULL, wall INTEGER NOT NULL,
    counter INTEGER NOT NULL, actor BLOB NOT NULL, cid BLOB NOT NULL, origin BLOB NOT NULL,
    PRIMARY KEY (conv, name, wall, counter, actor, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_hidden (conv TEXT NOT NULL, cid BLOB NOT NULL,
    PRIMARY KEY (conv, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blocks (id INTEGER PRIMARY KEY, cid BLOB NOT NULL UNIQUE, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS artifact_refs (conv TEXT NOT NULL, cid BLOB NOT NULL, record BLOB NOT NULL,
    PRIMARY KEY (conv, cid, record)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS artifact_refs_cid ON artifact_refs (cid, conv);
CREATE TABLE IF NOT EXISTS block_admitted (conv TEXT NOT NULL, cid BLOB NOT NULL,
    PRIMARY KEY (conv, cid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS block_admitted_cid ON block_admitted (cid, conv);
CREATE TABLE IF NOT EXISTS block_links (manifest BLOB NOT NULL, chunk BLOB NOT NULL,
    PRIMARY KEY (manifest, chunk)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS block_links_chunk ON block_links (chunk, manifest);
CREATE TABLE IF NOT EXISTS turn_hidden_as_of (conv TEXT PRIMARY KEY, cursor INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS forgotten (conv TEXT PRIMARY KEY) WITHOUT ROWID;
"""
_INDEX_INSERTS: Final = (
    "INSERT OR IGNORE INTO turn_line VALUES (?, ?, ?, ?, ?, ?, ?)",
    "INSERT OR IGNORE INTO turn_targets VALUES (?, ?, ?, ?, ?, ?, ?)",
    "INSERT OR IGNORE INTO turn_branches VALUES (?, ?, ?, ?, ?, ?, ?)",
)
_ORDER_DESC: Final = " ORDER BY wall DESC, counter DESC, actor DESC, cid DESC LIMIT ?"

Synchronous = Literal["FULL", "NORMAL"]
# Python 3.11's sqlite3 offers every `bytes` parameter to its adapters first (a failed
# attribute look-up that formats an error message: ~3,000 instructions a value, more than
# its row costs SQLite) but binds a `bytearray` as it is; both are stored as the same BLOB,
# and read back as `bytes`. The per-record paths (commit, the look-ups by CID) bind these.
_blob: Final = bytearray


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


_META_COLS: Final = "cid, conv, actor, seq, wall, counter, parents"
_PENDING_COLS: Final = "cid, reason, wall, missing, data"


class SqliteStore:
    """A `Store` in one SQLite file; safe to share between threads and processes."""

    def __init__(
        self, path: Path | str, *, synchronous: Synchronous = "NORMAL", busy_timeout_s: float = 30.0
    ) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._depth = 0
        self._commits = 0  # ours; `PRAGMA data_version` moves only for other connections'
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
                    for statement in filter(str.strip, _SCHEMA.split(";")):
                        self._db.execute(statement)
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
        the file holds any table."""
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" not in tables:
            raise StoreCorruptError(f"{self.path} is a SQLite database, but not a convgraph store")
        return bool(tables)

    def _check_version(self) -> None:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            if self._db.execute("SELECT 1 FROM records LIMIT 1").fetchone():
                raise StoreCorruptError(f"{self.path} holds records but no schema version")
            self._db.execute(
                "INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
        elif row[0] in _UPGRADABLE:
            if row[0] not in _INDEXED:
                self._backfill_index()
            if row[0] not in _REFERENCED:
                self._backfill_artifact_refs()
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        elif row[0] != str(SCHEMA_VERSION):
            raise StoreSchemaError(f"{self.path} has schema version {row[0]}, expected {SCHEMA_VERSION}")

    def _backfill_index(self) -> None:
        """Fill the turn index from every record held with bytes and every kept snapshot."""
        after = 0
        while rows := self._db.execute(
            "SELECT id, conv, cid, data FROM records WHERE id > ? ORDER BY id LIMIT ?", (after, _PAGE)
        ).fetchall():
            entries = ((conv, entry_from_bytes(CID(cid), data)) for _, conv, cid, data in rows if data)
            self._index((conv, row) for conv, e in entries if (row := row_of(e)) is not None)
            after = rows[-1][0]
        for conv, data in self._db.execute("SELECT conv, data FROM snapshots").fetchall():
            self._index_snapshot(conv, data)

    def _backfill_artifact_refs(self) -> None:
        """Fill `artifact_refs` from every record held with bytes (version 4 added it)."""
        after = 0
        while rows := self._db.execute(
            "SELECT id, cid, data FROM records WHERE id > ? ORDER BY id LIMIT ?", (after, _PAGE)
        ).fetchall():
            self._insert_artifact_refs(load_trusted(data, CID(cid)) for _, cid, data in rows if data)
            after = rows[-1][0]

    def _insert_artifact_refs(self, records: Iterable[Record]) -> None:
        if params := artifact_rows(records):
            self._db.executemany("INSERT OR IGNORE INTO artifact_refs VALUES (?, ?, ?)", params)

    def _index(self, rows: Iterable[tuple[str, Row]]) -> None:
        self._insert_index(index_params(rows))

    def _insert_index(self, params: IndexParams) -> None:
        for sql, batch in zip(_INDEX_INSERTS, params, strict=True):
            if batch:
                self._db.executemany(sql, batch)

    def _index_snapshot(self, conv: str, snapshot: bytes) -> None:
        self._index(snapshot_rows(conv, snapshot))

    @contextmanager
    def transaction(self) -> Iterator[None]:
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
            self._depth = 1
            try:
                yield
            except BaseException:
                self._depth = 0
                self._commits += 1  # a token read after a commit inside must not match what is left
                with _translated():
                    self._db.execute("ROLLBACK")
                raise
            self._depth = 0
            try:
                with _translated():
                    self._db.execute("COMMIT")
            except StoreError:
                if self._db.in_transaction:  # leave the connection usable for the next writer
                    self._db.execute("ROLLBACK")
                raise

    def in_transaction(self) -> bool:
        return self._depth > 0

    @property
    def synchronous(self) -> str:
        """The durability this connection commits with, as SQLite reports it (`FULL`, `NORMAL`, ...)."""
        with self._lock, _translated():
            level = int(self._db.execute("PRAGMA synchronous").fetchone()[0])
        return ("OFF", "NORMAL", "FULL", "EXTRA")[level]

    def change_token(self) -> object:
        return (self._query("PRAGMA data_version")[0][0], self._commits)

    def commit(self, writes: WriteSet) -> None:
        """Apply `writes` atomically; each record's parents must be stored or precede it."""
        with self.transaction(), _translated():
            self._commits += 1
            db = self._db
            stored = set() if writes.fresh else self._stored([r.cid for r in writes.records])
            # dedup, keep order
            fresh = {r.cid: r for r in writes.records if not stored or r.cid not in stored}
            held = self._stored(m.cid for m in writes.headers) if writes.headers else set()
            headers = {m.cid: m for m in writes.headers if m.cid not in held and m.cid not in fresh}
            # one pass over the batch
            rows: list[tuple[object, ...]] = [*map(header_row, headers.values())]
            added: list[tuple[str, CID]] = [(m.conv, m.cid) for m in headers.values()]
            named: set[tuple[str, CID]] = set()
            for m in headers.values():
                named.update((m.conv, p) for p in m.parents)
            for r in fresh.values():
                raw, conv, parents = r.cid, r.conv, r.parents
                wall, counter = r.hlc
                rows.append((_blob(raw), conv, _blob(r.actor), r.seq, wall, counter,
                             _blob(b"".join(parents)), _blob(r.data)))
                added.append((conv, raw))
                named.update((conv, p) for p in parents)
            insert = ("INSERT INTO records (cid, conv, actor, seq, wall, counter, parents, data)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            floor = db.execute("SELECT value FROM meta WHERE key = 'id_floor'").fetchone() if rows else None
            if floor is not None:  # ids a forgotten conversation held are never drawn again
                db.execute("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           (int(floor[0]) + 1, *rows[0]))
                db.execute("DELETE FROM meta WHERE key = 'id_floor'")
                rows = rows[1:]
            db.executemany(insert, rows)
            self._insert_index(record_params(fresh.values(), _blob))
            self._insert_artifact_refs(r for r in fresh.values() if r.refs or r.kind in ARTIFACT_KINDS)
            # parents precede children (the commit precondition), so the batch's effect on
            # heads is: every named parent stops being one, every unnamed new record becomes one
            batch = {raw for _, raw in added}
            db.executemany(  # a parent inside the batch never became a head row
                "DELETE FROM heads WHERE conv = ? AND cid = ?",
                [(c, _blob(p)) for c, p in named if p not in batch],
            )
            db.executemany("INSERT INTO heads VALUES (?, ?)",
                           [(c, _blob(raw)) for c, raw in added if (c, raw) not in named])
            for cid in writes.pending_remove:
                self._unpend(bytes(cid))
            for p in writes.pending_put:  # a later entry for one CID replaces an earlier one
                self._unpend(bytes(p.cid))
                if self.has(p.cid):
                    continue
                db.execute(
                    "INSERT INTO pending (cid, reason, wall, missing, data) VALUES (?, ?, ?, ?, ?)",
                    (bytes(p.cid), p.reason, p.wall_ms, b"".join(map(bytes, p.missing)), p.data),
                )
                db.executemany(
                    "INSERT OR IGNORE INTO pending_missing VALUES (?, ?)",
                    [(bytes(m), bytes(p.cid)) for m in p.missing],
                )
            for a, b in sort_pairs(writes.equivocations):
                metas = self.metas([a, b])
                if len(metas) != 2:
                    raise StoreError("an equivocation pair must name two stored records", cid=str(a))
                db.execute(
                    "INSERT OR IGNORE INTO equivocations VALUES (?, ?, ?)",
                    (bytes(a), bytes(b), metas[a].conv),
                )

    def _rows_for(self, select: str, cids: Iterable[CID]) -> list[Any]:
        """Rows of `select … WHERE cid IN (…)` over `cids`, in chunks SQLite accepts."""
        wanted = [_blob(c) for c in set(cids)]
        rows: list[Any] = []
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            rows += self._query(f"{select} WHERE cid IN ({','.join('?' * len(chunk))})", tuple(chunk))
        return rows

    def _stored(self, cids: Iterable[CID]) -> set[CID]:
        return {CID(r[0]) for r in self._rows_for("SELECT cid FROM records", cids)}

    def _unpend(self, cid: bytes) -> None:
        row = self._db.execute("DELETE FROM pending WHERE cid = ? RETURNING missing", (cid,)).fetchone()
        if row is not None:
            self._db.executemany(
                "DELETE FROM pending_missing WHERE missing = ? AND cid = ?",
                [(bytes(m), cid) for m in split_cids(row[0])],
            )

    def evict_pending(self, bounds: QuarantineBounds) -> list[CID]:
        evicted: list[CID] = []
        with self.transaction(), _translated():
            self._commits += 1
            count, size = self.pending_stats()
            while count > bounds.max_count or size > bounds.max_bytes:
                row = self._db.execute(
                    "SELECT cid, length(data) FROM pending ORDER BY id LIMIT 1"
                ).fetchone()
                if row is None:
                    break
                self._unpend(row[0])
                evicted.append(CID(row[0]))
                count, size = count - 1, size - row[1]
        return evicted

    def _query(self, sql: str, args: tuple[object, ...] = ()) -> list[Any]:
        with self._lock, _translated():
            return self._db.execute(sql, args).fetchall()

    def has(self, cid: CID) -> bool:
        return bool(self._query("SELECT 1 FROM records WHERE cid = ?", (bytes(cid),)))

    def cids_like(self, head: bytes, tail: bytes, limit: int) -> list[CID]:
        # the head is a range of the unique index on cid; the tail is checked row by row
        where, args = prefix_range("cid >= ? AND cid < ?", "cid >= ?", head)
        if tail:
            where.append("substr(cid, -?) = ?")
            args += (len(tail), tail)
        sql = "SELECT cid FROM records" + (" WHERE " + " AND ".join(where) if where else "")
        return [CID(r[0]) for r in self._query(sql + " ORDER BY cid LIMIT ?", (*args, max(0, limit)))]

    def get(self, cid: CID) -> bytes | None:
        rows = self._query("SELECT CAST(data AS BLOB) FROM records WHERE cid = ?", (bytes(cid),))
        return rows[0][0] or None if rows else None

    def get_many(self, cids: Iterable[CID]) -> dict[CID, bytes]:
        rows = self._rows_for("SELECT cid, CAST(data AS BLOB) FROM records", cids)
        return {CID._trusted(c): d for c, d in rows if d}

    def metas(self, cids: Iterable[CID]) -> dict[CID, RecordMeta]:
        metas = (meta_of_row(row) for row in self._rows_for(f"SELECT {_META_COLS} FROM records", cids))
        return {m.cid: m for m in metas}

    def heads(self, conv: str) -> list[CID]:
        rows = self._query("SELECT cid FROM heads WHERE conv = ? ORDER BY cid", (conv,))
        return [CID(r[0]) for r in rows]

    def at_seq(self, actor: bytes, conv: str, seq: int) -> list[CID]:
        rows = self._query(
            "SELECT cid FROM records WHERE actor = ? AND conv = ? AND seq = ? ORDER BY cid",
            (actor, conv, seq),
        )
        return [CID(r[0]) for r in rows]

    def last_own(self, actor: bytes, conv: str) -> RecordMeta | None:
        rows = self._query(
            f"SELECT {_META_COLS} FROM records WHERE actor = ? AND conv = ?"
            " ORDER BY seq DESC, cid DESC LIMIT 1",
            (actor, conv),
        )
        return meta_of_row(rows[0]) if rows else None

    def records(self, conv: str, last: int | None = None) -> list[tuple[CID, bytes]]:
        if last is None:
            rows = self._query(
                "SELECT cid, data FROM records WHERE conv = ? AND length(data) > 0"
                " ORDER BY wall, counter, actor, cid",
                (conv,),
            )
        else:
            rows = self._query(
                "SELECT cid, data FROM records WHERE conv = ? AND length(data) > 0"
                " ORDER BY wall DESC, counter DESC, actor DESC, cid DESC LIMIT ?",
                (conv, max(0, last)),
            )
            rows.reverse()
        return [(CID._trusted(c), d) for c, d in rows]

    def records_after(self, conv: str, after: OrderKey | None, limit: int) -> list[tuple[CID, bytes]]:
        where = "" if after is None else " AND (wall, counter, actor, cid) > (?, ?, ?, ?)"
        rows = self._query(
            f"SELECT cid, data FROM records WHERE conv = ? AND length(data) > 0{where}"
            " ORDER BY wall, counter, actor, cid LIMIT ?",
            (conv, *(after or ()), max(0, limit)),
        )
        return [(CID._trusted(c), d) for c, d in rows]

    def first(self, conv: str) -> tuple[CID, bytes] | None:
        rows = self._query(
            "SELECT cid, data FROM records WHERE conv = ? AND length(data) > 0"
            " ORDER BY wall, counter, actor, cid LIMIT 1",
            (conv,),
        )
        return (CID._trusted(rows[0][0]), rows[0][1]) if rows else None

    def conversations(self) -> list[str]:
        return [r[0] for r in self._query("SELECT DISTINCT conv FROM heads ORDER BY conv")]

    def count(self, conv: str | None = None) -> int:
        if conv is None:
            rows = self._query("SELECT count(*) FROM records")
        else:
            rows = self._query("SELECT count(*) FROM records WHERE conv = ?", (conv,))
        return int(rows[0][0])

    def iter_all(self) -> Iterator[tuple[CID, bytes]]:
        after = 0
        while True:
            rows = self._query(
                "SELECT id, cid, CAST(data AS BLOB) FROM records WHERE id > ? ORDER BY id LIMIT ?",
                (after, _PAGE),
            )
            if not rows:
                return
            for _, cid, data in rows:
                if data:  # compacted: only the header is kept
                    yield CID(cid), data
            after = rows[-1][0]

    def since(self, cursor: int, conv: str) -> tuple[list[tuple[CID, bytes]], int]:
        # a tail walks the ids after the cursor (`+conv`: not the conversation's index); the whole
        # conversation (cursor 0) is its index's range, not a scan of every record held
        column = "conv" if cursor == 0 else "+conv"
        writing = self.in_transaction()
        with self.reading():  # the rows and the newest id of one snapshot
            rows = self._query(
                f"SELECT id, cid, CAST(data AS BLOB) FROM records WHERE id > ? AND {column} = ? ORDER BY id",
                (cursor, conv),
            )
            # outside a transaction, the store's newest id: the next tail starts there, not at this
            # conversation's last record (inside one, ids may yet roll back and be drawn again)
            top = 0 if writing else self.cursor()
        found = [(CID._trusted(c), d) for _, c, d in rows if d]
        return found, max(rows[-1][0] if rows else cursor, top)

    def arrivals(self, cursor: int, limit: int) -> tuple[list[tuple[str, CID, bytes]], int]:
        rows = self._query("SELECT id, conv, cid, data FROM records WHERE id > ? ORDER BY id LIMIT ?",
                           (cursor, limit))
        found = [(conv, CID._trusted(c), d) for _, conv, c, d in rows if d]
        return found, rows[-1][0] if rows else cursor

    def sync_keys(self, conv: str) -> list[tuple[int, bytes]]:
        # an index-only scan of `records_order`, sorted here: no second index to maintain
        rows = self._query("SELECT wall, cid FROM records WHERE conv = ?", (conv,))
        return sorted((wall, cid[4:]) for wall, cid in rows)

    def cursor(self) -> int:
        return int(self._query("SELECT max(coalesce(max(id), 0), coalesce((SELECT CAST(value AS INTEGER)"
                               " FROM meta WHERE key = 'id_floor'), 0)) FROM records")[0][0])

    def conv_token(self, conv: str) -> object:  # noqa: ARG002 (coarse until per-conversation rows)
        return self.change_token()

    def keys_since(self, conv: str, cursor: int) -> tuple[list[tuple[int, bytes]], int]:
        column = "conv" if cursor == 0 else "+conv"  # as in `since`
        writing = self.in_transaction()
        with self.reading():
            rows = self._query(f"SELECT id, wall, cid FROM records WHERE id > ? AND {column} = ?",
                               (cursor, conv))
            top = 0 if writing else self.cursor()
        found = [(wall, cid[4:]) for _, wall, cid in rows]
        return found, max(max((r[0] for r in rows), default=cursor), top)

    def key_summary(self, conv: str) -> tuple[int, int]:
        return key_summary(self.sync_keys(conv))

    def compact(self, conv: str, covered: Iterable[CID], checkpoint: CID, snapshot: bytes) -> None:
        with self.transaction(), _translated():
            self._commits += 1
            wanted = {bytes(c) for c in covered}
            found = {bytes(m.cid) for m in self.metas(map(CID._trusted, wanted)).values() if m.conv == conv}
            if found != wanted:
                raise StoreError("compaction names a record this conversation does not hold")
            evidence = {bytes(c) for c in self._evidence(conv)}
            self._db.executemany("UPDATE records SET data = x'' WHERE cid = ?",
                                 [(c,) for c in wanted - evidence])
            self._db.execute(
                "INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?)", (conv, bytes(checkpoint), snapshot)
            )
            self._index_snapshot(conv, snapshot)  # rows of an adopted conversation's records

    def snapshot(self, conv: str) -> tuple[CID, bytes] | None:
        rows = self._query("SELECT checkpoint, data FROM snapshots WHERE conv = ?", (conv,))
        return (CID(rows[0][0]), rows[0][1]) if rows else None

    def max_hlc(self) -> Hlc:
        # each conversation's newest record is the end of its range of `records_order`: one
        # index probe per conversation (every one has a head), never a scan of every record
        rows = self._query(
            "SELECT r.wall, r.counter FROM (SELECT DISTINCT conv FROM heads) h JOIN records r ON r.id ="
            " (SELECT id FROM records q WHERE q.conv = h.conv ORDER BY q.wall DESC, q.counter DESC LIMIT 1)"
            " ORDER BY r.wall DESC, r.counter DESC LIMIT 1"
        )
        return Hlc(*rows[0]) if rows else ZERO

    def pending_get(self, cids: Iterable[CID]) -> dict[CID, Pending]:
        found: dict[CID, Pending] = {}
        for cid in set(cids):
            rows = self._query(f"SELECT {_PENDING_COLS} FROM pending WHERE cid = ?", (bytes(cid),))
            if rows:
                found[cid] = pending_of_row(rows[0])
        return found

    def pending_waiting_on(self, cids: Iterable[CID]) -> list[Pending]:
        found: dict[CID, Pending] = {}
        for cid in cids:
            rows = self._query(
                f"SELECT {', '.join('p.' + c for c in _PENDING_COLS.split(', '))} FROM pending_missing m"
                " JOIN pending p ON p.cid = m.cid WHERE m.missing = ?",
                (bytes(cid),),
            )
            for row in rows:
                entry = pending_of_row(row)
                found[entry.cid] = entry
        return [found[c] for c in sorted(found)]

    def pending_due(self, wall_ms: int) -> list[Pending]:
        rows = self._query(
            f"SELECT {_PENDING_COLS} FROM pending WHERE reason = 'clock' AND wall <= ? ORDER BY id",
            (wall_ms,),
        )
        return [pending_of_row(r) for r in rows]

    def pending_stats(self) -> tuple[int, int]:
        row = self._query("SELECT count(*), coalesce(sum(length(data)), 0) FROM pending")[0]
        return int(row[0]), int(row[1])

    def equivocations(self, conv: str | None = None) -> list[tuple[CID, CID]]:
        if conv is None:
            rows = self._query("SELECT a, b FROM equivocations ORDER BY a, b")
        else:
            rows = self._query("SELECT a, b FROM equivocations WHERE conv = ? ORDER BY a, b", (conv,))
        return [(CID(a), CID(b)) for a, b in rows]

    def _evidence(self, conv: str) -> set[CID]:
        """Records whose bytes compaction keeps: cited by a finding, or equivocating."""
        rows = self._query("SELECT cid FROM finding_cites WHERE conv = ? UNION SELECT a FROM equivocations"
                           " WHERE conv = ? UNION SELECT b FROM equivocations WHERE conv = ?", (conv,) * 3)
        return {CID(r[0]) for r in rows}

    # ------------------------------------------------------------ the turn index

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

    def line(self, conv: str, line: str, below: OrderKey | None, limit: int) -> list[LineRow]:
        select = "SELECT wall, counter, actor, cid, kind FROM turn_line WHERE conv = ? AND line = ?"
        if below is None:  # an index-only scan of the primary key, backwards
            rows = self._query(select + _ORDER_DESC, (conv, line, limit))
        else:
            before = " AND (wall, counter, actor, cid) < (?, ?, ?, ?)"
            rows = self._query(select + before + _ORDER_DESC, (conv, line, *below, limit))
        return [LineRow(line, (w, c, a, cid), kind) for w, c, a, cid, kind in rows]  # ints and bytes already

    def targets(self, conv: str, targets: Iterable[CID]) -> list[tuple[TargetRow, bytes]]:
        wanted = [bytes(c) for c in set(targets)]
        rows: list[Any] = []
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            rows += self._query(
                "SELECT t.target, t.wall, t.counter, t.actor, t.cid, t.kind, CAST(r.data AS BLOB)"
                " FROM turn_targets t JOIN records r ON r.cid = t.cid"
                f" WHERE t.conv = ? AND t.target IN ({','.join('?' * len(chunk))})", (conv, *chunk))
        return [(target_row(r[:6]), r[6]) for r in rows]

    def branch_rows(self, conv: str, name: str) -> list[BranchRow]:
        rows = self._query("SELECT wall, counter, actor, cid, origin FROM turn_branches"
                           " WHERE conv = ? AND name = ? ORDER BY wall, counter, actor, cid", (conv, name))
        return [branch_row(name, r) for r in rows]

    def index_rows(self, conv: str) -> list[Row]:
        cols = "wall, counter, actor, cid"
        lines = self._query(f"SELECT line, {cols}, kind FROM turn_line WHERE conv = ?", (conv,))
        targets = self._query(f"SELECT target, {cols}, kind FROM turn_targets WHERE conv = ?", (conv,))
        branches = self._query(f"SELECT name, {cols}, origin FROM turn_branches WHERE conv = ?", (conv,))
        return [*(line_row(r[0], r[1:]) for r in lines), *map(target_row, targets),
                *(branch_row(r[0], r[1:]) for r in branches)]

    def reindex(self, conv: str, rows: Iterable[Row]) -> None:
        with self.transaction(), _translated():
            self._commits += 1  # the views read these rows: cached answers must see the change
            for table in ("turn_line", "turn_targets", "turn_branches"):
                self._db.execute(f"DELETE FROM {table} WHERE conv = ?", (conv,))
            self._index((conv, row) for row in rows)

    def hidden(self, conv: str) -> frozenset[CID] | None:
        with self.reading():
            marker = self._query("SELECT cursor FROM turn_hidden_as_of WHERE conv = ?", (conv,))
            # `+conv`: walk the ids after the marker, not every record of the conversation
            if not marker or self._query("SELECT 1 FROM records WHERE id > ? AND +conv = ? LIMIT 1",
                                         (marker[0][0], conv)):
                return None
            rows = self._query("SELECT cid FROM turn_hidden WHERE conv = ?", (conv,))
            return frozenset(CID(r[0]) for r in rows)

    def set_hidden(self, conv: str, cids: Iterable[CID]) -> None:
        wanted = {bytes(c) for c in cids}
        with self.transaction(), _translated():
            db = self._db
            if {r[0] for r in db.execute("SELECT cid FROM turn_hidden WHERE conv = ?", (conv,))} != wanted:
                self._commits += 1  # a moved marker alone changes no view (index and fold agree)
                db.execute("DELETE FROM turn_hidden WHERE conv = ?", (conv,))
                db.executemany("INSERT INTO turn_hidden VALUES (?, ?)", [(conv, c) for c in sorted(wanted)])
            db.execute("INSERT OR REPLACE INTO turn_hidden_as_of VALUES (?, (SELECT coalesce(max(id), 0)"
                       " FROM records))", (conv,))

    # ------------------------------------------------------------ witnessed history

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        with self.transaction(), _translated():
            self._db.executemany(sql, rows)

    def remember(self, statement: Statement) -> None:
        self._write("INSERT OR REPLACE INTO remembered VALUES (?, ?, ?)",
                    [(statement.key, statement.conv, statement.data)])

    def remembered(self, peer: bytes, conv: str) -> bytes | None:
        rows = self._query("SELECT statement FROM remembered WHERE peer = ? AND conv = ?", (peer, conv))
        return bytes(rows[0][0]) if rows else None

    def remembered_in(self, conv: str) -> list[bytes]:
        rows = self._query("SELECT statement FROM remembered WHERE conv = ? ORDER BY peer", (conv,))
        return [bytes(r[0]) for r in rows]

    def add_receipts(self, receipts: Iterable[Statement]) -> None:
        self._write("INSERT OR IGNORE INTO receipts VALUES (?, ?, ?, ?, ?)",
                    [(r.key, r.conv, bytes(r.cid), r.time_ms, r.data) for r in receipts])

    def open_receipts(self, peer: bytes, conv: str) -> list[bytes]:
        rows = self._query("SELECT statement FROM receipts WHERE peer = ? AND conv = ? ORDER BY time_ms, cid",
                           (peer, conv))
        return [bytes(r[0]) for r in rows]

    def close_receipts(self, peer: bytes, conv: str, cids: Iterable[CID]) -> None:
        self._write("DELETE FROM receipts WHERE peer = ? AND conv = ? AND cid = ?",
                    [(peer, conv, bytes(c)) for c in cids])

    def add_gossip(self, statement: Statement) -> None:
        with self.transaction(), _translated():
            where = (statement.conv, statement.key)
            self._db.execute("INSERT OR IGNORE INTO gossip VALUES (?, ?, ?, ?, ?)",
                             (*where, bytes(statement.cid), statement.time_ms, statement.data))
            self._db.execute(
                "DELETE FROM gossip WHERE conv = ? AND key = ? AND cid NOT IN (SELECT cid FROM gossip"
                " WHERE conv = ? AND key = ? ORDER BY time_ms DESC, cid DESC LIMIT ?)"
                " AND cid NOT IN (SELECT cid FROM finding_cites WHERE conv = ?)",
                (*where, *where, GOSSIP_KEEP, statement.conv),
            )

    def gossip(self, conv: str) -> list[bytes]:
        rows = self._query("SELECT statement FROM gossip WHERE conv = ? ORDER BY time_ms DESC, cid DESC",
                           (conv,))
        return [bytes(r[0]) for r in rows]

    def pending_checks(self, peer: bytes, conv: str) -> list[PendingCheck]:
        rows = self._query("SELECT reason, statements FROM pending_checks WHERE peer = ? AND conv = ?"
                           " ORDER BY id", (peer, conv))
        return [PendingCheck(reason, decode_blobs(data)) for reason, data in rows]

    def set_pending_checks(self, peer: bytes, conv: str, checks: Sequence[PendingCheck]) -> None:
        with self.transaction(), _translated():
            self._db.execute("DELETE FROM pending_checks WHERE peer = ? AND conv = ?", (peer, conv))
            self._db.executemany(
                "INSERT INTO pending_checks (peer, conv, reason, statements) VALUES (?, ?, ?, ?)",
                [(peer, conv, c.reason, encode_blobs(c.statements)) for c in unique_checks(checks)],
            )

    def add_finding(self, finding: FindingRow) -> bool:
        with self.transaction(), _translated():
            f = finding
            added = self._db.execute(
                "INSERT OR IGNORE INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (bytes(f.id), f.conv, f.kind, f.found_ms, f.summary, b"".join(map(bytes, f.cites)),
                 encode_blobs(f.statements), f.bundle),
            ).rowcount == 1
            if added:
                self._db.executemany("INSERT OR IGNORE INTO finding_cites VALUES (?, ?, ?)",
                                     [(f.conv, bytes(c), bytes(f.id)) for c in finding_cids(f)])
            return added

    def findings(self, conv: str | None = None) -> list[FindingRow]:
        select = "SELECT id, kind, conv, bundle, cites, statements, summary, found FROM findings"
        if conv is None:
            rows = self._query(select + " ORDER BY found, id")
        else:
            rows = self._query(select + " WHERE conv = ? ORDER BY found, id", (conv,))
        return [finding_of_row(r) for r in rows]

    def cited(self, conv: str) -> set[CID]:
        return {CID(r[0]) for r in self._query("SELECT cid FROM finding_cites WHERE conv = ?", (conv,))}

    def put_blocks(self, blocks: Iterable[tuple[CID, bytes]]) -> None:
        # no `_commits` bump: blocks change no view of the records, so cached views stay valid
        blocks = list(blocks)
        with self.transaction(), _translated():
            self._db.executemany("INSERT OR IGNORE INTO blocks (cid, data) VALUES (?, ?)",
                                 ((_blob(bytes(c)), d) for c, d in blocks))
            if links := manifest_links(blocks):
                self._db.executemany("INSERT OR IGNORE INTO block_links VALUES (?, ?)", links)

    def get_block(self, cid: CID) -> bytes | None:
        rows = self._query("SELECT data FROM blocks WHERE cid = ?", (bytes(cid),))
        return bytes(rows[0][0]) if rows else None

    def has_blocks(self, cids: Iterable[CID]) -> set[CID]:
        wanted = {bytes(c): c for c in cids}
        rows = self._rows_in("SELECT cid FROM blocks WHERE cid IN ({})", wanted)
        return {wanted[bytes(r[0])] for r in rows}

    def _rows_in(self, sql: str, keys: Iterable[object], head: tuple[object, ...] = ()) -> list[Any]:
        """The rows of `sql` (its `{}` a list of `keys`, after the arguments `head`), 500 keys a
        query: SQLite's limit on arguments."""
        ordered, rows = list(keys), []
        for i in range(0, len(ordered), 500):
            part = ordered[i : i + 500]
            rows += self._query(sql.format(",".join("?" * len(part))), (*head, *part))
        return rows

    def block_cids(self) -> Iterator[CID]:
        after = b""  # below every CID; the UNIQUE index on cid pages in binary order
        page = "SELECT cid FROM blocks WHERE cid > ? ORDER BY cid LIMIT ?"
        while rows := self._query(page, (after, _PAGE)):
            yield from (CID(r[0]) for r in rows)
            after = rows[-1][0]

    def artifact_refs(self, conv: str) -> set[CID]:
        rows = self._query("SELECT DISTINCT cid FROM artifact_refs WHERE conv = ?", (conv,))
        return {CID(bytes(r[0])) for r in rows}

    def records_naming(self, conv: str, cids: Iterable[CID]) -> dict[CID, set[CID]]:
        sql = "SELECT cid, record FROM artifact_refs WHERE conv = ? AND cid IN ({})"
        return group(self._rows_in(sql, {bytes(c) for c in cids}, (conv,)))

    def conversations_naming(self, cids: Iterable[CID]) -> set[str]:
        sql = "SELECT DISTINCT conv FROM artifact_refs WHERE cid IN ({})"
        return {r[0] for r in self._rows_in(sql, {bytes(c) for c in cids})}

    def admit_blocks(self, conv: str, cids: Iterable[CID]) -> None:
        with self.transaction(), _translated():
            self._db.executemany("INSERT OR IGNORE INTO block_admitted VALUES (?, ?)",
                                 [(conv, _blob(bytes(c))) for c in set(cids)])

    def admitted(self, conv: str, cids: Iterable[CID]) -> set[CID]:
        wanted = {bytes(c): c for c in cids}
        sql = "SELECT cid FROM block_admitted WHERE conv = ? AND cid IN ({})"
        return {wanted[bytes(r[0])] for r in self._rows_in(sql, set(wanted), (conv,))}

    def admitting(self, cids: Iterable[CID]) -> set[str]:
        sql = "SELECT DISTINCT conv FROM block_admitted WHERE cid IN ({})"
        return {r[0] for r in self._rows_in(sql, {bytes(c) for c in cids})}

    def chunks_of(self, manifests: Iterable[CID]) -> dict[CID, set[CID]]:
        sql = "SELECT manifest, chunk FROM block_links WHERE manifest IN ({})"
        return group(self._rows_in(sql, {bytes(c) for c in manifests}))

    def manifests_of(self, chunks: Iterable[CID]) -> dict[CID, set[CID]]:
        sql = "SELECT chunk, manifest FROM block_links WHERE chunk IN ({})"
        return group(self._rows_in(sql, {bytes(c) for c in chunks}))

    # ------------------------------------------------------------ forgetting

    def forget(self, conv: str) -> None:
        with self._lock:
            outer = self._depth > 0
            with _translated():  # deleted cells are zeroed, not left in the pages' free space
                self._db.execute("PRAGMA secure_delete = ON")
            try:
                with self.transaction(), _translated():
                    self._commits += 1
                    db = self._db
                    dropped = [(_blob(bytes(c)),) for c in unshared_blocks(self, conv)]
                    top = self.cursor()
                    db.execute("DELETE FROM records WHERE conv = ?", (conv,))
                    if self.cursor() < top:  # `since` cursors handed out stay valid: no id drawn twice
                        db.execute("INSERT OR REPLACE INTO meta VALUES ('id_floor', ?)", (str(top),))
                    for table in _CONV_TABLES:
                        db.execute(f"DELETE FROM {table} WHERE conv = ?", (conv,))
                    waiting = db.execute(f"SELECT {_PENDING_COLS} FROM pending").fetchall()
                    for entry in map(pending_of_row, waiting):  # the quarantine keeps no conv column
                        if load_trusted(entry.data, entry.cid).conv == conv:
                            self._unpend(bytes(entry.cid))
                    db.executemany("DELETE FROM blocks WHERE cid = ?", dropped)
                    db.executemany("DELETE FROM block_links WHERE manifest = ?", dropped)
                    db.execute("INSERT OR IGNORE INTO forgotten VALUES (?)", (conv,))
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

    def forgotten(self, convs: Iterable[str]) -> set[str]:
        return {r[0] for r in self._rows_in("SELECT conv FROM forgotten WHERE conv IN ({})", set(convs))}

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
