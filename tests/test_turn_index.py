"""The turn index at the replica (docs/conversation.md §8): the hidden set it keeps for rooted
conversations, the views it serves, and how `verify` and the repair hold it to the records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from convgraph import ManualClock, MemoryStore, Replica, SigningKey, SqliteStore
from convgraph.core.rooted import conv_id
from convgraph.store.base import Store

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
