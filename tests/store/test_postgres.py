"""What only the PostgreSQL store promises: schema handling, locking across pools and
processes, typed errors, NOTIFY at commit, and a whole replica on top of it."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from test_block_tables import A, B, C, D, E, F, named
from test_contract import GHOSTS, Universe, aborted, chain, check_against_records, commit, observe, pend, rec
from test_migration import as_version_5

import citus
import pg
from convgraph import Replica, SigningKey
from convgraph.artifacts import CHUNK_SIZE, decode_manifest, split
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import Record, sign_record
from convgraph.errors import (
    ArtifactCorruptError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreSchemaError,
)
from convgraph.integrity.statement import sign_statement
from convgraph.projections import state as state_
from convgraph.projections.index_rows import MAIN, rows_of
from convgraph.replica import artifacts as replica_artifacts
from convgraph.store.postgres import SCHEMA_VERSION, PostgresStore, listen
from convgraph.store.rows import QuarantineBounds, WriteSet
from convgraph.store.sql.postgres import PARTITIONS
from convgraph.store.sql.schema import CONV_TABLES, KEYED_TABLES
from projections.window_world import CONV, upgrade_history


@pytest.fixture
def schema(pg_dsn: str) -> str:
    return pg.fresh_schema(pg_dsn)


@pytest.fixture
def opened(pg_dsn: str, schema: str) -> Iterator[Callable[..., PostgresStore]]:
    """Opens stores on the test's schema (each its own pool: another server instance, in effect)."""
    stores: list[PostgresStore] = []

    def open_store(**options: Any) -> PostgresStore:
        store = PostgresStore(pg_dsn, schema=options.pop("schema", schema), **options)
        stores.append(store)
        return store

    yield open_store
    for store in stores:
        store.close()


@pytest.fixture
def raw(pg_dsn: str) -> Iterator[Callable[..., psycopg.Connection[Any]]]:
    """Plain psycopg connections to the test server (another process, in effect)."""
    opened: list[psycopg.Connection[Any]] = []

    def connect(*, autocommit: bool = True) -> psycopg.Connection[Any]:
        conn = psycopg.connect(pg_dsn, autocommit=autocommit)
        opened.append(conn)
        return conn

    yield connect
    for conn in opened:
        conn.close()


def _tables(conn: psycopg.Connection[Any], schema: str) -> set[str]:
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()
    return {r[0] for r in rows}


OURS_V1 = {"meta", "records", "heads", "pending", "pending_missing", "snapshots", "equivocations"}
OURS_V2 = OURS_V1 | {"remembered", "receipts", "gossip", "pending_checks", "findings", "finding_cites"}
OURS_V3 = OURS_V2 | {"turn_line", "turn_targets", "turn_branches", "turn_hidden", "turn_hidden_as_of"}
OURS_V4 = OURS_V3 | {"blocks", "artifact_refs", "block_links", "block_admitted"}
OURS_V5 = OURS_V4 | {"forgotten"}
# version 6: the conversation tables partitioned by hash of conv, each with its partitions
OURS = set(KEYED_TABLES) | set(CONV_TABLES) | {f"{t}_{i}" for t in CONV_TABLES for i in range(PARTITIONS)}


# ---------------------------------------------------------------- the schema


def test_reopen_persists_everything_and_the_quarantine_order(opened: Callable[..., PostgresStore]) -> None:
    store = opened()
    c1, c2 = chain(5, "c1"), chain(3, "c2", key=1)
    rival = rec("c1", 5, c1[3].hlc.wall_ms + 1, (c1[3],), text="rival")
    waiting = [pend(r) for r in sorted(chain(3, "c3", key=2), key=lambda r: r.cid, reverse=True)]
    commit(store, *c1, rival, equivocations=[(rival.cid, c1[4].cid)])
    commit(store, *c2, pending_put=waiting[:1])
    commit(store, pending_put=waiting[1:])
    universe = Universe.of([*c1, rival, *c2], waiting)
    before = observe(store, universe)
    store.close()
    again = opened()
    assert observe(again, universe) == before
    assert again.evict_pending(QuarantineBounds(max_count=1)) == [e.cid for e in waiting[:2]]


