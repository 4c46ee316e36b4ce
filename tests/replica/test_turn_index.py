"""The turn index at the replica (docs/conversation.md §8): the hidden set it keeps for rooted
conversations, the views it serves, and how `verify` and the repair hold it to the records."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

import pg
from conftest import IN_CI
from convgraph import (
    ManualClock,
    MemoryStore,
    NoUserTurnError,
    Replica,
    SigningKey,
    SqliteStore,
    TurnIndexError,
)
from convgraph.core.cid import CID
from convgraph.core.rooted import conv_id
from convgraph.projections.index_rows import LineRow
from convgraph.projections.transcript import Window, resume_window, transcript
from convgraph.replica.adoption import compaction_of
from convgraph.replica.turn_index import TurnIndex, held
from convgraph.store.base import Store
from convgraph.store.postgres import PostgresStore
from projections.window_world import BRANCHES, World, ops

T0 = 1_700_000_000_000  # as projections.window_world's
NONCE = bytes(range(16))
STORES: dict[str, Callable[[Path], Store]] = {
    "memory": lambda _home: MemoryStore(),
    "sqlite": lambda home: SqliteStore(home / "replica.sqlite"),
}


@pytest.fixture(params=sorted(STORES))
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[int, ManualClock], Replica]:
    def device(i: int, clock: ManualClock) -> Replica:
        home = tmp_path / f"d{i}"
        home.mkdir(exist_ok=True)
        return Replica(STORES[request.param](home), SigningKey(bytes([i + 90]) * 32), clock=clock)

    return device


def sync(a: Replica, b: Replica) -> None:
    for src, dst in ((a, b), (b, a)):
        dst.ingest([r.data for r in src.iter_records()])


def test_a_rooted_conversation_keeps_its_hidden_set_current_through_writes_and_ingests(
    make: Callable[[int, ManualClock], Replica],
) -> None:
    clock = ManualClock(T0)
    owner, phone = make(0, clock), make(1, clock)
    conv = conv_id(owner.actor, NONCE)
    owner.write(conv, "genesis", {"nonce": NONCE})
    assert owner.store.hidden(conv) == frozenset()
    owner.write(conv, "grant", {"grantee": phone.actor, "rights": ["read", "write"]})
    sync(owner, phone)
    clock.advance(10)
    owner.write(conv, "revocation", {"grantee": phone.actor, "rights": ["read"], "reason": "lost"})
    lost = phone.say(conv, "user", "written by whoever found the phone")  # concurrent with the revocation
    assert phone.store.hidden(conv) == frozenset()
    sync(owner, phone)
    for r in (owner, phone):  # stored by the ingest that brought the revocation or the turn
        assert r.store.hidden(conv) == r.authority(conv).hidden() == frozenset({lost.cid})
        assert r.transcript(conv) == []
    owner.say(conv, "user", "still here")
    assert owner.store.hidden(conv) == frozenset({lost.cid})
    assert [t.text for t in owner.transcript(conv)] == ["still here"]


def test_a_legacy_conversation_keeps_no_hidden_set(make: Callable[[int, ManualClock], Replica]) -> None:
    r = make(0, ManualClock(T0))
    r.say("legacy", "user", "hi")
    assert r.store.hidden("legacy") is None


def _fold_window(r: Replica, conv: str, last: int | None, branch: str | None = None) -> object:
    return resume_window(r.visible(conv), branch=branch, last=last)


def test_a_fresh_replica_resumes_from_the_index_without_folding(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    writer = Replica.open(tmp_path / "r", clock=clock)
    conv = writer.create("long")
    for k in range(60):
        clock.advance(1)
        writer.say(conv, "user", f"question {k}")
        writer.say(conv, "assistant", f"answer {k}")
    writer.close()
    fresh = Replica.open(tmp_path / "r", clock=clock)
    window = fresh.resume_window(conv, last=3)
    assert [t.text for t in window.turns] == ["question 58", "answer 58", "question 59", "answer 59"]
    assert window.widened == 1
    assert len(fresh.resume(conv, "openai", last=3)) == 4
    assert conv not in fresh._folds.views and conv not in fresh._folds.authorities  # nothing was folded
    assert window == _fold_window(fresh, conv, 3)
    assert fresh.transcript(conv, last=5) == transcript(fresh.visible(conv), last=5)
    fresh.close()


def test_a_window_reaching_into_compacted_records_is_folded_and_the_same(
    make: Callable[[int, ManualClock], Replica],
) -> None:
    clock = ManualClock(T0)
    r = make(0, clock)
    for k in range(5):
        clock.advance(1)
        r.say("c", "user", f"old {k}")
    r.checkpoint("c", compact=True)
    for k in range(3):
        clock.advance(1)
        r.say("c", "assistant", f"new {k}")
    index = TurnIndex(r.store)
    assert index.resume_window("c", last=1) is None  # it widens back to a user turn, compacted
    assert [t.text for t in index.transcript("c", last=3) or []] == ["new 0", "new 1", "new 2"]
    for last in (1, 3, 4, 8, None):
        assert r.resume_window("c", last=last) == _fold_window(r, "c", last)
        assert r.transcript("c", last=last) == transcript(r.visible("c"), last=last)


# ---------------------------------------------------------------- the index equals the fold, at every step

BASE = {"memory": 60, "sqlite": 40, "postgres": 12}
LASTS = st.one_of(st.none(), st.integers(1, 10))


class Opened:
    """Replicas of one store kind over fresh stores, reopened as a new process would."""

    def __init__(self, kind: str, home: Path) -> None:
        self.kind, self.home, self.made = kind, home, 0
        self.dsn = pg.dsn() if kind == "postgres" else ""
        self.schema = ""

    def store(self) -> tuple[Store, Callable[[], Store]]:
        """A store as fresh as a new one; on PostgreSQL the one schema, emptied (`pg.emptied`):
        the stores of the example before are closed by then."""
        self.made += 1
        where = self.home / f"s{self.made}.sqlite"
        if self.kind == "postgres":
            self.schema = pg.emptied(self.dsn, self.schema) if self.schema else pg.fresh_schema(self.dsn)
        schema = self.schema
        if self.kind == "memory":
            memory = MemoryStore()
            return memory, lambda: memory
        if self.kind == "sqlite":
            return SqliteStore(where), lambda: SqliteStore(where)
        return PostgresStore(self.dsn, schema=schema, pool_size=2), lambda: PostgresStore(self.dsn, schema=schema,
                                                                                            pool_size=2)


def _outcome(read: Callable[[], Window | None]) -> Window | str | None:
    try:
        return read()
    except NoUserTurnError:
        return "no user turn"


def _same_views(r: Replica, conv: str, data: st.DataObject, *, compacted: bool) -> None:
    """The replica's views equal the fold's; the index answers them itself unless compaction
    (or adoption) took bytes it needs, or nothing of `conv` is stored (no hidden set yet)."""
    index = TurnIndex(r.store)
    compacted = compacted or not r.store.count(conv)
    state = r.visible(conv)  # the fold, once: nothing is written while the views are compared
    for branch in (None, *BRANCHES):
        last = data.draw(LASTS, label="last")
        want = _outcome(partial(resume_window, state, branch=branch, last=last))
        assert _outcome(partial(r.resume_window, conv, branch=branch, last=last)) == want
        direct = _outcome(partial(index.resume_window, conv, branch=branch, last=last))
        assert direct in (want, None) if compacted else direct == want  # None: the fold answers
        assert r.transcript(conv, branch=branch, last=last) == transcript(state, branch=branch, last=last)


@pytest.mark.parametrize("rooted", [False, True], ids=["legacy", "rooted"])
@pytest.mark.parametrize("kind", sorted(BASE))
def test_at_every_step_of_any_delivery_the_index_window_equals_the_fold_window(
    kind: str, rooted: bool, tmp_path: Path
) -> None:
    opened = Opened(kind, tmp_path)

    @settings(max_examples=BASE[kind] * (4 if IN_CI else 1))
    @given(script=ops(3, revoke=rooted), data=st.data())
    def run(script: list[tuple[object, ...]], data: st.DataObject) -> None:
        world = World.rooted() if rooted else World.new(3)
        conv = world.conv
        for op in script:
            world.run(op)
        order = data.draw(st.permutations(world.made), label="arrival")
        store, reopen = opened.store()
        observer = Replica(store, SigningKey(b"\x09" * 32), clock=ManualClock(T0 + 10**7))
        compacted, i = False, 0
        try:
            while i < len(order):
                n = data.draw(st.integers(1, 4), label="batch")
                observer.ingest([r.data for r in order[i : i + n]])  # late records land mid-line
                i += n
                if rooted and observer.store.count(conv):  # every ingest keeps it current
                    assert observer.store.hidden(conv) == observer.authority(conv).hidden()
                _same_views(observer, conv, data, compacted=compacted)
                step = data.draw(st.sampled_from(["go on", "go on", "compact", "reopen", "adopt"]), label="then")
                if step == "compact" and observer.heads(conv) and not rooted:  # the observer may not write
                    observer.checkpoint(conv, compact=True)
                    compacted = True
                elif step == "reopen":
                    if kind != "memory":
                        observer.close()
                    observer = Replica(reopen(), observer.key, clock=ManualClock(T0 + 10**7))
                elif step == "adopt" and compacted:
                    adopter = Replica(MemoryStore(), SigningKey(b"\x0a" * 32), clock=ManualClock(T0 + 10**7))
                    found = compaction_of(observer.store, conv)
                    assert found is not None
                    adopter.adopt(found.record, found.snapshot, found.cover)
                    _same_views(adopter, conv, data, compacted=True)
                    adopter.ingest([r.data for r in order[:i]])
                    _same_views(adopter, conv, data, compacted=True)
            assert not observer.verify().failures
        finally:
            if kind != "memory":
                observer.close()

    run()


# ---------------------------------------------------------------- verify and repair

def _corrupt(kind: str, store: Store, conv: str, victim: bytes) -> None:
    """A row of `victim` made wrong behind the store's back, and an extra row no record makes."""
    bogus = (conv, "", T0, 0, b"\x00" * 32, bytes(CID.of_record(b"no such record")), "user_message")
    if kind == "memory":
        rows = [r for r in store.index_rows(conv) if bytes(r.cid) != victim]
        wrong = next(r for r in store.index_rows(conv) if bytes(r.cid) == victim)
        store.reindex(conv, [*rows, LineRow("b1", wrong.key, "user_message"),
                             LineRow("", bogus[2:6], "user_message")])
        return
    if kind == "sqlite":
        assert isinstance(store, SqliteStore)
        db = sqlite3.connect(store.path)
        db.execute("UPDATE turn_line SET line = 'b1' WHERE cid = ?", (victim,))
        db.execute("INSERT INTO turn_line VALUES (?, ?, ?, ?, ?, ?, ?)", bogus)
        db.commit()
        db.close()
        return
    assert isinstance(store, PostgresStore)
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        table = sql.Identifier(store.schema, "turn_line")
        conn.execute(sql.SQL("UPDATE {} SET line = 'b1' WHERE cid = %s").format(table), (victim,))
        conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s, %s, %s)").format(table), bogus)


