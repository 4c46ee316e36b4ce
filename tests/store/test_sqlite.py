"""What only the SQLite store promises: durability across reopen, WAL, typed errors, locking."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from test_block_tables import A, B, C, D, E, F, named
from test_contract import GHOSTS, Universe, chain, commit, observe, pend, rec
from test_migration import sqlite_as_version_5

from convgraph.artifacts import CHUNK_SIZE, decode_manifest, split
from convgraph.core.cid import CID
from convgraph.core.keys import SigningKey
from convgraph.core.record import Record
from convgraph.errors import (
    ArtifactCorruptError,
    NonceLogFullError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreSchemaError,
)
from convgraph.integrity.statement import sign_statement
from convgraph.projections import state as state_
from convgraph.projections.index_rows import rows_of
from convgraph.replica import artifacts as replica_artifacts
from convgraph.store.rows import Pending, QuarantineBounds, WriteSet
from convgraph.store.sqlite import SCHEMA_VERSION, SqliteNonces, SqliteStore
from projections.window_world import CONV, upgrade_history


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "s.sqlite"


@pytest.fixture
def raw(path: Path) -> Iterator[Callable[[], sqlite3.Connection]]:
    """Opens plain sqlite3 connections to the store's file (another process, in effect)."""
    opened: list[sqlite3.Connection] = []

    def connect() -> sqlite3.Connection:
        db = sqlite3.connect(path, isolation_level=None, timeout=0)
        opened.append(db)
        return db

    yield connect
    for db in opened:
        db.close()


def _fill(store: SqliteStore) -> tuple[Universe, list[Pending]]:
    """Records in two conversations, an equivocation, and three quarantined entries (by arrival)."""
    c1, c2 = chain(5, "c1"), chain(3, "c2", key=1)
    rival = rec("c1", 5, c1[3].hlc.wall_ms + 1, (c1[3],), text="rival")
    waiting = chain(7, "c3", key=2)
    entries = [
        pend(waiting[4], missing=(waiting[3].cid, GHOSTS[0])),
        pend(waiting[6], "clock", wall=waiting[6].hlc.wall_ms + 500),
        pend(waiting[5], missing=(waiting[4].cid,)),
    ]
    commit(store, *c1, rival, equivocations=[(rival.cid, c1[4].cid)])
    commit(store, *c2, pending_put=entries[:1])
    commit(store, pending_put=entries[1:2])
    commit(store, pending_put=entries[2:])
    return Universe.of([*c1, rival, *c2, *waiting], entries), entries


def test_reopen_persists_everything(path: Path) -> None:
    store = SqliteStore(path)
    universe, entries = _fill(store)
    before = observe(store, universe)
    assert before["pending_stats"][0] == 3 and before["count"] == 9
    store.close()
    again = SqliteStore(path)
    try:
        assert observe(again, universe) == before
        # the quarantine's arrival order survived too: the oldest entries go first
        assert again.evict_pending(QuarantineBounds(max_count=1)) == [e.cid for e in entries[:2]]
    finally:
        again.close()


def test_arrival_order_survives_reopen(path: Path) -> None:
    entries = [pend(r) for r in sorted(chain(4), key=lambda r: r.cid, reverse=True)]
    store = SqliteStore(path)
    for e in entries:
        commit(store, pending_put=[e])
    store.close()
    again = SqliteStore(path)
    try:
        assert again.evict_pending(QuarantineBounds(max_count=1)) == [e.cid for e in entries[:3]]
    finally:
        again.close()


def test_wal_mode_is_on(path: Path, raw: Callable[[], sqlite3.Connection]) -> None:
    store = SqliteStore(path)
    try:
        commit(store, *chain(2))
        assert raw().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert path.with_name(path.name + "-wal").exists()
    finally:
        store.close()


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_the_store_commits_with_the_durability_it_was_opened_with(path: Path, synchronous: Any) -> None:
    with closing(SqliteStore(path, synchronous=synchronous)) as store:
        assert store.synchronous == synchronous
    with closing(SqliteStore(path)) as store:  # a connection's setting, not the file's
        assert store.synchronous == "NORMAL"