def test_all_tables_live_in_the_named_schema(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    commit(opened(), *chain(2))
    conn = raw()
    assert _tables(conn, schema) == OURS
    assert conn.execute(
        sql.SQL("SELECT value FROM {}.meta WHERE key = 'schema_version'").format(sql.Identifier(schema))
    ).fetchone() == (SCHEMA_VERSION,)
    assert conn.execute(sql.SQL("SELECT count(*) FROM {}.records").format(sql.Identifier(schema))).fetchone() == (2,)


def test_an_odd_schema_name_is_quoted(opened: Callable[..., PostgresStore], pg_dsn: str) -> None:
    name = pg.fresh_schema(pg_dsn, suffix=' Mixed "Case"')
    store = opened(schema=name)
    commit(store, *chain(3))
    assert store.count() == 3 and store.notify_channel == "convgraph_" + name
    with pytest.raises(StoreError, match="1 to 63 bytes"):
        PostgresStore(pg_dsn, schema="x" * 64)


def test_text_and_bytes_sort_as_python_and_sqlite_sort_them(opened: Callable[..., PostgresStore]) -> None:
    store = opened()
    names = ["b", "B", "a", "é", "Z", "aa", "a b", "日本", "\U0001f600", "ü"]
    for i, name in enumerate(names):  # code-point order, whatever the database's collation
        commit(store, rec(name, 1, 1_700_000_000_000 + i, key=i % 3))
    assert store.conversations() == sorted(names)
    same_time = [rec("c1", 1, 5, key=k, text=t) for k in range(3) for t in ("x", "y")]
    commit(store, *same_time)  # a tie on wall and counter: actor, then CID, bytewise
    want = sorted(same_time, key=lambda r: (r.actor, bytes(r.cid)))
    assert [c for c, _ in store.records("c1")] == [r.cid for r in want]
    assert store.heads("c1") == sorted(r.cid for r in same_time)


def test_an_unknown_schema_version(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    opened().close()
    meta = sql.Identifier(schema, "meta")
    conn = raw()
    conn.execute(sql.SQL("UPDATE {} SET value = %s WHERE key = 'schema_version'").format(meta), (SCHEMA_VERSION + 98,))
    with pytest.raises(StoreSchemaError):
        opened()
    row = conn.execute(sql.SQL("SELECT value FROM {} WHERE key = 'schema_version'").format(meta)).fetchone()
    assert row == (SCHEMA_VERSION + 98,)


def test_a_version_1_schema_is_upgraded_in_place(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    records = chain(3)
    commit(opened(), *records)
    conn = raw()  # what version 1 made: the same tables, less the witnessed-history ones
    as_version_5(conn, schema)
    for table in sorted(OURS_V5 - OURS_V1):
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, table)))
    meta = sql.Identifier(schema, "meta")
    conn.execute(sql.SQL("UPDATE {} SET value = 1 WHERE key = 'schema_version'").format(meta))
    store = opened()
    assert _tables(conn, schema) == OURS
    assert conn.execute(sql.SQL("SELECT value FROM {} WHERE key = 'schema_version'").format(meta)).fetchone() == (
        SCHEMA_VERSION,
    )
    assert store.records("c1") == [(r.cid, r.data) for r in records] and store.findings() == []
    statement = sign_statement(SigningKey(bytes(32)), "c1", 3, store.heads("c1"), 1_700_000_000_000)
    store.remember(statement)
    store.close()
    assert opened().remembered(statement.key, "c1") == statement.data  # and it lasts


def test_a_version_1_schema_lacking_its_own_tables_is_corrupt(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    opened().close()
    conn = raw()
    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, "snapshots")))
    conn.execute(sql.SQL("UPDATE {} SET value = 1 WHERE key = 'schema_version'").format(sql.Identifier(schema, "meta")))
    with pytest.raises(StoreCorruptError, match="lacks the tables"):
        opened()


