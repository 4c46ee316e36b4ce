"""The server-scale store: every table in one PostgreSQL schema, reached through a pool.

Writers take a transaction-scoped advisory lock keyed by the schema right after `BEGIN`
(what SQLite's `BEGIN IMMEDIATE` does), so read-then-write steps serialise across threads,
processes and server instances; a thread inside `transaction()` makes every read and commit
on the one connection it borrowed, other threads read committed state through the pool.
Every commit sets a version row from a sequence (never reused, even by a rollback): that
is the change token. Each conversation that received records is announced with `pg_notify`
on `notify_channel`, delivered only if the transaction commits; `listen()` streams those.
Every psycopg error leaves this module as a `StoreError` subclass. Invariant: a commit
lands whole or not at all, and `heads` always equals the records that no stored record
names as a parent.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, Final

from convgraph.artifacts.links import ARTIFACT_KINDS
from convgraph.core.cid import CID
from convgraph.core.hlc import ZERO, Hlc
from convgraph.core.record import Record, RecordMeta, load_trusted
from convgraph.errors import (
    MissingExtraError,
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
    target_row,
)

try:  # the [postgres] extra: without it, a typed error that says what to install
    import psycopg
    from psycopg import errors as pgerrors
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.pq import TransactionStatus
    from psycopg.rows import TupleRow
    from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout
except ModuleNotFoundError as exc:
    raise MissingExtraError("postgres", "the PostgreSQL store", module=exc.name) from exc

# version 2 added the witnessed-history tables (`_DDL_V2`), version 3 the turn index (`_DDL_V3`,
# docs/conversation.md §8); an older schema is upgraded in place when opened, under the setup
# lock, the index filled from the records; version 4 the artifact tables (`_DDL_V4`,
# docs/format.md §17), `artifact_refs` filled from the records; version 5 `forgotten` (`_DDL_V5`)
SCHEMA_VERSION: Final = 5
_UPGRADABLE: Final = frozenset({1, 2, 3, 4})
_PAGE: Final = 1000
_MAX_NAME: Final = 63  # PostgreSQL truncates longer identifiers (NAMEDATALEN - 1)
_TABLES_V1: Final = frozenset({"meta", "records", "heads", "pending", "pending_missing", "snapshots",
                               "equivocations"})
_TABLES_V2: Final = _TABLES_V1 | {"remembered", "receipts", "gossip", "pending_checks", "findings",
                                  "finding_cites"}
_TABLES_V3: Final = _TABLES_V2 | {"turn_line", "turn_targets", "turn_branches", "turn_hidden",
                                  "turn_hidden_as_of"}
_TABLES_V4: Final = _TABLES_V3 | {"blocks", "artifact_refs", "block_links", "block_admitted"}
_TABLES: Final = _TABLES_V4 | {"forgotten"}
# the per-conversation tables `forget` empties of one conversation (besides records, pending, blocks)
_CONV_TABLES: Final = ("heads", "snapshots", "equivocations", "remembered", "receipts", "gossip",
                       "pending_checks", "findings", "finding_cites", "turn_line", "turn_targets",
                       "turn_branches", "turn_hidden", "turn_hidden_as_of", "artifact_refs",
                       "block_admitted")
# conv is COLLATE "C": code-point order, as Python's sorted() and SQLite's BINARY give
_DDL: Final = """
CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value bigint NOT NULL);
CREATE SEQUENCE IF NOT EXISTS {s}.version_seq;
CREATE TABLE IF NOT EXISTS {s}.records (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cid bytea NOT NULL UNIQUE, conv text COLLATE "C" NOT NULL, actor bytea NOT NULL, seq bigint NOT NULL,
    wall bigint NOT NULL, counter bigint NOT NULL, parents bytea NOT NULL, data bytea NOT NULL);
CREATE INDEX IF NOT EXISTS records_order ON {s}.records (conv, wall, counter, actor, cid);
CREATE INDEX IF NOT EXISTS records_chain ON {s}.records (actor, conv, seq);
CREATE TABLE IF NOT EXISTS {s}.heads (conv text COLLATE "C" NOT NULL, cid bytea NOT NULL,
    PRIMARY KEY (conv, cid));
CREATE TABLE IF NOT EXISTS {s}.pending (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cid bytea NOT NULL UNIQUE, reason text NOT NULL, wall bigint NOT NULL, missing bytea NOT NULL,
    data bytea NOT NULL);
CREATE INDEX IF NOT EXISTS pending_due ON {s}.pending (reason, wall);
CREATE TABLE IF NOT EXISTS {s}.pending_missing (missing bytea NOT NULL, cid bytea NOT NULL,
    PRIMARY KEY (missing, cid));
