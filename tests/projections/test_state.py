"""The folded state: a function of the record set, and its snapshot a canonical, checked encoding."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph import ManualClock, Record, Replica, SigningKey
from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.errors import SnapshotError
from convgraph.projections.state import SNAPSHOT_VERSION, ConvState, apply, fold, restore, snapshot
from convgraph.projections.surfaces import routing_stats
from convgraph.projections.transcript import transcript, transcript_bytes
from convgraph.projections.turn import TURN_KINDS, ToolCall

C = "c"
T0 = 1_700_000_000_000
KEYS = [SigningKey(bytes([i + 90]) * 32) for i in range(2)]
PROPERTY = settings(max_examples=200 if IN_CI else 40)
BRANCHES = ("x", "y")


def _records(w: Replica, kinds: frozenset[str] | None = None) -> list[Record]:
    return [r for r in w.records(C) if kinds is None or r.kind in kinds]


@st.composite
def conversations(draw: st.DrawFn) -> list[Record]:
    """Two writers, interleaved with syncs and clock ticks, writing every kind the views fold."""
    clocks = [ManualClock(T0) for _ in KEYS]
    ws = [Replica.in_memory(k, clock=c) for k, c in zip(KEYS, clocks, strict=True)]
    for _ in range(draw(st.integers(1, 14))):
        i = draw(st.integers(0, 1))
        w, known = ws[i], _records(ws[i])
        turns = [r for r in known if r.kind in TURN_KINDS]
        branches = sorted({r.payload["name"] for r in known if r.kind == "branch"})
        op = draw(st.sampled_from(["say", "say", "tick", "sync", "retract", "supersede", "branch", "merge",
                                   "route", "code"]))
        if op == "tick":
            clocks[i].advance(draw(st.integers(0, 3)))
        elif op == "sync":
            w.ingest([r.data for r in ws[1 - i].iter_records()])
        elif op == "say":
            role = draw(st.sampled_from(["user", "assistant", "tool"]))
            branch = draw(st.sampled_from([None, *branches]))
            text = draw(st.sampled_from(["yes", "no", ""]))
            if role == "tool":
                w.say(C, role, text, tool_use_id="call_1", branch=branch)
            else:
                calls = [ToolCall("call_1", "f", {"a": 1})] if role == "assistant" and draw(st.booleans()) else []
                w.say(C, role, text or "hm", tool_calls=calls, branch=branch)
        elif op in ("retract", "supersede") and turns:
            target = draw(st.sampled_from(turns)).cid  # by its author or not
            if op == "retract":
                w.write(C, "retraction", {"target": target})
            else:
                w.write(C, "supersession", {"target": target, "content": draw(st.sampled_from(["v1", "v2"]))})
        elif op == "branch" and known:
            w.branch(C, draw(st.sampled_from(BRANCHES)), draw(st.sampled_from(known)).cid)
        elif op == "merge" and branches:
            name = draw(st.sampled_from(branches))
            on_branch = [r.cid for r in turns if r.branch == name]
            accepted = draw(st.lists(st.sampled_from(on_branch), max_size=2)) if on_branch else []
            synthesis = draw(st.sampled_from([{}, {"summary": "s"}, {"content": "merged"}]))
            w.merge(C, name, accepted=accepted, **synthesis)
        elif op == "route":
            w.write(C, "routing_observation", {"model": draw(st.sampled_from(["m1", "m2"])),
                                               "latency_ms": draw(st.integers(0, 500)), "ok": draw(st.booleans())})
        elif op == "code":
            w.write(C, "code_snapshot", {"path": draw(st.sampled_from(["a.py", "b.py"])),
                                         "content": draw(st.sampled_from(["1", "2"]))})
    every = {r.cid: r for w in ws for r in w.iter_records()}
    return list(every.values())


def views(state: ConvState) -> list[Any]:
    """Everything the views read off a state."""
    routes = routing_stats(state.entries[c].payload for _, c in state.replay)
    return [transcript_bytes(transcript(state, branch=b)) for b in (None, *BRANCHES)] + [routes]


@PROPERTY
@given(conversations())
def test_snapshot_restore_round_trip_is_byte_identical(records: list[Record]) -> None:
    state = fold(records)
    data = snapshot(state)
    back = restore(data)
    assert snapshot(back) == data
    assert back == state  # every index, not only the entries the bytes hold
    assert views(back) == views(state)
    assert back.count == len(records)


@PROPERTY
@given(conversations(), st.data())
def test_fold_of_any_permutation_with_duplicates_is_identical(records: list[Record], data: st.DataObject) -> None:
    want_state = fold(records)
    want = snapshot(want_state)
    dups = data.draw(st.lists(st.sampled_from(records), max_size=4)) if records else []
    order = data.draw(st.permutations([*records, *dups]))
    state = fold(order)
    assert snapshot(state) == want
    assert state == want_state and views(state) == views(want_state)
    # a restored prefix extended by the rest (what a compacted replica does) is the same state
    cut = data.draw(st.integers(0, len(order)))
    resumed = restore(snapshot(fold(order[:cut])))
    for r in order[cut:]:
        apply(resumed, r)
    assert snapshot(resumed) == want and resumed == want_state


# ---------------------------------------------------------------- restore refuses


def _sample() -> bytes:
    """A snapshot with turns, a retraction, a branch and a routing observation."""
    (w,) = [Replica.in_memory(KEYS[0], clock=ManualClock(T0))]
    first = w.say(C, "user", "q")
    w.say(C, "assistant", "a")
    w.write(C, "retraction", {"target": first.cid})
    w.branch(C, "x", first.cid)
    w.say(C, "user", "on x", branch="x")
    w.write(C, "routing_observation", {"model": "m", "latency_ms": 1.5, "ok": True})
    return snapshot(w.state(C))


SAMPLE = _sample()


def refused(data: bytes) -> SnapshotError:
    with pytest.raises(SnapshotError) as info:
        restore(data)
    assert info.value.rule == "snapshot"
    return info.value


def test_the_sample_restores() -> None:
    assert snapshot(restore(SAMPLE)) == SAMPLE and restore(SAMPLE).count == 6
    assert snapshot(ConvState()) == codec.encode({"v": SNAPSHOT_VERSION, "entries": []})


@pytest.mark.parametrize(
    "data",
    [
        b"", b"\x00", b"\xff", b"not a snapshot", b"\xa2", b"\x1b" + b"\xff" * 8,
        codec.encode([]), codec.encode({}), codec.encode("snapshot"), codec.encode({"v": 1}),
        codec.encode({"entries": []}), codec.encode({"v": 1, "entries": "x"}),
        codec.encode({"v": 1, "entries": None}), codec.encode({"v": 1, "entries": [1]}),
        codec.encode({"v": 1, "entries": [{}]}), codec.encode({"v": 1, "entries": [{"cid": 1}]}),
        codec.encode({"v": 1, "entries": [], "extra": 0}),
    ],
)
def test_garbage_is_refused(data: bytes) -> None:
    refused(data)


@pytest.mark.parametrize("version", [0, 2, -1, "1", 1.0, True, None])
def test_an_unknown_version_is_refused(version: object) -> None:
    refused(codec.encode({"v": version, "entries": []}))
    refused(codec.encode({**codec.decode(SAMPLE), "v": version}))


def test_every_truncation_is_refused() -> None:
    for n in range(len(SAMPLE)):
        refused(SAMPLE[:n])
    refused(SAMPLE + b"\x00")


def _variant(change: Any) -> bytes:
    value = codec.decode(SAMPLE)
    change(value)
    return codec.encode(value)


@pytest.mark.parametrize(
    "change",
    [
        lambda v: v["entries"].reverse(),
        lambda v: v["entries"].insert(0, v["entries"].pop()),
        lambda v: v["entries"].append(v["entries"][0]),  # a duplicate entry
        lambda v: v["entries"][0].update(extra=1),
        lambda v: v["entries"][0].update(branch=None),  # an absent branch is omitted, never null
        lambda v: v["entries"][0].update(hlc=[*v["entries"][0]["hlc"], 0]),
        lambda v: v["entries"][0].update(kind="gossip"),
        lambda v: v["entries"][0].pop("payload"),
    ],
    ids=["reversed", "rotated", "duplicate", "extra-field", "null-branch", "long-hlc", "unknown-kind",
         "no-payload"],
)
def test_a_non_canonical_variant_is_refused(change: Any) -> None:
    refused(_variant(change))


def test_non_canonical_cbor_is_refused() -> None:
    canonical = codec.encode({"v": 1, "entries": []})
    assert canonical == b"\xa2av\x01gentries\x80"
    refused(b"\xa2gentries\x80av\x01")  # keys out of order
    refused(b"\xa2av\x18\x01gentries\x80")  # an over-long integer
    refused(b"\xa2av\x01gentries\x9f\xff")  # an indefinite-length list


@PROPERTY
@given(st.binary(max_size=64))
def test_random_bytes_are_refused_or_round_trip(data: bytes) -> None:
    try:
        state = restore(data)
    except SnapshotError:
        return
    assert snapshot(state) == data


@PROPERTY
@given(st.integers(0, len(SAMPLE) - 1), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"]))
def test_a_damaged_snapshot_is_refused_or_round_trips(at: int, byte: int, how: str) -> None:
    if how == "set":
        data = SAMPLE[:at] + bytes([byte]) + SAMPLE[at + 1 :]
    elif how == "insert":
        data = SAMPLE[:at] + bytes([byte]) + SAMPLE[at:]
    else:
        data = SAMPLE[:at] + SAMPLE[at + 1 :]
    try:
        state = restore(data)
    except SnapshotError:
        return
    assert snapshot(state) == data  # e.g. one changed letter of a text: still a canonical snapshot


def _entry(cid: Any = None, *, kind: str = "checkpoint", actor: Any = b"a" * 32, hlc: Any = (T0, 0)) -> dict[str, Any]:
    return {"cid": CID.of_record(b"e") if cid is None else cid, "kind": kind, "actor": actor, "hlc": list(hlc),
            "payload": {}}


def test_a_huge_integer_cid_is_refused() -> None:
    refused(codec.encode({"v": 1, "entries": [_entry(2**63)]}))


def test_entries_with_incomparable_clocks_are_refused() -> None:
    a, b = _entry(CID.of_record(b"a"), hlc=("late", 0)), _entry(CID.of_record(b"b"), hlc=(T0, 0))
    refused(codec.encode({"v": 1, "entries": [a, b]}))


@pytest.mark.parametrize(
    "entry",
    [_entry(1), _entry(actor="not bytes"), _entry(hlc=(-1, 0))],
    ids=["int-cid", "text-actor", "negative-wall"],
)
def test_entries_with_wrong_field_types_are_refused(entry: dict[str, Any]) -> None:
    refused(codec.encode({"v": 1, "entries": [entry]}))