def test_records_without_a_schema_version_are_refused(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    commit(opened(), *chain(2))
    raw().execute(sql.SQL("DELETE FROM {} WHERE key = 'schema_version'").format(sql.Identifier(schema, "meta")))
    with pytest.raises(StoreCorruptError, match="no schema version"):
        opened()


@pytest.mark.parametrize("foreign", ["a table of its own", "some of our tables"])
def test_a_foreign_schema_is_refused_and_left_alone(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str, foreign: str
) -> None:
    conn = raw()
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    if foreign == "a table of its own":
        conn.execute(sql.SQL("CREATE TABLE {} (url text)").format(sql.Identifier(schema, "bookmarks")))
        conn.execute(sql.SQL("INSERT INTO {} VALUES ('https://example.org')").format(sql.Identifier(schema, "bookmarks")))
    else:  # tables named like ours, but no meta table: not ours either
        conn.execute(sql.SQL("CREATE TABLE {} (cid bytea)").format(sql.Identifier(schema, "records")))
    before = _tables(conn, schema)
    with pytest.raises(StoreCorruptError, match="not a convgraph store"):
        opened()
    assert _tables(conn, schema) == before


def test_a_table_beside_ours_is_left_to_its_owner(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    commit(opened(), *chain(2))  # then the server adds its nonce table to the schema
    raw().execute(sql.SQL("CREATE TABLE {} (nonce text)").format(sql.Identifier(schema, "http_nonces")))
    again = opened()
    assert again.count() == 2 and _tables(raw(), schema) == {*OURS, "http_nonces"}


def test_a_damaged_schema_is_reported_as_corrupt(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    store = opened()
    commit(store, *chain(3))
    conn = raw()
    conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN seq").format(sql.Identifier(schema, "records")))
    with pytest.raises(StoreCorruptError) as info:
        store.at_seq(chain(1)[0].actor, "c1", 1)
    assert isinstance(info.value.__cause__, psycopg.errors.UndefinedColumn)
    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, "heads")))
    with pytest.raises(StoreCorruptError):
        store.heads("c1")
    with pytest.raises(StoreCorruptError, match="lacks the tables"):
        opened()  # a missing table is not silently made anew (and empty)


def _open_when(dsn: str, schema: str, start: float, errors: list[BaseException]) -> None:
    time.sleep(max(0.0, start - time.time()))
    try:
        PostgresStore(dsn, schema=schema).close()
    except BaseException as exc:
        errors.append(exc)