@pytest.mark.parametrize("kind", sorted(BASE))
def test_a_corrupted_index_row_is_reported_by_verify_and_fixed_by_repair(kind: str, tmp_path: Path) -> None:
    store, _ = Opened(kind, tmp_path).store()
    clock = ManualClock(T0)
    r = Replica(store, SigningKey(b"\x05" * 32), clock=clock)
    try:
        conv = r.create("x")
        turns = [r.say(conv, "user" if k % 2 == 0 else "assistant", f"turn {k}") for k in range(4)]
        assert r.verify().ok
        want = r.resume_window(conv, last=2)
        _corrupt(kind, store, conv, bytes(turns[2].cid))
        report = r.verify()
        rules = {(str(cid), e.rule) for cid, e in report.failures}
        assert rules == {(str(turns[2].cid), "turn_index"), (str(CID.of_record(b"no such record")), "turn_index")}
        assert all(isinstance(e, TurnIndexError) for _, e in report.failures)
        assert r.repair_index() == [conv]
        assert r.verify().ok and r.resume_window(conv, last=2) == want
        assert r.repair_index() == []
        store.set_hidden(conv, [turns[0].cid])  # a hidden set that is not the authority projection's
        (failure,) = r.verify().failures
        assert failure[0] == turns[0].cid and failure[1].rule == "turn_index"
        assert r.repair_index() == [conv] and r.verify().ok and store.hidden(conv) == frozenset()
    finally:
        r.close()


