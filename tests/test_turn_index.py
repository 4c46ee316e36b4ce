"""The turn index at the replica (docs/conversation.md §8): the hidden set it keeps for rooted
conversations, the views it serves, and how `verify` and the repair hold it to the records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from convgraph import ManualClock, MemoryStore, Replica, SigningKey, SqliteStore
from convgraph.core.rooted import conv_id
from convgraph.projections.transcript import resume_window, transcript
from convgraph.store.base import Store
from convgraph.turn_index import TurnIndex

T0 = 1_700_000_000_000
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