def test_concurrent_first_opens_of_one_fresh_schema(
    pg_dsn: str, raw: Callable[..., psycopg.Connection[Any]], opened: Callable[..., PostgresStore]
) -> None:
    code = (
        "import sys, time; from convgraph.store.postgres import PostgresStore;"
        " time.sleep(max(0.0, float(sys.argv[3]) - time.time()));"
        " PostgresStore(sys.argv[1], schema=sys.argv[2]).close()"
    )
    for trial in range(2):
        schema = pg.fresh_schema(pg_dsn)
        start = time.time() + 1.5  # after every process has imported
        procs = [
            subprocess.Popen([sys.executable, "-c", code, pg_dsn, schema, str(start)], stderr=subprocess.PIPE)
            for _ in range(3)
        ]
        errors: list[BaseException] = []
        threads = [threading.Thread(target=_open_when, args=(pg_dsn, schema, start, errors)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        outcomes = [(p.communicate(timeout=60)[1], p.returncode) for p in procs]
        failures = [err.decode() for err, code in outcomes if code != 0]
        assert errors == [] and failures == [], (trial, errors, failures)
        assert _tables(raw(), schema) == OURS
        store = opened(schema=schema)
        commit(store, *chain(2))
        assert store.count() == 2


# ---------------------------------------------------------------- many pools, many threads


def test_two_pools_on_one_schema_see_each_others_commits(opened: Callable[..., PostgresStore]) -> None:
    one, two = opened(), opened()
    a, b, c = chain(3)
    token, (_, cursor) = one.change_token(), one.since(0, "c1")
    commit(two, a, b)
    assert one.change_token() != token
    assert one.count() == 2 and one.heads("c1") == [b.cid]
    assert one.since(cursor, "c1")[0] == [(a.cid, a.data), (b.cid, b.data)]
    token = two.change_token()
    commit(one, c)
    assert two.change_token() != token and two.heads("c1") == [c.cid]
    assert two.cursor() == one.cursor()


def test_a_transaction_lands_for_other_pools_and_threads_only_at_exit(opened: Callable[..., PostgresStore]) -> None:
    writer, reader = opened(), opened(busy_timeout_s=0.1)
    a, b = chain(2)
    seen: list[int] = []
    with writer.transaction():
        commit(writer, a)
        commit(writer, b)
        assert writer.count() == 2 and writer.in_transaction()
        assert reader.count() == 0 and reader.heads("c1") == []
        # another thread of the same store reads committed state through its own connection
        other = threading.Thread(target=lambda: seen.append(writer.count() + 10 * writer.in_transaction()))
        other.start()
        other.join()
        assert seen == [0]
        with pytest.raises(StoreBusyError):
            commit(reader, a)
    assert reader.count() == 2 and reader.heads("c1") == [b.cid]
    commit(reader, rec("c1", 1, b.hlc.wall_ms + 1, (b,), key=1))
    assert writer.count() == 3 and len(writer.heads("c1")) == 1


def _write_on_heads(store: PostgresStore, key: SigningKey, conv: str, n: int, out: list[Record]) -> None:
    """Read-then-write `n` times: each record names every current head and its own last."""
    for i in range(n):
        with store.transaction():
            parents = set(store.heads(conv))
            last = store.last_own(key.public, conv)
            if last is not None:
                parents.add(last.cid)
            metas = store.metas(parents).values()
            top = max((m.hlc for m in metas), default=Hlc(1_700_000_000_000, 0))
            record = sign_record(
                key, conv=conv, seq=1 if last is None else last.seq + 1, hlc=Hlc(top.wall_ms, top.counter + 1),
                parents=sorted(parents), kind="user_message", payload={"content": f"{i}"},
            )
            store.commit(WriteSet(records=[record], fresh=True))
        out.append(record)


@pytest.mark.parametrize("pools", [1, 2])
def test_writers_in_two_threads_never_lose_records_or_break_heads(
    opened: Callable[..., PostgresStore], pools: int
) -> None:
    stores = [opened() for _ in range(pools)]
    keys = [SigningKey(bytes([k]) * 32) for k in (7, 8)]
    written: list[list[Record]] = [[], []]
    threads = [
        threading.Thread(target=_write_on_heads, args=(stores[i % pools], keys[i], "c1", 40, written[i]))
        for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [*written[0], *written[1]]
    assert len(everything) == 80
    store = stores[0]
    # had two writers read the same heads, the graph would have forked: it never did
    assert len(store.heads("c1")) == 1 and store.count("c1") == 80
    assert store.heads("c1") == [max(everything, key=lambda r: r.hlc).cid]
    by_arrival = [cid for cid, _ in store.since(0, "c1")[0]]
    check_against_records(store, [next(r for r in everything if r.cid == c) for c in by_arrival])
    assert store.equivocations() == []


def test_a_reader_following_since_misses_nothing_while_writers_race(opened: Callable[..., PostgresStore]) -> None:
    writers, reader = [opened(), opened()], opened()
    keys = [SigningKey(bytes([k]) * 32) for k in (5, 6)]
    written: list[list[Record]] = [[], []]
    threads = [
        threading.Thread(target=_write_on_heads, args=(writers[i], keys[i], "c1", 30, written[i])) for i in range(2)
    ]
    for t in threads:
        t.start()
    seen: list[bytes] = []
    cursor = 0
    while True:
        done = not any(t.is_alive() for t in threads)  # before the read: then it sees every commit
        fresh, cursor = reader.since(cursor, "c1")
        seen.extend(bytes(c) for c, _ in fresh)
        if done and not fresh:
            break
    for t in threads:
        t.join()
    assert sorted(seen) == sorted(bytes(r.cid) for r in [*written[0], *written[1]])  # each once, none skipped
    assert seen == [bytes(c) for c, _ in reader.since(0, "c1")[0]]  # and in arrival order


def test_a_lock_held_past_the_busy_timeout(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]]
) -> None:
    store = opened(busy_timeout_s=0.1)
    a, b = chain(2)
    commit(store, a)
    holder = raw(autocommit=False)
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (store.lock_key,))  # and keep the transaction open
    started = time.monotonic()
    with pytest.raises(StoreBusyError) as info:
        commit(store, b)
    waited = time.monotonic() - started
    assert isinstance(info.value.__cause__, psycopg.errors.LockNotAvailable)
    assert 0.05 <= waited < 5
    with pytest.raises(StoreBusyError), store.transaction():
        pytest.fail("the transaction body must not run without the lock")
    with pytest.raises(StoreBusyError):
        store.evict_pending(QuarantineBounds())
    with pytest.raises(StoreBusyError):
        store.compact("c1", [], GHOSTS[0], b"snap")
    with pytest.raises(StoreBusyError):
        opened(busy_timeout_s=0.1)  # opening takes the lock too, to create the schema safely
    assert store.count() == 1 and store.heads("c1") == [a.cid]  # readers are never blocked
    holder.rollback()
    commit(store, b)  # whole after the busy errors: no connection was left in a transaction
    assert store.heads("c1") == [b.cid]


def test_every_connection_lent_out_is_busy(opened: Callable[..., PostgresStore]) -> None:
    store = opened(pool_size=1, busy_timeout_s=0.2)
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with store.transaction():
            inside.set()
            leave.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(10)
        with pytest.raises(StoreBusyError, match="no connection"):
            store.count()
    finally:
        leave.set()
        holder.join()
    assert store.count() == 0


# ---------------------------------------------------------------- transactions