def test_a_cache_smaller_than_the_window_changes_nothing(make: Callable[[int, ManualClock], Replica]) -> None:
    clock = ManualClock(T0)
    r = make(0, clock)
    for k in range(12):
        clock.advance(1)
        r.say("c", "user" if k % 3 == 0 else "assistant", f"turn {k}")
    index = TurnIndex(r.store, cache_size=2)  # emptied again and again while one window is read
    for _ in range(3):
        assert index.resume_window("c", last=7) == resume_window(r.visible("c"), last=7)
        assert index.transcript("c") == transcript(r.visible("c"))


@pytest.mark.parametrize("non_user", [8, 9, 10, 40])
def test_a_small_window_pages_back_past_many_non_user_turns(
    make: Callable[[int, ManualClock], Replica], non_user: int,
) -> None:
    """`resume(last=1)` reads a first index page of `last + 8` rows: with more non-user turns
    than that after the user's, the window must go on to the next page, not give up."""
    clock = ManualClock(T0)
    replica = make(1, clock)
    conv = replica.create("long")
    replica.say(conv, "user", "the question")
    for i in range(non_user):
        clock.advance(1)
        replica.say(conv, "assistant", f"part {i}")
    whole = replica.transcript(conv)
    for last in (1, 2, 5):
        window = replica.resume_window(conv, last=last)
        assert window.turns[0].text == "the question" and window.turns[-1].text == f"part {non_user - 1}"
        assert [t.text for t in window.turns] == [t.text for t in whole]  # widened back to the user turn
        sent = replica.resume(conv, "anthropic", last=last)
        assert sent[0]["role"] == "user" and "the question" in str(sent[0]["content"])
        assert replica.transcript(conv, last=last) == whole[-last:]


def test_the_index_reads_a_named_record_only_from_its_own_conversation(
    make: Callable[[int, ManualClock], Replica],
) -> None:
    """A merge's `accepted` (or a head) naming a CID of another conversation held here must not
    bring that conversation's turns into this one's views: `held` answers for `conv` alone."""
    replica = make(1, ManualClock(T0))
    other, mine = replica.create("other"), replica.create("mine")
    secret = replica.say(other, "user", "the other conversation's secret")
    own = replica.say(mine, "user", "hello")
    found = held(replica.store, mine, [secret.cid, own.cid])
    assert list(found) == [own.cid]
    assert held(replica.store, other, [secret.cid, own.cid]).keys() == {secret.cid}
    assert "secret" not in str([t.text for t in replica.transcript(mine)])
