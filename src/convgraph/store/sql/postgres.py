"""The server-scale store: every table in one PostgreSQL schema, reached through a pool.

A writer that names its conversations (`transaction(conv, …)`) locks their `convs` rows in
sorted order right after `BEGIN`, and shares the schema's advisory lock; one that names none
takes that lock alone (what SQLite's `BEGIN IMMEDIATE` does), so read-then-write steps
serialise across threads, processes and server instances, per conversation where the caller
says which. Every commit also locks the rows of the conversations it writes. A thread inside
`transaction()` makes every read and commit on the one connection it borrowed, other threads
read committed state through the pool. Each commit gives its conversations new random tokens
(never reused, even after a rollback): their sum is the change token. Each conversation
that received records is announced with `pg_notify` on `notify_channel` right after the
transaction commits, outside it (never for a rollback); `listen()` streams those.
This module holds only what PostgreSQL does differently (store/sql/core.py); every psycopg
error leaves it as a `StoreError` subclass. Invariant: a commit lands whole or not at all.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, Final

from convgraph.errors import (
    MissingExtraError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreSchemaError,
)
from convgraph.store.sql import v5
from convgraph.store.sql.core import Batch, ConvRow
from convgraph.store.sql.forget import SqlStore
from convgraph.store.sql.migrate import copy_v5
from convgraph.store.sql.schema import CONV_TABLES, KEYED_TABLES, SCHEMA_VERSION, conv_ddl

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

# versions 1 to 5 (store/sql/v5.py) are upgraded in place when opened, under the setup lock:
# first to version 5 (the index and `artifact_refs` filled from the records), then to version 6,
# which partitioned every conversation table by conv (store/sql/schema.py, store/sql/migrate.py)
_UPGRADABLE: Final = frozenset({1, 2, 3, 4, 5})
_TYPES: Final = {"conv": 'text COLLATE "C"', "text": "text", "blob": "bytea", "int": "bigint"}
# hash partitions of each conversation table: they keep the rule Citus keeps (`conv` in every key)
PARTITIONS: Final = 4
_MAX_NAME: Final = 63  # PostgreSQL truncates longer identifiers (NAMEDATALEN - 1)
_TABLES: Final = frozenset(KEYED_TABLES) | frozenset(CONV_TABLES)
# version 6 (store/sql/schema.py): one statement each, every conversation table partitioned by conv
_DDL_V6: Final = (
    "CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value bigint NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {s}.blocks (cid bytea PRIMARY KEY, data bytea NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {s}.block_links (manifest bytea NOT NULL, chunk bytea NOT NULL,"
    " PRIMARY KEY (manifest, chunk))",
    "CREATE INDEX IF NOT EXISTS block_links_chunk ON {s}.block_links (chunk, manifest)",
    "CREATE SEQUENCE IF NOT EXISTS {s}.records_id",  # the store-wide arrival feed (`arrivals`) only
    *conv_ddl(_TYPES, " PARTITION BY HASH (conv)"),
    *(f"CREATE TABLE IF NOT EXISTS {{s}}.{t}_{i} PARTITION OF {{s}}.{t}"
      f" FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {i})"
      for t in CONV_TABLES for i in range(PARTITIONS)),
    "ALTER TABLE {s}.records ALTER COLUMN id SET DEFAULT nextval('{s}.records_id')",
)
# a writer's hold on a conversation in one statement: made if missing, else locked by the no-op
# update (as FOR UPDATE would), and read back; on Citus one routed statement instead of two
_HOLD: Final = ("INSERT INTO {s}.convs AS c VALUES (%s, 0, 0, %s, 0) ON CONFLICT (conv)"
                " DO UPDATE SET token = c.token RETURNING conv, arrivals, token, key_sum, key_count")
_NOTIFY: Final = "SELECT pg_notify(%s, c) FROM unnest(%s::text[]) c"
_ANALYZE_MIN: Final = 1_000  # rows committed before a store's first ANALYZE of its tables
_ANALYZE: Final = "ANALYZE {s}.records, {s}.heads, {s}.turn_line, {s}.turn_targets, {s}.turn_branches"
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


class PostgresStore(SqlStore):
    """A `Store` in one PostgreSQL schema; safe to share between threads, processes and hosts."""

    _MAX_HLC = (
        "SELECT m.wall, m.counter FROM (SELECT DISTINCT conv FROM {s}.heads) h CROSS JOIN LATERAL"
        " (SELECT wall, counter FROM {s}.records r WHERE r.conv = h.conv ORDER BY wall DESC, counter DESC"
        " LIMIT 1) m ORDER BY m.wall DESC, m.counter DESC LIMIT 1"
    )
    _FOR_UPDATE = " FOR UPDATE"
    _NOWAIT = " NOWAIT"
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
        self._texts: dict[str, str] = {}
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
        """The advisory lock key of this schema: a writer that names no conversation takes it
        alone, one that names its conversations shares it (and locks their `convs` rows)."""
        return self._lock_key

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
            wanted = {None: _TABLES, 1: v5.PG_TABLES_V1, 2: v5.PG_TABLES_V2, 3: v5.PG_TABLES_V3,
                      4: v5.PG_TABLES_V4, 5: v5.PG_TABLES_V5}[upgrade]
            if found and wanted - found:
                raise StoreCorruptError(f"{self._where} lacks the tables {sorted(wanted - found)}")
            if upgrade is not None:
                self._upgrade(conn, upgrade)
            if not found:
                conn.execute(self._sql("CREATE SCHEMA IF NOT EXISTS {s}"))
                for statement in _DDL_V6:
                    conn.execute(self._sql(statement))
            if (not found or upgrade is not None) and PostgresStore.on_create is not None:
                PostgresStore.on_create(conn, self.schema)
            version = self._run(conn, read).fetchone()
            if version is None:
                if self._run(conn, "SELECT 1 FROM {s}.records LIMIT 1").fetchone():
                    raise StoreCorruptError(f"{self._where} holds records but no schema version")
                self._run(conn, "INSERT INTO {s}.meta VALUES ('schema_version', %s)", SCHEMA_VERSION)
            elif version[0] != SCHEMA_VERSION:
                raise StoreSchemaError(f"{self._where} has schema version {version[0]}, not {SCHEMA_VERSION}")

    def _upgrade(self, conn: _Conn, version: int) -> None:
        """Bring a schema of `version` to version 6: the v5 tables it lacks first (filled from
        the records), then the conversation tables moved to a side schema, made again
        partitioned, and copied back."""
        # the backfills and the copy run on `conn`
        self._local.conn, self._local.depth, self._local.rows = conn, 1, {}
        try:
            if version < 5:
                added = v5.PG_DDL_V2 + v5.PG_DDL_V3 + v5.PG_DDL_V4 + v5.PG_DDL_V5
                for statement in filter(str.strip, added.split(";")):
                    conn.execute(self._sql(statement))
            if version < 3:
                self._backfill_index()
            if version < 4:
                self._backfill_artifact_refs()
            old = sql.Identifier(f"{self.schema[:40]}_v5_{secrets.token_hex(4)}").as_string()
            conn.execute(f"CREATE SCHEMA {old}")
            for table in CONV_TABLES:
                if table != "convs":
                    conn.execute(self._sql(f"ALTER TABLE {{s}}.{table} SET SCHEMA {old}"))
            for statement in _DDL_V6:
                conn.execute(self._sql(statement))
            copy_v5(self, lambda table: f"{old}.{table}")
        finally:
            self._local.conn, self._local.depth, self._local.rows = None, 0, None
        self._run(conn, "SELECT setval('{s}.records_id', coalesce(max(id), 0) + 1, false) FROM {s}.records")
        conn.execute(f"DROP SCHEMA {old} CASCADE")
        self._run(conn, "DELETE FROM {s}.meta WHERE key = 'version'")
        self._run(conn, "DROP SEQUENCE IF EXISTS {s}.version_seq")
        self._run(conn, "UPDATE {s}.meta SET value = %s WHERE key = 'schema_version'", SCHEMA_VERSION)

    # ------------------------------------------------------------ the dialect's hooks

    def _sql(self, text: str) -> str:
        found = self._texts.get(text)
        if found is None:
            found = self._texts[text] = text.replace("{s}", self._s)
        return found

    def _run(self, conn: _Conn, text: str, *args: object) -> psycopg.Cursor[TupleRow]:
        return conn.execute(self._sql(text), args)

    @contextmanager
    def _conn(self) -> Iterator[_Conn]:
        """This thread's transaction connection, or else any pooled one (autocommit)."""
        bound: _Conn | None = getattr(self._local, "conn", None) or getattr(self._local, "reader", None)
        if bound is not None:
            yield bound
            return
        with self._pool.connection(timeout=self._timeout) as conn:
            yield conn

    def _q(self, text: str, *args: object, binary: bool = False) -> list[Any]:
        with self._translated(), self._conn() as conn:
            return conn.execute(self._sql(text), args, binary=binary).fetchall()

    def _x(self, text: str, *args: object) -> psycopg.Cursor[TupleRow]:
        with self._translated():
            return self._local.conn.execute(self._sql(text), args)  # type: ignore[no-any-return]

    def _xm(self, text: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            with self._translated(), self._local.conn.cursor() as cur:
                cur.executemany(self._sql(text), rows)

    def _batch(self, batches: Iterable[Batch]) -> None:
        conn: _Conn = self._local.conn
        with self._translated(), conn.pipeline(), conn.cursor() as cur:  # every write, without waiting
            for text, rows in batches:
                if rows:
                    cur.executemany(self._sql(text), rows)

    def _lock_row(self, conv: str, *, late: bool) -> ConvRow:
        if late:  # NOWAIT needs the lock apart from the insert
            return super()._lock_row(conv, late=late)
        found = self._x(_HOLD, conv, bytes(32)).fetchone()
        assert found is not None  # INSERT … ON CONFLICT DO UPDATE returns its row
        return ConvRow(*found)

    def _any(self, select: str, keys: Iterable[object], *head: object, text: bool = False) -> list[Any]:
        wanted = list(keys)
        if not wanted:
            return []
        return self._q(select.replace("{in}", "= ANY(%s::text[])" if text else "= ANY(%s::bytea[])"),
                       *head, wanted)


    def _announce(self, convs: list[str]) -> list[Batch]:
        # sent once the transaction has committed (`_notify`): a NOTIFY inside it would take the
        # database's one notify lock at its COMMIT, and every writer of every conversation would
        # queue there holding its row locks
        pending: set[str] | None = getattr(self._local, "announce", None)
        if pending is None:  # not inside `transaction()`: delivered at its commit, as NOTIFY is
            return [(_NOTIFY, [(self.notify_channel, convs)])]
        pending.update(convs)
        return []

    def _notify(self, conn: _Conn, convs: set[str]) -> None:
        """Tell listeners `convs` grew, after the commit and outside it (its own tiny autocommit
        transaction, which writes no WAL). A crash or an error in between loses the notice, never
        a record: a listener catches up at its conversation's next notice or sync."""
        if convs:
            with suppress(psycopg.Error):
                conn.execute(self._sql(_NOTIFY), (self.notify_channel, sorted(convs)))

    def _after_commit(self, added: int) -> None:
        self._keep_statistics(added)

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

    @contextmanager
    def transaction(self, *convs: str) -> Iterator[None]:
        local = self._local
        if getattr(local, "depth", 0):
            local.depth += 1
            try:
                if convs:
                    self._lock_rows(convs)
                yield
            finally:
                local.depth -= 1
            return
        with self._translated():
            conn = self._pool.getconn(timeout=self._timeout)
        try:
            # naming its conversations, a writer waits only for theirs (their rows, locked in
            # sorted order); naming none, for every writer, as before version 6
            shared = "_shared" if convs else ""
            with self._translated():  # one round trip; the key is our own integer
                conn.execute(f"BEGIN; SELECT pg_advisory_xact_lock{shared}({self._lock_key})")
            local.conn, local.depth, local.rows, local.announce = conn, 1, {}, set()
            announce: set[str] = local.announce
            try:
                if convs:
                    self._lock_rows(convs)
                yield
            finally:
                local.conn, local.depth, local.rows, local.announce = None, 0, None, None
            with self._translated():
                if conn.info.transaction_status == TransactionStatus.INERROR:  # COMMIT would roll back
                    raise StoreError(f"a statement failed inside a transaction on {self._where}: rolled back")
                conn.execute("COMMIT")
            self._notify(conn, announce)
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

    def in_transaction(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    def _held_rows(self) -> dict[str, ConvRow] | None:
        return getattr(self._local, "rows", None)

    def change_token(self) -> object:
        # every commit moves its conversations' random tokens: their sum moves with them
        rows = self._q("SELECT coalesce(sum(token), 0), count(*) FROM {s}.convs")
        return (int(rows[0][0]), int(rows[0][1]))

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