def test_a_rolled_back_token_is_never_handed_out_again(opened: Callable[..., PostgresStore]) -> None:
    store = opened()
    a, b = chain(2)
    first = store.change_token()
    inside: list[object] = []
    aborted(store, lambda: (commit(store, a), inside.append(store.change_token())))
    assert store.change_token() == first
    commit(store, b)  # a cache keyed by the rolled-back token must not think this is that state
    assert store.change_token() not in (first, inside[0])


def test_a_failed_statement_inside_a_transaction_rolls_all_of_it_back(opened: Callable[..., PostgresStore]) -> None:
    store = opened()
    a, b = chain(2)
    commit(store, a)

    def body() -> None:
        with store.transaction():
            commit(store, b)
            with pytest.raises(StoreError):  # `fresh` promises the record is new: it is not
                store.commit(WriteSet(records=[a], fresh=True))

    with pytest.raises(StoreError, match="rolled back"):  # SQLite would keep b: see the module doc
        body()
    assert not store.has(b.cid) and store.heads("c1") == [a.cid]
    commit(store, b)
    assert store.heads("c1") == [b.cid]


def test_a_commit_of_many_records_is_batched(
    opened: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = opened()
    statements: list[str] = []
    for name in ("execute", "executemany"):  # every statement the store sends goes through one of these
        sent = getattr(psycopg.Cursor, name)

        def counted(self: psycopg.Cursor[Any], *args: Any, _sent: Any = sent, _name: str = name,
                    **kwargs: Any) -> Any:
            statements.append(_name)
            return _sent(self, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, name, counted)
    commit(store, *chain(10, "small"))
    for_ten = len(statements)
    records = chain(900, "big")  # under the 1,000 rows after which the store runs ANALYZE
    commit(store, *records)
    for_many = len(statements) - for_ten
    assert store.count("big") == 900 and store.heads("big") == [records[-1].cid]
    # batched: nine hundred records cost the statements ten do, not one round trip each
    assert for_many == for_ten, statements


def test_a_writer_locks_its_conversation_row_once_per_transaction(
    opened: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each statement on `convs` is a round trip to the conversation's shard on Citus: one
    append holds its row with one statement and writes it with one, however many commits of
    that conversation a transaction makes (they read the row as the last one wrote it)."""
    store = opened()
    a, b, c, d = chain(4)
    commit(store, a)
    sent: list[str] = []
    for name in ("execute", "executemany"):  # Connection.execute goes through Cursor.execute
        original = getattr(psycopg.Cursor, name)

        def counted(self: psycopg.Cursor[Any], query: Any, *args: Any, _original: Any = original,
                    **kwargs: Any) -> Any:
            sent.append(query if isinstance(query, str) else repr(query))
            return _original(self, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, name, counted)
    commit(store, b)
    on_convs = [q for q in sent if ".convs" in q or '"convs"' in q]
    assert len(on_convs) == 2, on_convs  # the hold (made if missing, locked, read), the update
    sent.clear()
    with store.transaction("c1"):
        commit(store, c)
        commit(store, d)
    on_convs = [q for q in sent if ".convs" in q or '"convs"' in q]
    assert len(on_convs) == 3, on_convs  # one hold, two updates
    assert store.since(0, "c1")[1] == 4 and store.heads("c1") == [d.cid]


def test_a_commit_refused_inside_a_transaction_leaves_the_next_its_arrival(
    opened: Callable[..., PostgresStore],
) -> None:
    """A commit that counted its records on the held row and then refused (before writing it)
    must not leave the count behind: the next commit of the transaction takes arrival 2."""
    store = opened()
    a, b, c = chain(3)
    commit(store, a)
    with store.transaction("c1"):
        with pytest.raises(StoreError, match="equivocation"):
            commit(store, b, equivocations=[(a.cid, c.cid)])  # c is not stored: refused
        commit(store, b)
    assert store.since(0, "c1") == ([(a.cid, a.data), (b.cid, b.data)], 2)
    assert store.cursor("c1") == 2


# ---------------------------------------------------------------- errors


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_server_is_a_store_error_naming_it_but_not_the_password() -> None:
    port = _free_port()
    with pytest.raises(StoreError) as info:
        PostgresStore(f"postgresql://convgraph:s3cret-pw@127.0.0.1:{port}/somedb", busy_timeout_s=2)
    assert f"127.0.0.1:{port}/somedb" in str(info.value) and "s3cret" not in str(info.value)
    assert isinstance(info.value.__cause__, psycopg.OperationalError)
    with pytest.raises(StoreError) as info:
        PostgresStore("postgresql://u:s3cret-pw@[::1/db")  # libpq's own message would quote it all
    assert "malformed" in str(info.value) and "s3cret" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_connection_killed_by_the_server_is_a_store_error_and_the_pool_recovers(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    store = opened()
    commit(store, *chain(2))
    killed = raw().execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
        (f"convgraph/{schema}",),
    ).fetchone()
    assert killed is not None and killed[0] >= 1
    with pytest.raises(StoreError) as info:
        store.count()
    assert isinstance(info.value.__cause__, psycopg.OperationalError)
    assert not isinstance(info.value, StoreBusyError | StoreCorruptError)
    deadline = time.monotonic() + 10
    while True:  # the pool replaces the dead connection
        try:
            assert store.count() == 2
            break
        except StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_no_raw_psycopg_error_escapes_from_a_closed_store(opened: Callable[..., PostgresStore]) -> None:
    store = opened()
    commit(store, *chain(3))
    store.close()
    cid = GHOSTS[0]
    calls: list[Callable[[], object]] = [
        store.count, lambda: store.count("c1"), store.conversations, lambda: list(store.iter_all()),
        store.max_hlc, lambda: store.has(cid), lambda: store.get(cid), lambda: store.metas([cid]),
        lambda: store.heads("c1"), lambda: store.at_seq(bytes(32), "c1", 1), lambda: store.last_own(bytes(32), "c1"),
        lambda: store.records("c1"), lambda: store.records("c1", last=2), lambda: store.pending_get([cid]),
        lambda: store.pending_waiting_on([cid]), lambda: store.pending_due(2**52), store.pending_stats,
        store.equivocations, lambda: store.evict_pending(QuarantineBounds(0, 0)), store.change_token,
        lambda: store.since(0, "c1"), store.cursor, lambda: store.sync_keys("c1"), lambda: store.snapshot("c1"),
        lambda: store.commit(WriteSet(records=[rec("zz", 1, 5)])),
    ]
    for call in calls:
        with pytest.raises(StoreError, match="closed"):
            call()
    store.close()  # twice is fine


# ---------------------------------------------------------------- NOTIFY


async def _next(gen: AsyncIterator[str], timeout: float = 10) -> str:
    """The next conversation named, skipping the subscription probes."""
    while (conv := await asyncio.wait_for(anext(gen), timeout)) == "probe":
        pass
    return conv


async def _subscribed(gen: AsyncIterator[str], poke: Callable[[], None]) -> None:
    """Notify until the listener hears it: from then on, nothing sent can be missed."""
    first = asyncio.ensure_future(anext(gen))
    deadline = time.monotonic() + 20
    while not first.done():
        assert time.monotonic() < deadline, "the listener never subscribed"
        poke()
        await asyncio.wait({first}, timeout=0.05)
    assert first.result() == "probe"


def test_listeners_hear_of_commits_and_never_of_rollbacks(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], pg_dsn: str, schema: str
) -> None:
    store = opened()
    probe = raw()

    async def scenario() -> None:
        gen = listen(pg_dsn, schema)
        try:
            await _subscribed(gen, lambda: probe.execute("SELECT pg_notify(%s, 'probe')", (store.notify_channel,)))
            a, b = chain(2)
            commit(store, a)
            assert await _next(gen) == "c1"
            aborted(store, lambda: commit(store, rec("rolled back", 1, 5)))
            commit(store, a)  # nothing new: nothing to announce
            with store.transaction():  # announced at the outer commit, once per conversation
                commit(store, b, chain(1, "c2", key=1)[0])
                commit(store, chain(2, "c2", key=1)[1])
            assert {await _next(gen), await _next(gen)} == {"c1", "c2"}
            commit(store, chain(1, "c3", key=2)[0])
            assert await _next(gen) == "c3"  # so nothing of the rollback, nor a third c1/c2, came first
        finally:
            await gen.aclose()

    asyncio.run(scenario())
    deadline = time.monotonic() + 10
    while probe.execute(  # closing the generator closed its connection
        "SELECT count(*) FROM pg_stat_activity WHERE query = %s",
        (sql.SQL("LISTEN {}").format(sql.Identifier(store.notify_channel)).as_string(probe),),
    ).fetchone() != (0,):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_commit_announces_its_conversations_after_its_commit_not_inside_it(
    opened: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NOTIFY inside the transaction would take the database's one notify lock at COMMIT, and
    writers of every conversation would queue there holding their row locks: the notice is sent
    once the transaction has committed, one statement for all its conversations."""
    store = opened()
    sent: list[str] = []
    original = psycopg.Cursor.execute

    def counted(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(query if isinstance(query, str) else repr(query))
        return original(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    with store.transaction("c1", "c2"):
        commit(store, chain(1)[0])
        commit(store, chain(1, "c2", key=1)[0])
    notices = [i for i, q in enumerate(sent) if "pg_notify" in q]
    assert len(notices) == 1 and sent.index("COMMIT") < notices[0], sent


def test_listen_to_an_unreachable_server() -> None:
    async def scenario() -> None:
        await anext(listen(f"postgresql://u:s3cret@127.0.0.1:{_free_port()}/db", "s"))

    with pytest.raises(StoreError) as info:
        asyncio.run(scenario())
    assert "127.0.0.1" in str(info.value) and "s3cret" not in str(info.value)


# ---------------------------------------------------------------- a replica on top


def test_a_replica_on_postgres_end_to_end(opened: Callable[..., PostgresStore], pg_dsn: str) -> None:
    shared = opened()
    alice = Replica(shared, SigningKey.generate())
    bob = Replica(opened(schema=pg.fresh_schema(pg_dsn)), SigningKey.generate())
    q = alice.write("c", "user_message", {"content": "what is 2 + 2?"})
    alice.write("d", "user_message", {"content": "another conversation"})
    report = bob.ingest([r.data for r in alice.iter_records()])
    assert sorted(report.accepted) == sorted([q.cid, *(r.cid for r in alice.records("d"))])
    answer = bob.write("c", "agent_message", {"content": "4"})
    assert answer.parents == (q.cid,)
    alice.ingest([answer.data])
    assert [r.cid for r in alice.records("c")] == [r.cid for r in bob.records("c")] == [q.cid, answer.cid]
    assert alice.transcript("c") == bob.transcript("c") and len(alice.transcript("c")) == 2
    # a second instance on alice's schema with her key keeps one chain (the change token moves)
    twin = Replica(opened(schema=shared.schema), alice.key)
    for i in range(4):
        (alice if i % 2 else twin).write("c", "user_message", {"content": str(i)})
    own = sorted((r for r in alice.records("c") if r.actor == alice.actor), key=lambda r: r.seq)
    assert [r.seq for r in own] == list(range(1, 6)) and len(alice.heads("c")) == 1
    assert all(own[i - 1].cid in own[i].parents for i in range(1, 5))
    bob.ingest([r.data for r in alice.records("c")])
    assert bob.heads("c") == alice.heads("c") and bob.store.sync_keys("c") == shared.sync_keys("c")
    checkpoint = alice.checkpoint("c", compact=True)
    snap = shared.snapshot("c")
    assert snap is not None and snap[0] == checkpoint.cid
    assert alice.transcript("c") == twin.transcript("c")
    assert alice.store.equivocations() == [] and alice.verify().ok and bob.verify().ok


def test_a_version_2_schema_gets_its_turn_index_from_the_records_and_snapshots(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    records = upgrade_history()
    store = opened()
    commit(store, *records)
    commit(store, *chain(2, "other", key=1))
    store.compact(CONV, [r.cid for r in records[:3]], records[-1].cid, state_.snapshot(state_.fold(records)))
    before = {c: sorted(store.index_rows(c), key=repr) for c in (CONV, "other")}
    store.close()
    conn = raw()  # what version 2 made: no turn index
    as_version_5(conn, schema)
    for table in sorted(OURS_V5 - OURS_V2):  # version 3 and 4 tables go
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, table)))
    meta = sql.Identifier(schema, "meta")
    conn.execute(sql.SQL("UPDATE {} SET value = 2 WHERE key = 'schema_version'").format(meta))
    again = opened()
    assert _tables(conn, schema) == OURS
    assert conn.execute(sql.SQL("SELECT value FROM {} WHERE key = 'schema_version'").format(meta)).fetchone() == (
        SCHEMA_VERSION,
    )
    assert {c: sorted(again.index_rows(c), key=repr) for c in (CONV, "other")} == before
    assert before[CONV] == sorted(rows_of(records), key=repr)


@pytest.mark.parametrize("in_transaction", [False, True])
def test_the_store_keeps_its_statistics_so_a_window_reads_the_index(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], in_transaction: bool
) -> None:
    """The test server runs with autovacuum off: without the store's own ANALYZE the planner,
    knowing no table sizes, read a window of a line by sorting the whole line (60 ms at 90,000).
    A replica commits inside its own transactions: the check runs when the outermost commits."""
    store = opened()
    records = chain(1_200)
    if in_transaction:
        with store.transaction():
            commit(store, *records[:600])
            commit(store, *records[600:])
    else:
        commit(store, *records)
    conn = raw()
    turn_line = sql.Identifier(store.schema, "turn_line")
    assert citus.reltuples(conn, turn_line.as_string(conn)) >= 1_000  # on Citus, on the shards
    plan = "\n".join(row[0] for row in conn.execute(sql.SQL(
        "EXPLAIN SELECT wall FROM {} WHERE conv = 'c1' AND line = %s"
        " ORDER BY wall DESC, counter DESC, actor DESC, cid DESC LIMIT 10").format(turn_line), [MAIN]))
    # one partition's primary key (the conversation's, pruned to), read backwards
    assert re.search(r"Scan Backward using turn_line(_\d+)?_pkey", plan) and "Sort" not in plan, plan


def test_a_version_3_schema_gets_its_artifact_refs_from_the_records(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    first = named("c1", "user_message", {"content": "see"}, refs=(A,))
    snap = named("c1", "code_snapshot", {"blob": B, "tree": {"a.py": C}}, seq=2, parents=(first,))
    patch = named("c2", "patch", {"base": D, "result": E, "diff": "-a\n+b\n"})
    header = named("c3", "user_message", {"content": "header"}, refs=(F,))
    store = opened()
    commit(store, first, snap, patch, *chain(2, "plain"))
    store.commit(WriteSet(headers=[header.meta]))
    index = sorted(store.index_rows("c1"), key=repr)
    store.close()
    conn = raw()  # what version 3 made: no artifact tables
    as_version_5(conn, schema)
    for table in sorted(OURS_V5 - OURS_V3):
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, table)))
    meta = sql.Identifier(schema, "meta")
    conn.execute(sql.SQL("UPDATE {} SET value = 3 WHERE key = 'schema_version'").format(meta))
    again = opened()
    assert _tables(conn, schema) == OURS
    assert conn.execute(sql.SQL("SELECT value FROM {} WHERE key = 'schema_version'").format(meta)).fetchone() == (
        SCHEMA_VERSION,
    )
    assert again.artifact_refs("c1") == {A, B, C} and again.artifact_refs("c2") == {D, E}
    assert again.artifact_refs("c3") == set() and again.artifact_refs("plain") == set()
    assert again.records_naming("c1", [A, C, D]) == {A: {first.cid}, C: {snap.cid}}
    assert again.conversations_naming([E, F]) == {"c2"}
    assert sorted(again.index_rows("c1"), key=repr) == index
    again.put_blocks([(CID.of_raw(b"new"), b"new")])
    assert again.get_block(CID.of_raw(b"new")) == b"new"
    manifest, pieces = split(bytes(CHUNK_SIZE + 1))
    again.put_blocks(pieces)
    assert set(again.chunks_of([manifest])[manifest]) == {c for c, _ in pieces if c != manifest}


