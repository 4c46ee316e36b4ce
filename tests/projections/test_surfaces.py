"""Surfaces: one per kind; the replay stream (routing EMAs) folds in canonical order and is never
trimmed; entities are last-writer-wins in canonical order."""

from __future__ import annotations

from typing import Any

import pytest

from convgraph import ManualClock, Replica, SigningKey
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.kinds import ROOTED_SCHEMAS
from convgraph.errors import RetentionRefusedError
from convgraph.projections import state as state_
from convgraph.projections.retention import LastN
from convgraph.projections.state import ConvState, Entry
from convgraph.projections.surfaces import (
    EMA_ALPHA,
    ENTITY_KEYS,
    SURFACES,
    RouteStats,
    Surface,
    routing_stats,
)
from convgraph.projections.turn import TURN_KINDS

C = "c"
T0 = 1_700_000_000_000
KEYS = [SigningKey(bytes([i + 40]) * 32) for i in range(3)]
TARGET = CID.of_record(b"target")


def writer(i: int, at: int = T0) -> tuple[Replica, ManualClock]:
    clock = ManualClock(at)
    return Replica.in_memory(KEYS[i], clock=clock), clock


def test_every_kind_has_exactly_one_surface() -> None:
    assert sorted(SURFACES) == sorted(ROOTED_SCHEMAS)
    assert all(type(s) is Surface for s in SURFACES.values())
    assert set(ENTITY_KEYS) == {k for k, s in SURFACES.items() if s is Surface.ENTITY}
    assert {k for k, s in SURFACES.items() if s is Surface.REPLAY} == {"routing_observation"}
    assert {k for k, s in SURFACES.items() if s is Surface.EVENT} >= TURN_KINDS


def _indexes(state: ConvState) -> dict[str, int]:
    return {
        "lines": sum(map(len, state.lines.values())),
        "retractions": sum(map(len, state.retractions.values())),
        "supersessions": sum(map(len, state.supersessions.values())),
        "branches": sum(map(len, state.branches.values())),
        "replay": len(state.replay),
        "entities": sum(map(len, state.entities.values())),
    }


_PAYLOAD: dict[str, dict[str, Any]] = {
    "retraction": {"target": TARGET}, "supersession": {"target": TARGET, "content": "x"},
    "branch": {"name": "b", "from": TARGET}, "decision": {"request": TARGET, "choice": "y"},
    "code_snapshot": {"path": "a.py", "content": "x"},
}


@pytest.mark.parametrize("kind", sorted(ROOTED_SCHEMAS))
def test_each_kind_folds_into_the_index_of_its_surface(kind: str) -> None:
    state = state_.apply(ConvState(), Entry(TARGET, kind, b"a" * 32, Hlc(T0, 0), None, _PAYLOAD.get(kind, {})))
    assert list(state.entries) == [TARGET]
    placed = {name for name, n in _indexes(state).items() if n}
    if kind in TURN_KINDS or kind == "merge":
        want = {"lines"}
    elif kind in ("retraction", "supersession", "branch"):
        want = {kind + ("es" if kind == "branch" else "s")}
    else:
        want = {Surface.REPLAY: {"replay"}, Surface.ENTITY: {"entities"}}.get(SURFACES[kind], set())
    assert placed == want


def test_routing_emas_by_hand() -> None:
    obs = [("m1", 100, True), ("m1", 200, False), ("m2", 300, True), ("m1", 50, True)]
    r, clock = writer(0)
    for model, latency, ok in obs:
        clock.advance(1)
        r.write(C, "routing_observation", {"model": model, "latency_ms": latency, "ok": ok})
    stats = r.routing(C)
    assert EMA_ALPHA == 0.2
    # m1 latency: 100 -> .2*200 + .8*100 = 120 -> .2*50 + .8*120 = 106; ok: 1 -> .8 -> .2 + .64 = .84
    assert stats["m1"] == RouteStats("m1", 3, pytest.approx(106.0), pytest.approx(0.84))
    assert stats["m2"] == RouteStats("m2", 1, 300.0, 1.0)
    assert routing_stats([{"model": m, "latency_ms": lat, "ok": ok} for m, lat, ok in obs]) == stats
    assert r.routing("absent") == {}