def test_a_file_that_is_not_a_database(path: Path) -> None:
    path.write_bytes(b"this is not a database, just text. " * 200)
    with pytest.raises(StoreCorruptError) as info:
        SqliteStore(path)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)
    assert path.read_bytes() == b"this is not a database, just text. " * 200


def test_a_foreign_sqlite_database_is_refused_and_left_alone(path: Path) -> None:
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE bookmarks (url TEXT)")
    other.execute("INSERT INTO bookmarks VALUES ('https://example.org')")
    other.commit()
    other.close()
    before = path.read_bytes()
    with pytest.raises(StoreCorruptError):
        SqliteStore(path)
    assert path.read_bytes() == before


def test_an_unknown_schema_version(path: Path, raw: Callable[[], sqlite3.Connection]) -> None:
    SqliteStore(path).close()
    db = raw()
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 98),))
    with pytest.raises(StoreSchemaError):
        SqliteStore(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION + 98),)
    assert issubclass(StoreSchemaError, StoreError)


def test_a_lock_held_past_the_busy_timeout(path: Path, raw: Callable[[], sqlite3.Connection]) -> None:
    store = SqliteStore(path, busy_timeout_s=0.1)
    try:
        a, b = chain(2)
        commit(store, a)
        holder = raw()
        holder.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with pytest.raises(StoreBusyError) as info:
            commit(store, b)
        waited = time.monotonic() - started
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        assert 0.05 <= waited < 5
        with pytest.raises(StoreBusyError), store.transaction():
            pytest.fail("the transaction body must not run without the lock")
        with pytest.raises(StoreBusyError):
            store.evict_pending(QuarantineBounds())
        with pytest.raises(StoreBusyError):
            SqliteStore(path, busy_timeout_s=0.1)
        # readers are not blocked by a writer in WAL mode, and see the last commit
        assert store.count() == 1 and store.heads("c1") == [a.cid]
        holder.execute("ROLLBACK")
        commit(store, b)  # the store is whole after the busy error
        assert store.heads("c1") == [b.cid]
    finally:
        store.close()


def test_a_transaction_lands_for_other_connections_only_at_exit(path: Path) -> None:
    writer, reader = SqliteStore(path), SqliteStore(path, busy_timeout_s=0.1)
    try:
        a, b = chain(2)
        with writer.transaction():
            commit(writer, a)
            commit(writer, b)
            assert writer.count() == 2
            assert reader.count() == 0 and reader.heads("c1") == []
            with pytest.raises(StoreBusyError):
                commit(reader, a)
        assert reader.count() == 2 and reader.heads("c1") == [b.cid]
        commit(reader, rec("c1", 1, b.hlc.wall_ms + 1, (b,), key=1))
        assert writer.count() == 3 and len(writer.heads("c1")) == 1
    finally:
        writer.close()
        reader.close()


def _every_call(store: SqliteStore, universe: Universe) -> list[Callable[[], Any]]:
    cid, actor = universe.cids[0], bytes(32)
    return [
        store.count,
        lambda: store.count("c1"),
        store.conversations,
        lambda: list(store.iter_all()),
        store.max_hlc,
        lambda: store.has(cid),
        lambda: store.get(cid),
        lambda: store.metas(universe.cids),
        lambda: store.heads("c1"),
        lambda: store.at_seq(actor, "c1", 1),
        lambda: store.last_own(actor, "c1"),
        lambda: store.records("c1"),
        lambda: store.records("c1", last=2),
        lambda: store.pending_get(universe.cids),
        lambda: store.pending_waiting_on(universe.cids),
        lambda: store.pending_due(2**52),
        store.pending_stats,
        store.equivocations,
        lambda: store.equivocations("c1"),
        lambda: store.evict_pending(QuarantineBounds(0, 0)),
        lambda: store.commit(WriteSet(records=[rec("zz", 1, 5)])),
    ]


def _outcomes(calls: list[Callable[[], Any]]) -> list[type[BaseException] | None]:
    out: list[type[BaseException] | None] = []
    for call in calls:
        try:
            call()
        except StoreError as exc:
            out.append(type(exc))
        else:
            out.append(None)
    return out  # anything that is not a StoreError propagates and fails the test