def test_a_version_4_schema_gets_its_tombstones_table(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    store = opened()
    commit(store, *chain(3), *chain(2, "c2"))
    store.close()
    conn = raw()  # what version 4 made: no `forgotten`
    as_version_5(conn, schema)
    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, "forgotten")))
    meta = sql.Identifier(schema, "meta")
    conn.execute(sql.SQL("UPDATE {} SET value = 4 WHERE key = 'schema_version'").format(meta))
    again = opened()
    assert _tables(conn, schema) == OURS
    assert conn.execute(sql.SQL("SELECT value FROM {} WHERE key = 'schema_version'").format(meta)).fetchone() == (
        SCHEMA_VERSION,
    )
    again.forget("c1")
    assert again.forgotten(["c1", "c2"]) == {"c1"} and again.conversations() == ["c2"]


def test_a_block_rotted_on_disk_is_caught_on_the_way_out(
    opened: Callable[..., PostgresStore], raw: Callable[..., psycopg.Connection[Any]], schema: str
) -> None:
    store = opened()
    data = bytes(i % 251 for i in range(3 * CHUNK_SIZE + 7))
    cid = replica_artifacts.put(store, data, limit=len(data))
    chunk = decode_manifest(store.get_block(cid) or b"").chunks[2]
    raw().execute(sql.SQL("UPDATE {} SET data = %s WHERE cid = %s").format(sql.Identifier(schema, "blocks")),
                  (b"\x00" * CHUNK_SIZE, bytes(chunk)))
    with pytest.raises(ArtifactCorruptError, match=str(chunk)):
        replica_artifacts.get(store, cid)