def test_a_late_older_observation_changes_the_ema_as_a_full_fold_says() -> None:
    a, ca = writer(0)
    b, cb = writer(1)
    reader, _ = writer(2, T0 + 1000)
    ca.advance(10)
    a.write(C, "routing_observation", {"model": "m", "latency_ms": 100, "ok": True})  # T0+10
    ca.advance(20)
    a.write(C, "routing_observation", {"model": "m", "latency_ms": 300, "ok": False})  # T0+30
    cb.advance(20)
    late = b.write(C, "routing_observation", {"model": "m", "latency_ms": 200, "ok": True})  # T0+20
    reader.ingest([r.data for r in a.iter_records()])
    assert reader.routing(C)["m"].latency_ema_ms == pytest.approx(0.2 * 300 + 0.8 * 100)  # 140
    reader.ingest([late.data])
    got = reader.routing(C)["m"]
    # canonical order is 100, 200, 300: 100 -> 120 -> .2*300 + .8*120 = 156 (arrival order would give 152)
    assert got == RouteStats("m", 3, pytest.approx(156.0), pytest.approx(0.2 * 0 + 0.8 * (0.2 + 0.8)))
    full = state_.fold([*b.records(C), *a.records(C)])
    assert {"m": got} == routing_stats(full.entries[c].payload for _, c in full.replay)


def test_retention_on_routing_is_refused_and_changes_nothing() -> None:
    r, clock = writer(0)
    for i in range(5):
        clock.advance(1)
        r.write(C, "routing_observation", {"model": "m", "latency_ms": 10 * i, "ok": i % 2 == 0})
    before, snap, count = r.routing(C), state_.snapshot(r.state(C)), r.store.count()
    with pytest.raises(RetentionRefusedError) as info:
        r.routing(C, retention=LastN(3))
    assert info.value.rule == "retention"
    assert r.routing(C) == before and before["m"].observations == 5
    assert state_.snapshot(r.state(C)) == snap and r.store.count() == count


def _winner(state: ConvState, kind: str, key: Any) -> dict[str, Any]:
    return state.entries[state.entities[(kind, key)][-1][1]].payload


def test_entities_are_last_writer_wins_in_canonical_order() -> None:
    a, ca = writer(0)
    b, cb = writer(1)
    ca.advance(20)
    a.write(C, "code_snapshot", {"path": "a.py", "content": "from a"})  # T0+20
    cb.advance(10)
    b.write(C, "code_snapshot", {"path": "a.py", "content": "from b"})  # T0+10: older, arrives later
    b.write(C, "code_snapshot", {"path": "b.py", "content": "only b"})
    a.ingest([r.data for r in b.iter_records()])
    state = a.state(C)
    assert _winner(state, "code_snapshot", "a.py")["content"] == "from a"
    assert _winner(state, "code_snapshot", "b.py")["content"] == "only b"
    assert len(state.entities[("code_snapshot", "a.py")]) == 2  # the loser is kept, just not current
    records = a.records(C)
    for order in (records, records[::-1]):
        assert _winner(state_.fold(order), "code_snapshot", "a.py")["content"] == "from a"
    b.ingest([r.data for r in a.iter_records()])
    cb.advance(100)
    b.write(C, "code_snapshot", {"path": "a.py", "content": "b again"})
    assert _winner(b.state(C), "code_snapshot", "a.py")["content"] == "b again"


def test_a_later_decision_on_one_request_overrides() -> None:
    r, clock = writer(0)
    ask = r.write(C, "decision_request", {"question": "ship?"})
    other = r.write(C, "decision_request", {"question": "name?"})
    for choice in ("no", "yes"):
        clock.advance(1)
        r.write(C, "decision", {"request": ask.cid, "choice": choice})
    r.write(C, "decision", {"request": other.cid, "choice": "cg"})
    state = r.state(C)
    assert _winner(state, "decision", ask.cid)["choice"] == "yes"
    assert _winner(state, "decision", other.cid)["choice"] == "cg"
