"""Adopting a checkpoint: a fresh replica rebuilds a compacted conversation from its
checkpoint, snapshot and cover, and refuses every combination that does not vouch for itself."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from convgraph import Draft, ManualClock, Record, Replica, SigningKey
from convgraph.adoption import Compaction, compaction_of, encode_cover, role
from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import RecordMeta, sign_record
from convgraph.errors import (
    ConvgraphError,
    CoverConflictError,
    CoverError,
    SignatureError,
    SnapshotError,
)
from convgraph.projections import state as state_
from convgraph.projections.transcript import transcript_bytes

T0 = 1_700_000_000_000


def compacted(n: int = 6) -> tuple[Replica, Replica, Record]:
    """`source` compacted `n` records behind a checkpoint; `other` wrote a late reply naming
    one of them, which `source` holds too. Returns (source, other, late)."""
    clock = ManualClock(T0)
    source, other = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    source.write_many("c", [Draft("user_message", {"content": f"turn {i}"}) for i in range(n)])
    other.ingest([d for _, d in source.store.records("c")])
    late = other.say("c", "assistant", "written before the checkpoint, sent after")
    source.checkpoint("c", compact=True)
    source.ingest([late.data])
    return source, other, late


def bundle(source: Replica) -> Compaction:
    found = compaction_of(source.store, "c")
    assert found is not None
    return found


def adopt(r: Replica, c: Compaction, **changed: bytes) -> Any:
    args = {"checkpoint": c.record, "snapshot": c.snapshot, "cover": c.cover, **changed}
    return r.adopt(args["checkpoint"], args["snapshot"], args["cover"])


def test_a_fresh_replica_rebuilds_the_conversation_and_places_what_waited() -> None:
    source, _, late = compacted()
    after = source.say("c", "user", "after the checkpoint")
    c = bundle(source)
    fresh = Replica.in_memory(clock=ManualClock(T0))
    assert fresh.ingest([after.data, late.data]).quarantined == [after.cid, late.cid]  # both wait
    report = adopt(fresh, c)
    assert report.adopted == [c.checkpoint] and report.accepted[0] == c.checkpoint
    assert sorted(report.accepted[1:]) == sorted(report.released) == sorted([after.cid, late.cid])
    assert fresh.store.pending_stats() == (0, 0)
    assert transcript_bytes(fresh.transcript("c")) == transcript_bytes(source.transcript("c"))
    assert state_.snapshot(fresh.state("c")) == state_.snapshot(source.state("c"))
    assert fresh.heads("c") == source.heads("c") and fresh.store.count("c") == source.store.count("c")
    verified = fresh.verify()
    assert verified.ok and verified.headers_only == c.count == 6
    assert adopt(fresh, c).duplicates == [c.checkpoint]  # once is enough


def test_an_adopted_conversation_goes_on_and_hands_itself_on() -> None:
    source, _, _ = compacted()
    middle = Replica.in_memory(clock=ManualClock(T0 + 10))
    adopt(middle, bundle(source))
    middle.say("c", "user", "written on top of the snapshot")
    middle.checkpoint("c", compact=True)  # its snapshot covers the adopted one's records
    last = Replica.in_memory(clock=ManualClock(T0 + 20))
    c = bundle(middle)
    assert c.count == middle.store.count("c") - 1  # all but the new checkpoint
    adopt(last, c)
    assert transcript_bytes(last.transcript("c")) == transcript_bytes(middle.transcript("c"))
    assert last.verify().ok


def test_a_replica_that_holds_part_of_the_history_keeps_its_bytes() -> None:
    source, other, _ = compacted()
    c = bundle(source)
    report = adopt(other, c)  # `other` holds every covered record whole, and the late one
    assert report.adopted == [c.checkpoint] and other.store.count("c") == source.store.count("c")
    assert len(other.store.records("c")) == source.store.count("c")  # nothing lost its bytes
    assert transcript_bytes(other.transcript("c")) == transcript_bytes(source.transcript("c"))
    assert other.verify().ok


def test_role_tells_snapshots_and_covers_from_records() -> None:
    source, _, late = compacted()
    c = bundle(source)
    assert (role(c.snapshot), role(c.cover), role(c.record), role(late.data)) == (
        "snapshot", "cover", "record", "record")
    assert role(codec.encode({"v": 2, "entries": []})) == "record"  # an unknown version is no snapshot


def test_a_waiting_record_that_equivocates_with_an_adopted_header_is_kept_with_the_evidence() -> None:
    source, _, _ = compacted()
    c = bundle(source)
    by_seq = {h.seq: h for h in _headers(c)}
    parent = by_seq[2]
    twin = sign_record(source.key, conv="c", seq=3, hlc=Hlc(parent.hlc.wall_ms, parent.hlc.counter + 1),
                       parents=[parent.cid], kind="user_message", payload={"content": "turn 2, said otherwise"})
    assert twin.cid != by_seq[3].cid
    fresh = Replica.in_memory(clock=ManualClock(T0))
    assert fresh.ingest([twin.data]).quarantined == [twin.cid]  # its parent is only in the cover
    report = adopt(fresh, c)
    assert twin.cid in report.accepted and report.released == [twin.cid]
    assert report.equivocations == [(by_seq[3].cid, twin.cid)]  # the header is the rival
    assert fresh.store.equivocations("c") == [tuple(sorted([by_seq[3].cid, twin.cid]))]


def test_a_checkpoint_that_arrived_before_its_cover_is_released_by_the_adoption() -> None:
    """Waiting for its parents or for our clock, the checkpoint leaves the quarantine when
    adopted (and is reported released), whichever way the plan finds it there."""
    source, _, _ = compacted()
    c = bundle(source)
    waiting = Replica.in_memory(clock=ManualClock(T0))
    assert waiting.ingest([c.record]).quarantined == [c.checkpoint]  # its parents are only in the cover
    clock = ManualClock(T0 - 3_600_000)
    held = Replica.in_memory(clock=clock)
    assert held.ingest([c.record]).held == [c.checkpoint]
    clock.advance(3_600_000)
    for r in (waiting, held):
        report = adopt(r, c)
        assert report.adopted == report.released == [c.checkpoint]
        assert r.store.pending_stats() == (0, 0) and r.store.has(c.checkpoint)


# ---------------------------------------------------------------- what is refused


def _headers(c: Compaction) -> list[RecordMeta]:
    return [RecordMeta(h["cid"], "c", h["actor"], h["seq"], Hlc(*h["hlc"]), tuple(h["parents"]))
            for h in codec.decode(c.cover)["headers"]]


def _cover(c: Compaction, edit: Any) -> dict[str, bytes]:
    return {"cover": encode_cover(c.checkpoint, edit(_headers(c)))}


def _resigned(source: Replica, c: Compaction, **payload: Any) -> dict[str, bytes]:
    """The checkpoint with its payload changed, validly signed again, and a cover naming it."""
    ck = source.get(c.checkpoint)
    data = sign_record(source.key, conv=ck.conv, seq=ck.seq, hlc=ck.hlc, parents=ck.parents,
                       kind=ck.kind, payload={**ck.payload, **payload}).data
    return {"checkpoint": data, "cover": encode_cover(CID.of_record(data), _headers(c))}


def _forged(data: bytes) -> bytes:
    value = codec.decode(data)
    value["sig"] = bytes(64)
    return codec.encode(value)


def _not_a_checkpoint(source: Replica, c: Compaction) -> dict[str, bytes]:
    other = source.records("c")[-1]
    return {"checkpoint": other.data, "cover": encode_cover(other.cid, _headers(c))}


REFUSALS: list[tuple[str, Any, type[ConvgraphError], str]] = [
    ("forged checkpoint", lambda s, c: {"checkpoint": _forged(c.record)}, SignatureError, "signature"),
    ("cover of another checkpoint", lambda s, c: {"checkpoint": s.records("c")[-1].data}, CoverError, "belongs to"),
    ("cover that is no cover", lambda s, c: {"cover": b"\xa0"}, CoverError, "not a cover"),
    ("not a checkpoint", _not_a_checkpoint, CoverError, "is no checkpoint"),
    ("tampered snapshot", lambda s, c: {"snapshot": c.snapshot.replace(b"turn 1", b"turn X")},
     SnapshotError, "hashes to"),
    ("count that lies", lambda s, c: _resigned(s, c, count=99), SnapshotError, "counts 99"),
    ("cover missing a header", lambda s, c: _cover(c, lambda m: m[:-1]), CoverError, "the cover 5"),
    ("cover with a wrong hlc", lambda s, c: _cover(c, lambda m: [*m[:-1], m[-1]._replace(hlc=Hlc(T0 + 1, 9))]),
     CoverError, "disagree"),
    ("cover with a wrong seq", lambda s, c: _cover(c, lambda m: [m[0], m[1]._replace(seq=5), *m[2:]]),
     CoverError, "causal rule"),
    ("cover naming an outside parent", lambda s, c: _cover(c, lambda m: [m[0]._replace(parents=(c.checkpoint,)),
                                                                         *m[1:]]),
     CoverError, "outside the cover"),
    ("heads that lie", lambda s, c: _resigned(s, c, heads=[]), CoverError, "heads are not"),
]


@pytest.mark.parametrize(("name", "change", "error", "needle"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_what_does_not_vouch_for_itself_is_refused_and_changes_nothing(
    name: str, change: Any, error: type[ConvgraphError], needle: str
) -> None:
    source, _, _ = compacted()
    c = bundle(source)
    fresh = Replica.in_memory(clock=ManualClock(T0))
    with pytest.raises(error) as info:
        adopt(fresh, c, **change(source, c))
    assert needle in str(info.value), str(info.value)
    assert fresh.store.count() == 0 and fresh.store.snapshot("c") is None
    assert adopt(fresh, c).adopted == [c.checkpoint]  # the genuine three still adopt


def test_a_cover_that_contradicts_what_the_replica_holds_is_a_conflict() -> None:
    source, other, _ = compacted()
    c = bundle(source)
    m = _headers(c)
    # consistent in itself (an own parent with a smaller seq is allowed), but not what `other` holds
    lie = encode_cover(c.checkpoint, [*m[:2], m[2]._replace(parents=tuple(sorted({m[0].cid, m[1].cid}))), *m[3:]])
    assert Replica.in_memory(clock=ManualClock(T0)).adopt(c.record, c.snapshot, lie).adopted  # a stranger can't tell
    with pytest.raises(CoverConflictError, match="disagrees with the record held here"):
        other.adopt(c.record, c.snapshot, lie)
    mine = Replica.in_memory(SigningKey(bytes(range(7, 39))), clock=ManualClock(T0))
    mine.write_many("c", [Draft("user_message", {"content": "my own history"})])
    mine.checkpoint("c", compact=True)
    with pytest.raises(CoverConflictError, match="does not cover"):  # one snapshot per conversation
        adopt(mine, c)


def test_a_checkpoint_ahead_of_our_clock_waits() -> None:
    source, _, _ = compacted()
    c = bundle(source)
    with pytest.raises(CoverError, match="ahead of our clock"):
        adopt(Replica.in_memory(clock=ManualClock(T0 - 3_600_000)), c)


def test_verify_finds_a_held_header_that_the_snapshot_does_not_vouch_for(tmp_path: Path) -> None:
    source, _, _ = compacted()
    c = bundle(source)
    with Replica.open(tmp_path / "r", clock=ManualClock(T0)) as r:
        adopt(r, c)
        assert r.verify().ok
    db = sqlite3.connect(tmp_path / "r" / "replica.sqlite")
    db.execute("UPDATE records SET wall = wall + 1 WHERE length(data) = 0 AND seq = 1")
    db.commit()
    db.close()
    with Replica.open(tmp_path / "r", clock=ManualClock(T0)) as r:
        report = r.verify()
        assert [e.rule for _, e in report.failures] == ["cover"] and report.headers_only == 6


def test_compaction_of_a_conversation_never_compacted_is_none() -> None:
    source, _, _ = compacted()
    source.say("d", "user", "whole")
    assert compaction_of(source.store, "d") is None
