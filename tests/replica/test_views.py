"""The replica's conversation views: the promises, as property tests over real replicas.

Any delivery order (with duplicates) gives identical transcript bytes on every replica;
the incremental fold equals a full fold after every step; and retention over a compacted
replica equals retention over a fresh full fold of the same records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph import ManualClock, ProjectionError, Record, Replica, SigningKey
from convgraph.projections import state as state_
from convgraph.projections.transcript import transcript, transcript_bytes, transcript_cid
from convgraph.projections.turn import ToolCall

CONV = "default"
T0 = 1_700_000_000_000
KEYS = [SigningKey(bytes([i + 1]) * 32) for i in range(4)]
PROPERTY = settings(max_examples=300 if IN_CI else 60)


@dataclass
class World:
    """Writers with their own clocks; every record any of them made, in creation order."""

    writers: list[Replica]
    clocks: list[ManualClock]
    made: list[Record]

    @classmethod
    def new(cls, n: int) -> World:
        clocks = [ManualClock(T0) for _ in range(n)]
        return cls([Replica.in_memory(KEYS[i], clock=clocks[i]) for i in range(n)], clocks, [])

    def run(self, op: tuple[Any, ...]) -> None:
        what, w = op[0], self.writers[op[1]]
        if what == "tick":
            self.clocks[op[1]].advance(op[2])
        elif what == "sync":
            w.ingest([r.data for r in self.writers[op[2]].iter_records()])
        else:
            self.made.append(_say(w, *op[2:]))


def _say(w: Replica, role: str, text: str, call: bool) -> Record:
    if role == "user":  # identical content at an identical payload timestamp, on purpose
        return w.write(CONV, "user_message", {"role": "user", "content": text, "timestamp": 1000})
    if role == "assistant":
        calls = [ToolCall(f"call_{text}", "lookup", {"q": text})] if call else []
        return w.say(CONV, "assistant", text, tool_calls=calls)
    if role == "tool":
        return w.say(CONV, "tool", f"result {text}", tool_use_id=f"call_{text}")
    target = next((r for r in reversed(w.records(CONV)) if r.actor == w.actor and r.kind.endswith("message")),
                  None)
    if target is None:
        return w.write(CONV, "routing_observation", {"model": text, "latency_ms": len(text), "ok": call})
    kind = "retraction" if role == "retract" else "supersession"
    payload: dict[str, Any] = {"target": target.cid}
    if kind == "supersession":
        payload["content"] = f"{text} (edited)"
    return w.write(CONV, kind, payload)


def ops(writers: int) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    who = st.integers(0, writers - 1)
    say = st.tuples(
        st.just("say"), who, st.sampled_from(["user", "assistant", "tool", "retract", "supersede"]),
        st.sampled_from(["yes", "no", "a"]), st.booleans(),
    )
    return st.lists(
        st.one_of(say, say, st.tuples(st.just("tick"), who, st.integers(0, 3)), st.tuples(st.just("sync"), who, who)),
        min_size=1, max_size=14,
    )


def _deliver(records: list[Record], order: list[int], batch: int) -> Replica:
    """A fresh replica fed `records` in `order` (indexes may repeat), `batch` at a time."""
    r = Replica.in_memory(SigningKey(b"\x09" * 32), clock=ManualClock(T0 + 10_000_000))
    picked = [records[i].data for i in order] + [x.data for x in records]  # then everything, again
    for i in range(0, len(picked), batch):
        r.ingest(picked[i : i + batch])
    assert r.store.count() == len(records)
    return r


@PROPERTY
@given(script=ops(3), data=st.data())
def test_any_delivery_order_gives_identical_transcript_bytes(script: list[tuple[Any, ...]], data: st.DataObject) -> None:
    world = World.new(3)
    for op in script:
        world.run(op)
    if not world.made:
        return
    for w in world.writers:  # everyone ends up with everything
        w.ingest([r.data for r in world.made])
    n = len(world.made)
    replicas = [*world.writers]
    for _ in range(2):
        order = data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n).map(list), label="order")
        replicas.append(_deliver(world.made, order, data.draw(st.integers(1, 5), label="batch")))
    views = [(transcript_bytes(r.transcript(CONV)), transcript_cid(r.transcript(CONV))) for r in replicas]
    assert all(v == views[0] for v in views)
    snaps = {state_.snapshot(r.state(CONV)) for r in replicas}
    assert len(snaps) == 1
    # two distinct authorings never collapse: every turn record is its own turn or hidden by its author
    ops_seen = [t.op for t in replicas[0].transcript(CONV)]
    assert len(ops_seen) == len(set(ops_seen))


@PROPERTY
@given(script=ops(2), data=st.data())
def test_incremental_fold_equals_full_fold_after_every_step(script: list[tuple[Any, ...]], data: st.DataObject) -> None:
    world = World.new(2)
    for op in script:
        world.run(op)
    observer = Replica.in_memory(SigningKey(b"\x09" * 32), clock=ManualClock(T0 + 10_000_000))
    order = data.draw(st.permutations(range(len(world.made))), label="order") if world.made else []
    for i in order:
        observer.ingest([world.made[i].data])
        if data.draw(st.booleans(), label="write too"):
            observer.say(CONV, "user", "between")
        incremental = observer.state(CONV)
        full = state_.fold(observer.records(CONV))
        assert state_.snapshot(incremental) == state_.snapshot(full)
        assert transcript_bytes(transcript(incremental)) == transcript_bytes(transcript(full))


@PROPERTY
@given(script=ops(3), data=st.data())
def test_retention_over_a_compacted_replica_equals_a_fresh_full_fold(
    script: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    world = World.new(3)
    for op in script:
        world.run(op)
    # writer 2's records are withheld until after compaction: late, concurrent, often older
    late = [r for r in world.made if r.actor == KEYS[2].public]
    early = [r for r in world.made if r.actor != KEYS[2].public]
    cut = data.draw(st.integers(0, len(early)), label="cut")
    compacted = Replica.in_memory(SigningKey(b"\x07" * 32), clock=ManualClock(T0 + 10_000_000))
    compacted.ingest([r.data for r in early[:cut]])
    placed = [r for r in early[:cut] if compacted.store.has(r.cid)]  # the rest wait for withheld parents
    checkpoint = compacted.checkpoint(CONV, compact=True)
    compacted.ingest([r.data for r in early[cut:] + late])
    compacted.say(CONV, "user", "after the checkpoint")
    full = Replica.in_memory(SigningKey(b"\x08" * 32), clock=ManualClock(T0 + 10_000_000))
    full.ingest([r.data for r in world.made] + [x.data for x in compacted.iter_records()])
    reopened = Replica(compacted.store, compacted.key, clock=ManualClock(T0 + 10_000_000))
    assert checkpoint.payload["count"] == len(placed)
    assert all(compacted.store.get(r.cid) is None for r in placed)  # the raw records are gone
    assert full.store.count(CONV) == compacted.store.count(CONV)
    for n in [0, 1, 3, data.draw(st.integers(0, 40), label="n"), None]:
        want = full.transcript(CONV, last=n)
        for r in (compacted, reopened):
            got = r.transcript(CONV, last=n)
            assert transcript_bytes(got) == transcript_bytes(want)
            assert transcript_cid(got) == transcript_cid(want)
    assert state_.snapshot(reopened.state(CONV)) == state_.snapshot(state_.fold(_all(full)))
    assert compacted.routing(CONV) == full.routing(CONV)


def _all(r: Replica) -> list[Record]:
    return r.records(CONV)


def test_compaction_on_sqlite_survives_reopen_and_verifies(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    with Replica.open(tmp_path / "r", clock=clock) as r:
        first = r.say(CONV, "user", "one")
        r.say(CONV, "assistant", "two")
        cp = r.checkpoint(CONV, compact=True)
        r.say(CONV, "user", "three")
        before = transcript_bytes(r.transcript(CONV))
    with Replica.open(tmp_path / "r", clock=clock) as r:
        assert transcript_bytes(r.transcript(CONV)) == before
        assert [t.text for t in r.transcript(CONV)] == ["one", "two", "three"]
        assert r.verify().ok
        assert cp.payload["count"] == 2 and r.store.snapshot(CONV) is not None
        assert r.store.get(first.cid) is None and r.store.metas([first.cid])


def test_a_view_read_inside_a_transaction_that_rolls_back_is_rebuilt(tmp_path: Path) -> None:
    for r in (Replica.in_memory(clock=ManualClock(T0)), Replica.open(tmp_path / "r", clock=ManualClock(T0))):
        r.say(CONV, "user", "one")
        try:
            with r.store.transaction():
                r.say(CONV, "user", "ghost")
                assert [t.text for t in r.transcript(CONV)] == ["one", "ghost"]
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        r.say(CONV, "user", "two")
        assert [t.text for t in r.transcript(CONV)] == ["one", "two"]
        assert state_.snapshot(r.state(CONV)) == state_.snapshot(state_.fold(r.records(CONV)))
        r.close()


def test_verify_checks_the_kept_snapshot_against_its_checkpoint(tmp_path: Path) -> None:
    import sqlite3

    with Replica.open(tmp_path / "r", clock=ManualClock(T0)) as r:
        r.say(CONV, "user", "one")
        r.checkpoint(CONV, compact=True)
        assert r.verify().ok
    db = sqlite3.connect(tmp_path / "r" / "replica.sqlite")
    data = db.execute("SELECT data FROM snapshots").fetchone()[0]
    db.execute("UPDATE snapshots SET data = ?", (data.replace(b"one", b"0ne"),))
    db.commit()
    db.close()
    with Replica.open(tmp_path / "r", clock=ManualClock(T0)) as r:
        report = r.verify()
        assert not report.ok and [e.rule for _, e in report.failures] == ["snapshot"]


def test_record_response_then_resume_gives_the_provider_blocks_back() -> None:
    import anthropic.types
    import openai.types.chat

    r = Replica.in_memory(clock=ManualClock(T0))
    r.say(CONV, "user", "weather in Oslo?")
    message = anthropic.types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [
            {"type": "thinking", "thinking": "call the tool", "signature": "U2lnbmVkQnlBbnRocm9waWM="},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo", "unit": None}},
        ],
    })
    (rec,) = r.record_response(CONV, message)
    assert rec.payload["provider"] == "anthropic" and rec.payload["conversation_id"] == CONV
    r.say(CONV, "tool", "rain", tool_use_id="toolu_1")
    wire = r.resume(CONV, "anthropic")
    thinking, text = message.model_dump(mode="json", exclude_none=True)["content"][:2]
    call = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo", "unit": None}}
    assert wire[1] == {"role": "assistant", "content": [thinking, text, call]}
    assert all(b["type"] != "thinking" for m in r.resume(CONV, "openai") for b in (m.get("content") or [])
               if isinstance(b, dict))
    chat = openai.types.chat.ChatCompletion.model_validate({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "f", "arguments": '{"a": 1 }'}}]}}],
    })
    r.say(CONV, "user", "and again")
    r.record_response(CONV, chat)
    r.say(CONV, "tool", "ok", tool_use_id="call_9")
    wire = r.resume(CONV, "openai")
    assert wire[-2]["tool_calls"][0]["function"]["arguments"] == '{"a": 1 }'  # the provider's own bytes
    with pytest.raises(ProjectionError):
        r.record_response(CONV, {"role": "assistant"})


def test_say_refuses_an_unknown_role_and_a_tool_turn_without_its_call() -> None:
    r = Replica.in_memory(clock=ManualClock(T0))
    with pytest.raises(ProjectionError):
        r.say(CONV, "robot", "beep")
    with pytest.raises(ProjectionError):
        r.say(CONV, "tool", "42")
    assert r.store.count() == 0


def test_a_merge_names_exactly_the_heads_it_has_as_parents() -> None:
    r = Replica.in_memory(clock=ManualClock(T0))
    q = r.say(CONV, "user", "q")
    r.branch(CONV, "alt", q.cid)
    r.say(CONV, "assistant", "alt", branch="alt")
    other = Replica.in_memory(clock=ManualClock(T0))
    other.ingest([x.data for x in r.iter_records()])
    concurrent = other.say(CONV, "assistant", "concurrent")
    r.ingest([concurrent.data])
    merge = r.merge(CONV, "alt", summary="took alt")
    assert merge.payload["heads"] == [concurrent.cid] and concurrent.cid in merge.parents
    assert r.heads(CONV) == [merge.cid]