def test_no_raw_sqlite_error_escapes_from_a_damaged_file(path: Path) -> None:
    store = SqliteStore(path)
    commit(store, *chain(400, "c1"), pending_put=[pend(r) for r in chain(50, "c2")])
    universe = Universe.of(chain(400, "c1"))
    store.close()
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    for offset in range(2 * page, len(data) - page, 3 * page):  # scribble over every third page
        data[offset : offset + page] = b"\xa5" * page
    path.write_bytes(bytes(data))
    try:
        damaged = SqliteStore(path)
    except StoreCorruptError:
        return  # refused at open: as good as it gets
    try:
        outcomes = _outcomes(_every_call(damaged, universe))
    finally:
        damaged.close()
    assert StoreCorruptError in outcomes  # the damage was seen, and reported in our vocabulary


def test_no_raw_sqlite_error_escapes_from_a_closed_store(path: Path) -> None:
    store = SqliteStore(path)
    universe, _ = _fill(store)
    store.close()
    outcomes = _outcomes(_every_call(store, universe))
    assert None not in outcomes  # every call failed, and as a StoreError


def test_an_unopenable_path(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as info:
        SqliteStore(tmp_path / "no such directory" / "s.sqlite")
    assert isinstance(info.value.__cause__, sqlite3.Error)
    with pytest.raises(StoreError):
        SqliteStore(tmp_path)  # a directory


def test_change_token_sees_commits_by_another_connection(path: Path) -> None:
    with closing(SqliteStore(path)) as one, closing(SqliteStore(path)) as two:
        before = one.change_token()
        two.commit(WriteSet(records=[rec()]))
        assert one.change_token() != before


def test_nonces_survive_a_reopen_and_expire_with_their_window(path: Path) -> None:
    with closing(SqliteStore(path)) as store:
        assert SqliteNonces(store).first_use(b"a", "n1", 2_000, 1_000)
    with closing(SqliteStore(path)) as store:  # another process, or this one after a restart
        log = SqliteNonces(store)
        assert not log.first_use(b"a", "n1", 2_500, 1_500)
        assert log.first_use(b"b", "n1", 2_500, 1_500)  # per actor
        assert log.first_use(b"a", "n1", 3_001, 2_001)  # expired: usable again


def test_a_full_sqlite_nonce_log_refuses_and_forgets_nothing(path: Path) -> None:
    with closing(SqliteStore(path)) as store:
        log = SqliteNonces(store, max_entries=2)
        assert log.first_use(b"a", "n0", 2_000, 1_000) and log.first_use(b"a", "n1", 2_100, 1_000)
        with pytest.raises(NonceLogFullError) as caught:
            log.first_use(b"a", "n2", 2_000, 1_000)
        assert caught.value.limit == 2 and caught.value.status == 503
        assert not log.first_use(b"a", "n0", 2_000, 1_500)  # still a replay, full or not
        assert log.first_use(b"a", "n2", 4_000, 2_050)  # n0 expired and was swept: room again
        assert not log.first_use(b"a", "n1", 4_000, 2_050)


def test_a_version_1_file_is_upgraded_in_place(path: Path, raw: Callable[[], sqlite3.Connection]) -> None:
    store = SqliteStore(path)
    universe, _ = _fill(store)
    before = observe(store, universe)
    store.close()
    sqlite_as_version_5(path)
    db = raw()  # what version 1 made: the same tables, less the witnessed-history ones
    for table in ("remembered", "receipts", "gossip", "pending_checks", "findings", "finding_cites"):
        db.execute(f"DROP TABLE {table}")
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    again = SqliteStore(path)
    try:
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert observe(again, universe) == before and again.findings() == []
        statement = sign_statement(SigningKey(bytes(32)), "c1", 1, again.heads("c1"), 1_700_000_000_000)
        again.remember(statement)
    finally:
        again.close()
    third = SqliteStore(path)
    try:
        assert third.remembered(statement.key, "c1") == statement.data
    finally:
        third.close()


def test_a_version_2_file_gets_its_turn_index_from_the_records_and_snapshots(
    path: Path, raw: Callable[[], sqlite3.Connection]
) -> None:
    records = upgrade_history()
    store = SqliteStore(path)
    commit(store, *records)
    commit(store, *chain(2, "other", key=1))
    store.compact(CONV, [r.cid for r in records[:3]], records[-1].cid, state_.snapshot(state_.fold(records)))
    before = {c: sorted(store.index_rows(c), key=repr) for c in (CONV, "other")}
    store.close()
    sqlite_as_version_5(path)
    db = raw()  # what version 2 made: no turn index
    for table in ("turn_line", "turn_targets", "turn_branches", "turn_hidden", "turn_hidden_as_of"):
        db.execute(f"DROP TABLE {table}")
    db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    again = SqliteStore(path)
    try:
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert {c: sorted(again.index_rows(c), key=repr) for c in (CONV, "other")} == before
        assert sorted(before[CONV], key=repr) == sorted(rows_of(records), key=repr)
    finally:
        again.close()


def _artifact_history() -> tuple[list[Record], Record]:
    """Records naming artifacts in two conversations, and one more to hold as a header only."""
    first = named("c1", "user_message", {"content": "see"}, refs=(A,))
    snap = named("c1", "code_snapshot", {"blob": B, "tree": {"a.py": C}}, seq=2, parents=(first,))
    patch = named("c2", "patch", {"base": D, "result": E, "diff": "-a\n+b\n"})
    return [first, snap, patch], named("c3", "user_message", {"content": "header"}, refs=(F,))


def test_a_version_3_file_gets_its_artifact_refs_from_the_records(
    path: Path, raw: Callable[[], sqlite3.Connection]
) -> None:
    records, header = _artifact_history()
    store = SqliteStore(path)
    commit(store, *records, *chain(2, "plain"))
    store.commit(WriteSet(headers=[header.meta]))
    index = sorted(store.index_rows("c1"), key=repr)
    store.close()
    sqlite_as_version_5(path)
    db = raw()  # what version 3 made: no artifact tables
    db.execute("DROP TABLE blocks")
    db.execute("DROP TABLE artifact_refs")
    db.execute("DROP TABLE block_links")
    db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    again = SqliteStore(path)
    try:
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert again.artifact_refs("c1") == {A, B, C} and again.artifact_refs("c2") == {D, E}
        assert again.artifact_refs("c3") == set() and again.artifact_refs("plain") == set()
        assert again.records_naming("c1", [A, C, D]) == {A: {records[0].cid}, C: {records[1].cid}}
        assert again.conversations_naming([E, F]) == {"c2"}
        assert sorted(again.index_rows("c1"), key=repr) == index  # the turn index was kept, not rebuilt
        again.put_blocks([(CID.of_raw(b"new"), b"new")])
        assert again.get_block(CID.of_raw(b"new")) == b"new"
        manifest, pieces = split(bytes(CHUNK_SIZE + 1))
        again.put_blocks(pieces)
        assert set(again.chunks_of([manifest])[manifest]) == {c for c, _ in pieces if c != manifest}
    finally:
        again.close()


def test_a_block_rotted_on_disk_is_caught_on_the_way_out(path: Path, raw: Callable[[], sqlite3.Connection]) -> None:
    store = SqliteStore(path)
    data = bytes(i % 251 for i in range(3 * CHUNK_SIZE + 7))
    try:
        cid = replica_artifacts.put(store, data, limit=len(data))
        chunk = decode_manifest(store.get_block(cid) or b"").chunks[1]
        raw().execute("UPDATE blocks SET data = ? WHERE cid = ?", (b"\x00" * CHUNK_SIZE, bytes(chunk)))
        with pytest.raises(ArtifactCorruptError, match=str(chunk)):
            replica_artifacts.get(store, cid)
        pieces = replica_artifacts.open_artifact(store, cid)
        assert next(pieces) == data[:CHUNK_SIZE]  # the block before it is read, checked, and given
        with pytest.raises(ArtifactCorruptError):
            next(pieces)
    finally:
        store.close()