CREATE INDEX IF NOT EXISTS pending_missing_cid ON {s}.pending_missing (cid);
CREATE TABLE IF NOT EXISTS {s}.snapshots (conv text COLLATE "C" PRIMARY KEY, checkpoint bytea NOT NULL,
    data bytea NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.equivocations (a bytea NOT NULL, b bytea NOT NULL,
    conv text COLLATE "C" NOT NULL, PRIMARY KEY (a, b));
"""
_DDL_V2: Final = """
CREATE TABLE IF NOT EXISTS {s}.remembered (peer bytea NOT NULL, conv text COLLATE "C" NOT NULL,
    statement bytea NOT NULL, PRIMARY KEY (peer, conv));
CREATE TABLE IF NOT EXISTS {s}.receipts (peer bytea NOT NULL, conv text COLLATE "C" NOT NULL,
    cid bytea NOT NULL, time_ms bigint NOT NULL, statement bytea NOT NULL, PRIMARY KEY (peer, conv, cid));
CREATE TABLE IF NOT EXISTS {s}.gossip (conv text COLLATE "C" NOT NULL, key bytea NOT NULL, cid bytea NOT NULL,
    time_ms bigint NOT NULL, statement bytea NOT NULL, PRIMARY KEY (conv, key, cid));
CREATE TABLE IF NOT EXISTS {s}.pending_checks (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    peer bytea NOT NULL, conv text COLLATE "C" NOT NULL, reason text NOT NULL, statements bytea NOT NULL);
CREATE INDEX IF NOT EXISTS pending_checks_of ON {s}.pending_checks (peer, conv, id);
CREATE TABLE IF NOT EXISTS {s}.findings (id bytea PRIMARY KEY, conv text COLLATE "C" NOT NULL,
    kind text NOT NULL, found bigint NOT NULL, summary text NOT NULL, cites bytea NOT NULL,
    statements bytea NOT NULL, bundle bytea NOT NULL);
CREATE INDEX IF NOT EXISTS findings_order ON {s}.findings (found, id);
CREATE TABLE IF NOT EXISTS {s}.finding_cites (conv text COLLATE "C" NOT NULL, cid bytea NOT NULL,
    finding bytea NOT NULL, PRIMARY KEY (conv, cid, finding));
"""
_DDL_V4: Final = """
CREATE TABLE IF NOT EXISTS {s}.blocks (cid bytea PRIMARY KEY, data bytea NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.artifact_refs (conv text COLLATE "C" NOT NULL, cid bytea NOT NULL,
    record bytea NOT NULL, PRIMARY KEY (conv, cid, record));
CREATE INDEX IF NOT EXISTS artifact_refs_cid ON {s}.artifact_refs (cid, conv);
CREATE TABLE IF NOT EXISTS {s}.block_admitted (conv text COLLATE "C" NOT NULL, cid bytea NOT NULL,
    PRIMARY KEY (conv, cid));
CREATE INDEX IF NOT EXISTS block_admitted_cid ON {s}.block_admitted (cid, conv);
CREATE TABLE IF NOT EXISTS {s}.block_links (manifest bytea NOT NULL, chunk bytea NOT NULL,
    PRIMARY KEY (manifest, chunk));
CREATE INDEX IF NOT EXISTS block_links_chunk ON {s}.block_links (chunk, manifest);
"""
_DDL_V5: Final = """
CREATE TABLE IF NOT EXISTS {s}.forgotten (conv text COLLATE "C" PRIMARY KEY);
"""
_DDL_V3: Final = """
CREATE TABLE IF NOT EXISTS {s}.turn_line (conv text COLLATE "C" NOT NULL, line text COLLATE "C" NOT NULL,
    wall bigint NOT NULL, counter bigint NOT NULL, actor bytea NOT NULL, cid bytea NOT NULL,
    kind text NOT NULL, PRIMARY KEY (conv, line, wall, counter, actor, cid));
CREATE TABLE IF NOT EXISTS {s}.turn_targets (conv text COLLATE "C" NOT NULL, target bytea NOT NULL,
    wall bigint NOT NULL, counter bigint NOT NULL, actor bytea NOT NULL, cid bytea NOT NULL,
    kind text NOT NULL, PRIMARY KEY (conv, target, wall, counter, actor, cid));
CREATE TABLE IF NOT EXISTS {s}.turn_branches (conv text COLLATE "C" NOT NULL, name text COLLATE "C" NOT NULL,
    wall bigint NOT NULL, counter bigint NOT NULL, actor bytea NOT NULL, cid bytea NOT NULL,
    origin bytea NOT NULL, PRIMARY KEY (conv, name, wall, counter, actor, cid));
CREATE TABLE IF NOT EXISTS {s}.turn_hidden (conv text COLLATE "C" NOT NULL, cid bytea NOT NULL,
    PRIMARY KEY (conv, cid));
CREATE TABLE IF NOT EXISTS {s}.turn_hidden_as_of (conv text COLLATE "C" PRIMARY KEY, cursor bigint NOT NULL);
"""
_INDEX_INSERTS: Final = (
    "INSERT INTO {s}.turn_line VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
    "INSERT INTO {s}.turn_targets VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
    "INSERT INTO {s}.turn_branches VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
)
_ARTIFACT_REFS_INSERT: Final = "INSERT INTO {s}.artifact_refs VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
_ADMIT_INSERT: Final = "INSERT INTO {s}.block_admitted VALUES (%s, %s) ON CONFLICT DO NOTHING"
_BLOCK_LINKS_INSERT: Final = "INSERT INTO {s}.block_links VALUES (%s, %s) ON CONFLICT DO NOTHING"
_BLOCKS_INSERT: Final = "INSERT INTO {s}.blocks VALUES (%s, %s) ON CONFLICT DO NOTHING"
_ORDER_DESC: Final = " ORDER BY wall DESC, counter DESC, actor DESC, cid DESC LIMIT %s"
_ANALYZE_MIN: Final = 1_000  # rows committed before a store's first ANALYZE of its tables
_ANALYZE: Final = "ANALYZE {s}.records, {s}.heads, {s}.turn_line, {s}.turn_targets, {s}.turn_branches"
_META_COLS: Final = "cid, conv, actor, seq, wall, counter, parents"
_PENDING_COLS: Final = "cid, reason, wall, missing, data"
_BUSY: Final = (pgerrors.LockNotAvailable, pgerrors.QueryCanceled, pgerrors.DeadlockDetected)
_NOT_OURS: Final = (pgerrors.UndefinedTable, pgerrors.UndefinedColumn, pgerrors.InvalidSchemaName,
                    pgerrors.DatatypeMismatch, pgerrors.UndefinedObject, pgerrors.UndefinedFunction)
_Conn = psycopg.Connection[TupleRow]


def _why(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _describe(dsn: str) -> str:
    """host:port/db of a DSN, for messages: never its password."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        raise StoreError("the PostgreSQL connection string is malformed") from None  # it may hold a password
    host = params.get("host") or params.get("hostaddr") or "localhost"
    return f"{host}:{params.get('port') or 5432}/{params.get('dbname') or params.get('user') or 'postgres'}"


def _channel(schema: str) -> str:
    name = "convgraph_" + schema
    fits = len(name.encode()) <= _MAX_NAME
    return name if fits else "convgraph_" + hashlib.sha256(name.encode()).hexdigest()[:32]


class PostgresStore:
    """A `Store` in one PostgreSQL schema; safe to share between threads, processes and hosts."""

    # The DDL hook: called with the set-up connection and the schema name, inside the set-up
    # transaction, right after this store created or upgraded its tables (before any row is
    # written). A distributed engine places the new tables here: tests/citus.py distributes
    # them on Citus (docs/scale.md). It must leave alone tables it already placed.
    on_create: ClassVar[Callable[[psycopg.Connection[Any], str], None] | None] = None

    def __init__(
        self, dsn: str, *, schema: str = "convgraph", pool_size: int = 8, busy_timeout_s: float = 30.0
    ) -> None:
        if not schema or len(schema.encode()) > _MAX_NAME:
            raise StoreError(f"a PostgreSQL schema name must be 1 to {_MAX_NAME} bytes")
        self.schema, self._where = schema, f"PostgreSQL at {_describe(dsn)} (schema {schema!r})"
        self._s = sql.Identifier(schema).as_string()
        self._seq = f"{self._s}.version_seq"
        digest = hashlib.sha256(b"convgraph/store\n" + schema.encode()).digest()
        self._lock_key = int.from_bytes(digest[:8], "big", signed=True)
        self._local = threading.local()  # .conn and .depth: this thread's open transaction
        self._stats_lock, self._grown, self._analyzed = threading.Lock(), 0, 0  # _keep_statistics
        self._timeout = max(busy_timeout_s, 0.001)
        self._lock_timeout = f"{max(1, math.ceil(busy_timeout_s * 1000))}ms"
        defaults = {"connect_timeout": max(2, math.ceil(min(self._timeout, 30))),
                    "application_name": f"convgraph/{schema}"}
        kwargs: dict[str, Any] = {"autocommit": True}
        kwargs |= {k: v for k, v in defaults.items() if k not in conninfo_to_dict(dsn)}  # the DSN's win
        try:  # one direct connection first: a bad address fails now, and clearly
            first = psycopg.connect(dsn, **kwargs)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to {self._where}: {_why(exc)}") from exc
        self._pool: ConnectionPool[_Conn] = ConnectionPool(
            dsn, kwargs=kwargs, min_size=1, max_size=max(1, pool_size), open=False,
            configure=self._configure, timeout=self._timeout, name=f"convgraph-{schema}",
        )
        with first:
            try:
                self._pool.open()  # connects in the background, while the schema is set up
                self._configure(first)
                self._setup(first)
            except BaseException:
                self._pool.close()
                raise

    @property
    def notify_channel(self) -> str:
        """The channel each commit notifies with the name of every conversation it grew."""
        return _channel(self.schema)

    @property
    def lock_key(self) -> int:
        """The `pg_advisory_xact_lock` key every writer to this schema takes."""
        return self._lock_key

    def _sql(self, text: str) -> str:
        return text.replace("{s}", self._s)

    def _configure(self, conn: _Conn) -> None:
        with self._translated():
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (self._lock_timeout,))

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Turn driver exceptions into the `StoreError` vocabulary at the boundary."""
        try:
            yield
        except PoolClosed as exc:
            raise StoreError(f"the store for {self._where} is closed") from exc
        except PoolTimeout as exc:  # busy if every connection is lent out, else unreachable
            busy = self._pool.get_stats().get("pool_size", 0) >= self._pool.max_size
            raise (StoreBusyError if busy else StoreError)(
                f"no connection to {self._where} within {self._timeout}s: {_why(exc)}"
            ) from exc
        except _BUSY as exc:
            raise StoreBusyError(f"{self._where} stayed locked by another writer: {_why(exc)}") from exc
        except _NOT_OURS as exc:
            raise StoreCorruptError(f"{self._where} is not a whole convgraph store: {_why(exc)}") from exc
        except psycopg.OperationalError as exc:
            raise StoreError(f"{self._where} failed: {_why(exc)}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"{self._where} refused the operation: {_why(exc)}") from exc

    def _setup(self, conn: _Conn) -> None:
        """Create the schema and its tables if absent; never adopt tables that are not ours."""
        with self._translated(), conn.transaction():
            # no notices for IF NOT EXISTS; no fsync of our own: the first durable commit flushes it
            quiet = "SET LOCAL client_min_messages = warning; SET LOCAL synchronous_commit = off"
            conn.execute(f"{quiet}; SELECT pg_advisory_xact_lock({self._lock_key})")
            exists = conn.execute("SELECT oid FROM pg_namespace WHERE nspname = %s", [self.schema]).fetchone()
            found = {r[0] for r in conn.execute(  # pg_class has no index by schema: scan only if need be
                "SELECT relname FROM pg_class WHERE relnamespace = %s::oid"
                " AND relkind IN ('r', 'p', 'v', 'm', 'f')", [exists[0]],
            )} if exists else set()
            # tables but no meta: somebody else's; meta but not all ours: damaged (a wrong column
            # shows up at the first query using it); tables of our own server beside ours are fine
            if found and "meta" not in found:
                raise StoreCorruptError(f"{self._where} holds tables, but is not a convgraph store")
            read = "SELECT value FROM {s}.meta WHERE key = 'schema_version'"
            version = self._run(conn, read).fetchone() if found else None
            upgrade = version[0] if version is not None and version[0] in _UPGRADABLE else None
            wanted = {None: _TABLES, 1: _TABLES_V1, 2: _TABLES_V2, 3: _TABLES_V3, 4: _TABLES_V4}[upgrade]
            if found and wanted - found:
                raise StoreCorruptError(f"{self._where} lacks the tables {sorted(wanted - found)}")
            if upgrade is not None:
                conn.execute(self._sql(_DDL_V2 + _DDL_V3 + _DDL_V4 + _DDL_V5))
                if upgrade < 3:
                    self._backfill_index(conn)
                if upgrade < 4:
                    self._backfill_artifact_refs(conn)
                self._run(conn, "UPDATE {s}.meta SET value = %s WHERE key = 'schema_version'", SCHEMA_VERSION)
            if not found:
                ddl = _DDL + _DDL_V2 + _DDL_V3 + _DDL_V4 + _DDL_V5
                conn.execute(self._sql("CREATE SCHEMA IF NOT EXISTS {s};" + ddl))
            if (not found or upgrade is not None) and PostgresStore.on_create is not None:
                PostgresStore.on_create(conn, self.schema)
            version = self._run(conn, read).fetchone()
            if version is None:
                if self._run(conn, "SELECT 1 FROM {s}.records LIMIT 1").fetchone():
                    raise StoreCorruptError(f"{self._where} holds records but no schema version")
                self._run(conn, "INSERT INTO {s}.meta VALUES ('schema_version', %s),"
                          " ('version', nextval(%s))", SCHEMA_VERSION, self._seq)
            elif version[0] != SCHEMA_VERSION:
                raise StoreSchemaError(f"{self._where} has schema version {version[0]}, not {SCHEMA_VERSION}")

    def _backfill_index(self, conn: _Conn) -> None:
        """Fill the turn index from every record held with bytes and every kept snapshot."""
        after = 0
        page = "SELECT id, conv, cid, data FROM {s}.records WHERE id > %s ORDER BY id LIMIT %s"
        while rows := self._run(conn, page, after, _PAGE).fetchall():
            entries = ((conv, entry_from_bytes(CID(cid), data)) for _, conv, cid, data in rows if data)
            self._index(conn, ((conv, row) for conv, e in entries if (row := row_of(e)) is not None))
            after = rows[-1][0]
        for conv, data in self._run(conn, "SELECT conv, data FROM {s}.snapshots").fetchall():
            self._index_snapshot(conn, conv, data)

    def _backfill_artifact_refs(self, conn: _Conn) -> None:
        """Fill `artifact_refs` from every record held with bytes (version 4 added it)."""
        after = 0
        page = "SELECT id, cid, data FROM {s}.records WHERE id > %s ORDER BY id LIMIT %s"
        while rows := self._run(conn, page, after, _PAGE).fetchall():
            refs = artifact_rows(load_trusted(bytes(d), CID(bytes(c))) for _, c, d in rows if d)
            if refs:
                with conn.cursor() as cur:
                    cur.executemany(self._sql(_ARTIFACT_REFS_INSERT), refs)
            after = rows[-1][0]

    def _index(self, conn: _Conn, rows: Iterable[tuple[str, Row]]) -> None:
        with conn.cursor() as cur:
            for text, params in zip(_INDEX_INSERTS, index_params(rows), strict=True):
                if params:
                    cur.executemany(self._sql(text), params)

    def _index_snapshot(self, conn: _Conn, conv: str, snapshot: bytes) -> None:
        self._index(conn, snapshot_rows(conv, snapshot))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        local = self._local
        if getattr(local, "depth", 0):
            local.depth += 1
            try:
                yield
            finally:
                local.depth -= 1
            return
        with self._translated():
            conn = self._pool.getconn(timeout=self._timeout)
        try:
            with self._translated():  # one round trip; the key is our own integer
                conn.execute(f"BEGIN; SELECT pg_advisory_xact_lock({self._lock_key})")
            local.conn, local.depth = conn, 1
            try:
                yield
            finally:
                local.conn, local.depth = None, 0
            with self._translated():
                if conn.info.transaction_status == TransactionStatus.INERROR:  # COMMIT would roll back
                    raise StoreError(f"a statement failed inside a transaction on {self._where}: rolled back")
                conn.execute("COMMIT")
        finally:  # after a raise, or a failed COMMIT: roll back
            self._release(conn)
        self._keep_statistics(0)  # what the transaction's commits counted is committed now

    def _release(self, conn: _Conn) -> None:
        """End whatever is left of a transaction and give the connection back."""
        if conn.info.transaction_status != TransactionStatus.IDLE:
            with suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        with suppress(psycopg.Error):
            self._pool.putconn(conn)

    @contextmanager
    def _conn(self) -> Iterator[_Conn]:
        """This thread's transaction connection, or else any pooled one (autocommit)."""
        bound: _Conn | None = getattr(self._local, "conn", None) or getattr(self._local, "reader", None)
        if bound is not None:
            yield bound
            return
        with self._pool.connection(timeout=self._timeout) as conn:
            yield conn

    def _run(self, conn: _Conn, text: str, *args: object) -> psycopg.Cursor[TupleRow]:
        return conn.execute(self._sql(text), args)

    def _query(self, text: str, *args: object) -> list[Any]:
        with self._translated(), self._conn() as conn:
            return self._run(conn, text, *args).fetchall()

    def _any(self, select: str, cids: Iterable[CID]) -> list[Any]:
        """The rows of `select` + `= ANY(cids)`; none for no CIDs."""
        wanted = list({bytes(c) for c in cids})
        return self._query(select + " = ANY(%s::bytea[])", wanted) if wanted else []

    def _bump(self, conn: _Conn) -> None:
        self._run(conn, "UPDATE {s}.meta SET value = nextval(%s) WHERE key = 'version'", self._seq)

    def in_transaction(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    def change_token(self) -> object:
        rows = self._query("SELECT value FROM {s}.meta WHERE key = 'version'")
        if not rows:
            raise StoreCorruptError(f"{self._where} lost its version row")
        return int(rows[0][0])

    def commit(self, writes: WriteSet) -> None:
        """Apply `writes` atomically; each record's parents must be stored or precede it."""
        with self.transaction(), self._translated(), self._conn() as conn:
            pairs = sort_pairs(writes.equivocations)  # every read first, in one round trip
            asked = {bytes(p.cid) for p in writes.pending_put} | {bytes(c) for ab in pairs for c in ab}
            if not writes.fresh:
                asked |= {bytes(r.cid) for r in writes.records}
            asked |= {bytes(m.cid) for m in writes.headers}
            known: dict[bytes, str] = dict(self._run(
                conn, "SELECT cid, conv FROM {s}.records WHERE cid = ANY(%s::bytea[])", list(asked)
            ).fetchall()) if asked else {}
            fresh = {r.cid: r for r in writes.records if writes.fresh or bytes(r.cid) not in known}
            headers = {m.cid: m for m in writes.headers if bytes(m.cid) not in known and m.cid not in fresh}
            rows = [*map(header_row, headers.values()),
                    *((bytes(r.cid), r.conv, r.actor, r.seq, r.hlc.wall_ms, r.hlc.counter,
                       b"".join(map(bytes, r.parents)), r.data) for r in fresh.values())]
            known.update((row[0], row[1]) for row in rows)
            # parents precede children (the commit precondition), so the batch's effect on
            # heads is: every named parent stops being one, every unnamed new record becomes one
            added: list[RecordMeta | Record] = [*headers.values(), *fresh.values()]
            named = {(r.conv, p) for r in added for p in r.parents}
            unheaded = [(c, bytes(p)) for c, p in named if p not in fresh and p not in headers]
            headed = [(r.conv, bytes(r.cid)) for r in added if (r.conv, r.cid) not in named]
            unpend = [bytes(c) for c in writes.pending_remove] + [bytes(p.cid) for p in writes.pending_put]
            last = {bytes(p.cid): (i, p) for i, p in enumerate(writes.pending_put)}  # a later entry wins
            entries = [p for c, (_, p) in sorted(last.items(), key=lambda kv: kv[1][0]) if c not in known]
            for a, b in pairs:
                if a == b or bytes(a) not in known or bytes(b) not in known:
                    raise StoreError("an equivocation pair must name two stored records", cid=str(a))
            gone = [(unpend,)] if unpend else []
            lines, targets, branches = record_params(fresh.values())
            batches: list[tuple[str, list[tuple[Any, ...]]]] = [
                ("UPDATE {s}.meta SET value = nextval(%s) WHERE key = 'version'", [(self._seq,)]),
                ("INSERT INTO {s}.records (cid, conv, actor, seq, wall, counter, parents, data)"
                 " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", rows),
                (_INDEX_INSERTS[0], lines),
                (_INDEX_INSERTS[1], targets),
                (_INDEX_INSERTS[2], branches),
                (_ARTIFACT_REFS_INSERT,
                 artifact_rows(r for r in fresh.values() if r.refs or r.kind in ARTIFACT_KINDS)),
                ("DELETE FROM {s}.heads WHERE conv = %s AND cid = %s", unheaded),
                ("INSERT INTO {s}.heads VALUES (%s, %s)", headed),
                ("DELETE FROM {s}.pending WHERE cid = ANY(%s::bytea[])", gone),
                ("DELETE FROM {s}.pending_missing WHERE cid = ANY(%s::bytea[])", gone),
                ("INSERT INTO {s}.pending (cid, reason, wall, missing, data) VALUES (%s, %s, %s, %s, %s)",
                 [(bytes(p.cid), p.reason, p.wall_ms, b"".join(map(bytes, p.missing)), p.data)
                  for p in entries]),
                ("INSERT INTO {s}.pending_missing VALUES (%s, %s) ON CONFLICT DO NOTHING",
                 [(bytes(m), bytes(p.cid)) for p in entries for m in p.missing]),
                ("INSERT INTO {s}.equivocations VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                 [(bytes(a), bytes(b), known[bytes(a)]) for a, b in pairs]),
                ("SELECT pg_notify(%s, c) FROM unnest(%s::text[]) c",  # delivered only at COMMIT
                 [(self.notify_channel, sorted({r.conv for r in added}))] if rows else []),
            ]
            with conn.pipeline(), conn.cursor() as cur:  # every write, without waiting for each
                for text, params in batches:
                    if params:
                        cur.executemany(self._sql(text), params)
        self._keep_statistics(len(rows))

    def _keep_statistics(self, added: int) -> None:
        """ANALYZE the record and index tables once they grew by a tenth (at least 1,000 rows)
        since this store last did. Windowed reads are O(window) only while the planner knows
        the tables' sizes: with stale statistics (autovacuum off, or not yet run after a bulk
        load) it read a window of 58 index rows by sorting all 90,000 of a line (60 ms)."""
        with self._stats_lock:
            self._grown += added
            if self.in_transaction() or self._grown < max(_ANALYZE_MIN, self._analyzed // 10):
                return  # inside a transaction: checked again when the outermost one commits
            self._analyzed, self._grown = self._analyzed + self._grown, 0
        with self._translated(), self._pool.connection(timeout=self._timeout) as conn:
            conn.execute(self._sql(_ANALYZE))

    def evict_pending(self, bounds: QuarantineBounds) -> list[CID]:
        # an entry goes iff it and every newer entry, together, exceed a bound: that is
        # what dropping the oldest, one at a time, until within both bounds leaves
        with self.transaction(), self._translated(), self._conn() as conn:
            gone = self._run(
                conn, "DELETE FROM {s}.pending WHERE id IN (SELECT id FROM (SELECT id, count(*) OVER w AS n,"
                " sum(length(data)) OVER w AS size FROM {s}.pending WINDOW w AS (ORDER BY id DESC)) newer"
                " WHERE n > %s OR size > %s) RETURNING id, cid", bounds.max_count, bounds.max_bytes,
            ).fetchall()
            evicted = [cid for _, cid in sorted(gone)]
            if evicted:  # nothing evicted, nothing changed: the change token stays put
                self._bump(conn)
                self._run(conn, "DELETE FROM {s}.pending_missing WHERE cid = ANY(%s::bytea[])", evicted)
        return [CID(c) for c in evicted]

    def has(self, cid: CID) -> bool:
        return bool(self._query("SELECT 1 FROM {s}.records WHERE cid = %s", bytes(cid)))

    def cids_like(self, head: bytes, tail: bytes, limit: int) -> list[CID]:
        # the head is a range of the unique index on cid; the tail is checked row by row
        where, args = prefix_range("cid >= %s AND cid < %s", "cid >= %s", head)
        if tail:
            where.append("substring(cid from length(cid) - %s + 1) = %s")
            args += (len(tail), tail)
        sql = "SELECT cid FROM {s}.records" + (" WHERE " + " AND ".join(where) if where else "")
        return [CID(bytes(r[0])) for r in self._query(sql + " ORDER BY cid LIMIT %s", *args, max(0, limit))]

    def get(self, cid: CID) -> bytes | None:
        rows = self._query("SELECT data FROM {s}.records WHERE cid = %s", bytes(cid))
        return rows[0][0] or None if rows else None

    def get_many(self, cids: Iterable[CID]) -> dict[CID, bytes]:
        rows = self._any("SELECT cid, data FROM {s}.records WHERE cid", cids)
        return {CID(c): bytes(d) for c, d in rows if d}

    def metas(self, cids: Iterable[CID]) -> dict[CID, RecordMeta]:
        rows = self._any(f"SELECT {_META_COLS} FROM {{s}}.records WHERE cid", cids)
        return {m.cid: m for m in map(meta_of_row, rows)}

    def heads(self, conv: str) -> list[CID]:
        rows = self._query("SELECT cid FROM {s}.heads WHERE conv = %s ORDER BY cid", conv)
        return [CID(r[0]) for r in rows]

    def at_seq(self, actor: bytes, conv: str, seq: int) -> list[CID]:
        rows = self._query("SELECT cid FROM {s}.records WHERE actor = %s AND conv = %s AND seq = %s"
                           " ORDER BY cid", actor, conv, seq)
        return [CID(r[0]) for r in rows]

    def last_own(self, actor: bytes, conv: str) -> RecordMeta | None:
        rows = self._query(f"SELECT {_META_COLS} FROM {{s}}.records WHERE actor = %s AND conv = %s"
                           " ORDER BY seq DESC, cid DESC LIMIT 1", actor, conv)
        return meta_of_row(rows[0]) if rows else None

    def records(self, conv: str, last: int | None = None) -> list[tuple[CID, bytes]]:
        select = "SELECT cid, data FROM {s}.records WHERE conv = %s AND length(data) > 0 ORDER BY "
        if last is None:
            rows = self._query(select + "wall, counter, actor, cid", conv)
        else:
            newest = "wall DESC, counter DESC, actor DESC, cid DESC LIMIT %s"
            rows = self._query(select + newest, conv, max(0, last))
            rows.reverse()
        return [(CID._trusted(c), d) for c, d in rows]

    def records_after(self, conv: str, after: OrderKey | None, limit: int) -> list[tuple[CID, bytes]]:
        where = "" if after is None else " AND (wall, counter, actor, cid) > (%s, %s, %s, %s)"
        rows = self._query(
            "SELECT cid, data FROM {s}.records WHERE conv = %s AND length(data) > 0" + where
            + " ORDER BY wall, counter, actor, cid LIMIT %s", conv, *(after or ()), max(0, limit),
        )
        return [(CID._trusted(c), d) for c, d in rows]

    def first(self, conv: str) -> tuple[CID, bytes] | None:
        rows = self._query(
            "SELECT cid, data FROM {s}.records WHERE conv = %s AND length(data) > 0"
            " ORDER BY wall, counter, actor, cid LIMIT 1", conv,
        )
        return (CID._trusted(rows[0][0]), rows[0][1]) if rows else None

    def conversations(self) -> list[str]:
        return [r[0] for r in self._query("SELECT DISTINCT conv FROM {s}.heads ORDER BY conv")]

    def count(self, conv: str | None = None) -> int:
        if conv is None:
            return int(self._query("SELECT count(*) FROM {s}.records")[0][0])
        return int(self._query("SELECT count(*) FROM {s}.records WHERE conv = %s", conv)[0][0])

    def iter_all(self) -> Iterator[tuple[CID, bytes]]:
        after = 0
        while rows := self._query(
            "SELECT id, cid, data FROM {s}.records WHERE id > %s ORDER BY id LIMIT %s", after, _PAGE
        ):
            yield from ((CID(cid), data) for _, cid, data in rows if data)  # compacted: header only
            after = rows[-1][0]

    def since(self, cursor: int, conv: str) -> tuple[list[tuple[CID, bytes]], int]:
        # a rollback leaves a gap in the ids, never a later id below a cursor handed out:
        # writers hold the advisory lock, so ids are drawn in commit order
        rows = self._query(
            "SELECT id, cid, data FROM {s}.records WHERE id > %s AND conv = %s ORDER BY id", cursor, conv
        )
        return [(CID._trusted(c), d) for _, c, d in rows if d], rows[-1][0] if rows else cursor

    def arrivals(self, cursor: int, limit: int) -> tuple[list[tuple[str, CID, bytes]], int]:
        rows = self._query(
            "SELECT id, conv, cid, data FROM {s}.records WHERE id > %s ORDER BY id LIMIT %s", cursor, limit
        )
        found = [(conv, CID._trusted(c), d) for _, conv, c, d in rows if d]
        return found, rows[-1][0] if rows else cursor

    def sync_keys(self, conv: str) -> list[tuple[int, bytes]]:
        rows = self._query("SELECT wall, cid FROM {s}.records WHERE conv = %s", conv)
        return sorted((wall, cid[4:]) for wall, cid in rows)

    def cursor(self) -> int:
        # ids are never drawn twice; the floor keeps the cursor from moving back after a `forget`
        return int(self._query("SELECT greatest(coalesce(max(id), 0), coalesce((SELECT value FROM {s}.meta"
                               " WHERE key = 'id_floor'), 0)) FROM {s}.records")[0][0])

    def conv_token(self, conv: str) -> object:  # noqa: ARG002 (coarse until per-conversation rows)
        return self.change_token()

    def keys_since(self, conv: str, cursor: int) -> tuple[list[tuple[int, bytes]], int]:
        rows = self._query("SELECT id, wall, cid FROM {s}.records WHERE id > %s AND conv = %s", cursor, conv)
        return [(wall, bytes(cid)[4:]) for _, wall, cid in rows], max((r[0] for r in rows), default=cursor)

    def key_summary(self, conv: str) -> tuple[int, int]:
        return key_summary(self.sync_keys(conv))

    def compact(self, conv: str, covered: Iterable[CID], checkpoint: CID, snapshot: bytes) -> None:
        with self.transaction(), self._translated(), self._conn() as conn:
            wanted = {bytes(c) for c in covered}
            found = {bytes(m.cid) for m in self.metas(map(CID._trusted, wanted)).values() if m.conv == conv}
            if found != wanted:
                raise StoreError("compaction names a record this conversation does not hold")
            self._bump(conn)
            dropped = wanted - {bytes(c) for c in self._evidence(conv)}
            self._run(conn, "UPDATE {s}.records SET data = '' WHERE cid = ANY(%s::bytea[])", list(dropped))
            self._run(conn, "INSERT INTO {s}.snapshots VALUES (%s, %s, %s) ON CONFLICT (conv)"
                      " DO UPDATE SET checkpoint = excluded.checkpoint, data = excluded.data",
                      conv, bytes(checkpoint), snapshot)
            self._index_snapshot(conn, conv, snapshot)  # rows of an adopted conversation's records

    def snapshot(self, conv: str) -> tuple[CID, bytes] | None:
        rows = self._query("SELECT checkpoint, data FROM {s}.snapshots WHERE conv = %s", conv)
        return (CID(rows[0][0]), rows[0][1]) if rows else None

    def max_hlc(self) -> Hlc:
        # one probe of `records_order` per conversation (each has a head), never a scan of every record
        rows = self._query(
            "SELECT m.wall, m.counter FROM (SELECT DISTINCT conv FROM {s}.heads) h CROSS JOIN LATERAL"
            " (SELECT wall, counter FROM {s}.records r WHERE r.conv = h.conv ORDER BY wall DESC, counter DESC"
            " LIMIT 1) m ORDER BY m.wall DESC, m.counter DESC LIMIT 1"
        )
        return Hlc(*rows[0]) if rows else ZERO

    def pending_get(self, cids: Iterable[CID]) -> dict[CID, Pending]:
        rows = self._any(f"SELECT {_PENDING_COLS} FROM {{s}}.pending WHERE cid", cids)
        return {p.cid: p for p in map(pending_of_row, rows)}

    def pending_waiting_on(self, cids: Iterable[CID]) -> list[Pending]:
        rows = self._any(
            f"SELECT {', '.join('p.' + c for c in _PENDING_COLS.split(', '))} FROM {{s}}.pending_missing m"
            " JOIN {s}.pending p ON p.cid = m.cid WHERE m.missing", cids,
        )
        found = {p.cid: p for p in map(pending_of_row, rows)}
        return [found[c] for c in sorted(found)]

    def pending_due(self, wall_ms: int) -> list[Pending]:
        rows = self._query(f"SELECT {_PENDING_COLS} FROM {{s}}.pending WHERE reason = 'clock' AND wall <= %s"
                           " ORDER BY id", wall_ms)
        return [pending_of_row(r) for r in rows]

    def pending_stats(self) -> tuple[int, int]:
        row = self._query("SELECT count(*), coalesce(sum(length(data)), 0) FROM {s}.pending")[0]
        return int(row[0]), int(row[1])

    def equivocations(self, conv: str | None = None) -> list[tuple[CID, CID]]:
        if conv is None:
            rows = self._query("SELECT a, b FROM {s}.equivocations ORDER BY a, b")
        else:
            rows = self._query("SELECT a, b FROM {s}.equivocations WHERE conv = %s ORDER BY a, b", conv)
        return [(CID(a), CID(b)) for a, b in rows]

    def _evidence(self, conv: str) -> set[CID]:
        """Records whose bytes compaction keeps: cited by a finding, or equivocating."""
        rows = self._query("SELECT cid FROM {s}.finding_cites WHERE conv = %s UNION SELECT a FROM"
                           " {s}.equivocations WHERE conv = %s UNION SELECT b FROM {s}.equivocations"
                           " WHERE conv = %s", conv, conv, conv)
        return {CID(r[0]) for r in rows}

    # ------------------------------------------------------------ the turn index

    @contextmanager
    def reading(self) -> Iterator[None]:
        local = self._local
        if getattr(local, "depth", 0) or getattr(local, "reader", None) is not None:
            yield
            return
        with self._translated():
            conn = self._pool.getconn(timeout=self._timeout)
        try:
            with self._translated():
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            local.reader = conn
            try:
                yield
            finally:
                local.reader = None
            with self._translated():
                conn.execute("COMMIT")
        finally:
            self._release(conn)

    def line(self, conv: str, line: str, below: OrderKey | None, limit: int) -> list[LineRow]:
        select = "SELECT wall, counter, actor, cid, kind FROM {s}.turn_line WHERE conv = %s AND line = %s"
        if below is None:
            rows = self._query(select + _ORDER_DESC, conv, line, limit)
        else:
            before = " AND (wall, counter, actor, cid) < (%s, %s, %s, %s)"
            rows = self._query(select + before + _ORDER_DESC, conv, line, *below, limit)
        return [line_row(line, r) for r in rows]

    def targets(self, conv: str, targets: Iterable[CID]) -> list[tuple[TargetRow, bytes]]:
        wanted = list({bytes(c) for c in targets})
        if not wanted:
            return []
        rows = self._query("SELECT t.target, t.wall, t.counter, t.actor, t.cid, t.kind, r.data"
                           " FROM {s}.turn_targets t JOIN {s}.records r ON r.cid = t.cid"
                           " WHERE t.conv = %s AND t.target = ANY(%s::bytea[])", conv, wanted)
        return [(target_row(r[:6]), bytes(r[6])) for r in rows]

    def branch_rows(self, conv: str, name: str) -> list[BranchRow]:
        rows = self._query("SELECT wall, counter, actor, cid, origin FROM {s}.turn_branches"
                           " WHERE conv = %s AND name = %s ORDER BY wall, counter, actor, cid", conv, name)
        return [branch_row(name, r) for r in rows]

    def index_rows(self, conv: str) -> list[Row]:
        cols, where = "wall, counter, actor, cid", "WHERE conv = %s"
        with self.reading():
            lines = self._query(f"SELECT line, {cols}, kind FROM {{s}}.turn_line {where}", conv)
            targets = self._query(f"SELECT target, {cols}, kind FROM {{s}}.turn_targets {where}", conv)
            branches = self._query(f"SELECT name, {cols}, origin FROM {{s}}.turn_branches {where}", conv)
        return [*(line_row(r[0], r[1:]) for r in lines), *map(target_row, targets),
                *(branch_row(r[0], r[1:]) for r in branches)]

    def reindex(self, conv: str, rows: Iterable[Row]) -> None:
        with self.transaction(), self._translated(), self._conn() as conn:
            self._bump(conn)  # the views read these rows: cached answers must see the change
            for table in ("turn_line", "turn_targets", "turn_branches"):
                self._run(conn, f"DELETE FROM {{s}}.{table} WHERE conv = %s", conv)
            self._index(conn, ((conv, row) for row in rows))

    def hidden(self, conv: str) -> frozenset[CID] | None:
        with self.reading():
            marker = self._query("SELECT cursor FROM {s}.turn_hidden_as_of WHERE conv = %s", conv)
            # `conv || ''` and `ORDER BY id`: walk the ids after the marker on the primary key; the
            # planner otherwise scans the whole table when its statistics lag (30,000 records: 40 ms)
            later = "SELECT 1 FROM {s}.records WHERE id > %s AND conv || '' = %s ORDER BY id LIMIT 1"
            if not marker or self._query(later, marker[0][0], conv):
                return None
            rows = self._query("SELECT cid FROM {s}.turn_hidden WHERE conv = %s", conv)
        return frozenset(CID(bytes(r[0])) for r in rows)

    def set_hidden(self, conv: str, cids: Iterable[CID]) -> None:
        wanted = {bytes(c) for c in cids}
        with self.transaction(), self._translated(), self._conn() as conn:
            rows = self._run(conn, "SELECT cid FROM {s}.turn_hidden WHERE conv = %s", conv)
            held = {bytes(r[0]) for r in rows}
            if held != wanted:
                self._bump(conn)  # a moved marker alone changes no view (index and fold agree)
                self._run(conn, "DELETE FROM {s}.turn_hidden WHERE conv = %s", conv)
                with conn.cursor() as cur:
                    cur.executemany(self._sql("INSERT INTO {s}.turn_hidden VALUES (%s, %s)"),
                                    [(conv, c) for c in sorted(wanted)])
            self._run(conn, "INSERT INTO {s}.turn_hidden_as_of VALUES (%s, (SELECT coalesce(max(id), 0)"
                      " FROM {s}.records)) ON CONFLICT (conv) DO UPDATE SET cursor = excluded.cursor", conv)

    # ------------------------------------------------------------ witnessed history

    def _write(self, text: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            with self.transaction(), self._translated(), self._conn() as conn, conn.cursor() as cur:
                cur.executemany(self._sql(text), rows)

    def remember(self, statement: Statement) -> None:
        self._write("INSERT INTO {s}.remembered VALUES (%s, %s, %s) ON CONFLICT (peer, conv)"
                    " DO UPDATE SET statement = excluded.statement",
                    [(statement.key, statement.conv, statement.data)])

    def remembered(self, peer: bytes, conv: str) -> bytes | None:
        rows = self._query("SELECT statement FROM {s}.remembered WHERE peer = %s AND conv = %s", peer, conv)
        return bytes(rows[0][0]) if rows else None

    def remembered_in(self, conv: str) -> list[bytes]:
        rows = self._query("SELECT statement FROM {s}.remembered WHERE conv = %s ORDER BY peer", conv)
        return [bytes(r[0]) for r in rows]

    def add_receipts(self, receipts: Iterable[Statement]) -> None:
        self._write("INSERT INTO {s}.receipts VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    [(r.key, r.conv, bytes(r.cid), r.time_ms, r.data) for r in receipts])

    def open_receipts(self, peer: bytes, conv: str) -> list[bytes]:
        rows = self._query("SELECT statement FROM {s}.receipts WHERE peer = %s AND conv = %s"
                           " ORDER BY time_ms, cid", peer, conv)
        return [bytes(r[0]) for r in rows]

    def close_receipts(self, peer: bytes, conv: str, cids: Iterable[CID]) -> None:
        self._write("DELETE FROM {s}.receipts WHERE peer = %s AND conv = %s AND cid = %s",
                    [(peer, conv, bytes(c)) for c in cids])

    def add_gossip(self, statement: Statement) -> None:
        with self.transaction(), self._translated(), self._conn() as conn:
            where = (statement.conv, statement.key)
            self._run(conn, "INSERT INTO {s}.gossip VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                      *where, bytes(statement.cid), statement.time_ms, statement.data)
            self._run(conn, "DELETE FROM {s}.gossip WHERE conv = %s AND key = %s AND cid NOT IN"
                      " (SELECT cid FROM {s}.gossip WHERE conv = %s AND key = %s"
                      " ORDER BY time_ms DESC, cid DESC LIMIT %s)"
                      " AND cid NOT IN (SELECT cid FROM {s}.finding_cites WHERE conv = %s)",
                      *where, *where, GOSSIP_KEEP, statement.conv)

    def gossip(self, conv: str) -> list[bytes]:
        rows = self._query("SELECT statement FROM {s}.gossip WHERE conv = %s ORDER BY time_ms DESC, cid DESC",
                           conv)
        return [bytes(r[0]) for r in rows]

    def pending_checks(self, peer: bytes, conv: str) -> list[PendingCheck]:
        rows = self._query("SELECT reason, statements FROM {s}.pending_checks WHERE peer = %s AND conv = %s"
                           " ORDER BY id", peer, conv)
        return [PendingCheck(reason, decode_blobs(bytes(data))) for reason, data in rows]

    def set_pending_checks(self, peer: bytes, conv: str, checks: Sequence[PendingCheck]) -> None:
        with self.transaction(), self._translated(), self._conn() as conn:
            self._run(conn, "DELETE FROM {s}.pending_checks WHERE peer = %s AND conv = %s", peer, conv)
            rows = [(peer, conv, c.reason, encode_blobs(c.statements)) for c in unique_checks(checks)]
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(self._sql("INSERT INTO {s}.pending_checks (peer, conv, reason,"
                                              " statements) VALUES (%s, %s, %s, %s)"), rows)

    def add_finding(self, finding: FindingRow) -> bool:
        f = finding
        with self.transaction(), self._translated(), self._conn() as conn:
            added = self._run(
                conn, "INSERT INTO {s}.findings VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                bytes(f.id), f.conv, f.kind, f.found_ms, f.summary, b"".join(map(bytes, f.cites)),
                encode_blobs(f.statements), f.bundle,
            ).rowcount == 1
            if added:
                with conn.cursor() as cur:
                    cur.executemany(self._sql("INSERT INTO {s}.finding_cites VALUES (%s, %s, %s)"
                                              " ON CONFLICT DO NOTHING"),
                                    [(f.conv, bytes(c), bytes(f.id)) for c in finding_cids(f)])
            return added

    def findings(self, conv: str | None = None) -> list[FindingRow]:
        select = "SELECT id, kind, conv, bundle, cites, statements, summary, found FROM {s}.findings"
        if conv is None:
            rows = self._query(select + " ORDER BY found, id")
        else:
            rows = self._query(select + " WHERE conv = %s ORDER BY found, id", conv)
        return [finding_of_row(r) for r in rows]

    def cited(self, conv: str) -> set[CID]:
        rows = self._query("SELECT cid FROM {s}.finding_cites WHERE conv = %s", conv)
        return {CID(bytes(r[0])) for r in rows}

    def put_blocks(self, blocks: Iterable[tuple[CID, bytes]]) -> None:
        # no `_bump`: blocks change no view of the records, so caches keyed on the token hold
        blocks = list(blocks)
        if not blocks:
            return
        with self.transaction(), self._translated(), self._conn() as conn, conn.cursor() as cur:
            cur.executemany(self._sql(_BLOCKS_INSERT), [(bytes(c), d) for c, d in blocks])
            if links := manifest_links(blocks):
                cur.executemany(self._sql(_BLOCK_LINKS_INSERT), links)

    def get_block(self, cid: CID) -> bytes | None:
        # binary results: in text format a bytea crosses the wire as hex, twice its size, and
        # is decoded here (a third of a 256 KiB block's read time)
        with self._translated(), self._conn() as conn:
            row = conn.execute(self._sql("SELECT data FROM {s}.blocks WHERE cid = %s"), (bytes(cid),),
                               binary=True).fetchone()
        return bytes(row[0]) if row else None

    def has_blocks(self, cids: Iterable[CID]) -> set[CID]:
        wanted = {bytes(c): c for c in cids}
        rows = self._any("SELECT cid FROM {s}.blocks WHERE cid", wanted.values())
        return {wanted[bytes(r[0])] for r in rows}

    def block_cids(self) -> Iterator[CID]:
        after = b""  # below every CID; the primary key pages in binary order
        page = "SELECT cid FROM {s}.blocks WHERE cid > %s ORDER BY cid LIMIT %s"
        while rows := self._query(page, after, _PAGE):
            yield from (CID(bytes(r[0])) for r in rows)
            after = bytes(rows[-1][0])

    def artifact_refs(self, conv: str) -> set[CID]:
        rows = self._query("SELECT DISTINCT cid FROM {s}.artifact_refs WHERE conv = %s", conv)
        return {CID(bytes(r[0])) for r in rows}

    def records_naming(self, conv: str, cids: Iterable[CID]) -> dict[CID, set[CID]]:
        wanted = list({bytes(c) for c in cids})
        sql = "SELECT cid, record FROM {s}.artifact_refs WHERE conv = %s AND cid = ANY(%s::bytea[])"
        return group(self._query(sql, conv, wanted)) if wanted else {}

    def conversations_naming(self, cids: Iterable[CID]) -> set[str]:
        return {r[0] for r in self._any("SELECT DISTINCT conv FROM {s}.artifact_refs WHERE cid", cids)}

    def chunks_of(self, manifests: Iterable[CID]) -> dict[CID, set[CID]]:
        return group(self._any("SELECT manifest, chunk FROM {s}.block_links WHERE manifest", manifests))

    def admit_blocks(self, conv: str, cids: Iterable[CID]) -> None:
        params = [(conv, bytes(c)) for c in set(cids)]
        if not params:
            return
        with self.transaction(), self._translated(), self._conn() as conn, conn.cursor() as cur:
            cur.executemany(self._sql(_ADMIT_INSERT), params)

    def admitted(self, conv: str, cids: Iterable[CID]) -> set[CID]:
        wanted = {bytes(c): c for c in cids}
        if not wanted:
            return set()
        rows = self._query("SELECT cid FROM {s}.block_admitted WHERE conv = %s AND cid = ANY(%s::bytea[])",
                           conv, list(wanted))
        return {wanted[bytes(r[0])] for r in rows}

    def admitting(self, cids: Iterable[CID]) -> set[str]:
        return {r[0] for r in self._any("SELECT DISTINCT conv FROM {s}.block_admitted WHERE cid", cids)}

    def manifests_of(self, chunks: Iterable[CID]) -> dict[CID, set[CID]]:
        return group(self._any("SELECT chunk, manifest FROM {s}.block_links WHERE chunk", chunks))

    # ------------------------------------------------------------ forgetting

    def forget(self, conv: str) -> None:
        with self.transaction(), self._translated(), self._conn() as conn:
            dropped = [bytes(c) for c in unshared_blocks(self, conv)]
            self._bump(conn)
            top = self.cursor()
            self._run(conn, "DELETE FROM {s}.records WHERE conv = %s", conv)
            if self.cursor() < top:
                self._run(conn, "INSERT INTO {s}.meta VALUES ('id_floor', %s) ON CONFLICT (key)"
                          " DO UPDATE SET value = excluded.value", top)
            for table in _CONV_TABLES:
                self._run(conn, f"DELETE FROM {{s}}.{table} WHERE conv = %s", conv)
            waiting = self._run(conn, f"SELECT {_PENDING_COLS} FROM {{s}}.pending").fetchall()
            gone = [bytes(p.cid) for p in map(pending_of_row, waiting)  # the quarantine keeps no conv
                    if load_trusted(bytes(p.data), p.cid).conv == conv]
            if gone:
                self._run(conn, "DELETE FROM {s}.pending WHERE cid = ANY(%s::bytea[])", gone)
                self._run(conn, "DELETE FROM {s}.pending_missing WHERE cid = ANY(%s::bytea[])", gone)
            if dropped:
                self._run(conn, "DELETE FROM {s}.blocks WHERE cid = ANY(%s::bytea[])", dropped)
                self._run(conn, "DELETE FROM {s}.block_links WHERE manifest = ANY(%s::bytea[])", dropped)
            self._run(conn, "INSERT INTO {s}.forgotten VALUES (%s) ON CONFLICT DO NOTHING", conv)

    def forgotten(self, convs: Iterable[str]) -> set[str]:
        wanted = list(set(convs))
        if not wanted:
            return set()
        rows = self._query("SELECT conv FROM {s}.forgotten WHERE conv = ANY(%s::text[])", wanted)
        return {r[0] for r in rows}

    def vacuum(self) -> None:
        # autovacuum reclaims on its own; VACUUM (never inside a transaction) does it now
        if self.in_transaction():
            raise StoreError("vacuum cannot run inside a transaction")
        tables = ", ".join(f"{{s}}.{t}" for t in sorted(_TABLES))
        with self._translated(), self._pool.connection(timeout=self._timeout) as conn:
            self._run(conn, f"VACUUM {tables}")

    def close(self) -> None:
        with self._translated():
            self._pool.close()


async def listen(dsn: str, schema: str) -> AsyncIterator[str]:
    """Yield the name of each conversation as commits to `schema` announce it, over an
    autocommit connection that `LISTEN`s; closing the generator closes the connection."""
    where = f"PostgreSQL at {_describe(dsn)} (schema {schema!r})"
    try:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to {where}: {_why(exc)}") from exc
    try:
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(_channel(schema))))
        notes = conn.notifies()
        try:
            async for note in notes:
                yield note.payload
        finally:
            await notes.aclose()
    except psycopg.Error as exc:
        raise StoreError(f"listening to {where} failed: {_why(exc)}") from exc
    finally:
        await conn.close()
