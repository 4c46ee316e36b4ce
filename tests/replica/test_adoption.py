"""Adopting a checkpoint: a fresh replica rebuilds a compacted conversation from its
checkpoint, snapshot and cover, and refuses every combination that does not vouch for itself."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from convgraph import Config, Draft, Limits, ManualClock, Record, Replica, SigningKey
from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import MAX_COUNTER, MAX_WALL_MS, Hlc
from convgraph.core.record import MAX_SEQ, RecordMeta, decode_record, sign_record
from convgraph.errors import (
    ConvgraphError,
    CoverConflictError,
    CoverError,
    SignatureError,
    SizeLimitError,
    SnapshotError,
    StoreError,
)
from convgraph.projections import state as state_
from convgraph.projections.transcript import transcript_bytes
from convgraph.replica.adoption import (
    COVER_VERSION,
    Compaction,
    compaction_of,
    cover_checkpoint,
    decode_cover,
    encode_cover,
    role,
)

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


def _naming_itself(c: Compaction) -> dict[str, bytes]:
    """The last header names every covered record as a parent, itself included: inside the
    cover, but no record can come after itself."""
    m = _headers(c)
    return _cover(c, lambda _: [*m[:-1], m[-1]._replace(parents=tuple(sorted(h.cid for h in m)))])


# (name, change, error, what the message starts with, the header at fault by place in _headers)
REFUSALS: list[tuple[str, Any, type[ConvgraphError], str, int | None]] = [
    ("forged checkpoint", lambda s, c: {"checkpoint": _forged(c.record)}, SignatureError,
     "signature does not verify", None),
    ("cover of another checkpoint", lambda s, c: {"checkpoint": s.records("c")[-1].data}, CoverError,
     "the cover belongs to checkpoint ", None),
    ("cover that is no cover", lambda s, c: {"cover": b"\xa0"}, CoverError, "not a cover (or an unknown version)", None),
    ("not a checkpoint", _not_a_checkpoint, CoverError, "a record of kind agent_message is no checkpoint", None),
    ("tampered snapshot", lambda s, c: {"snapshot": c.snapshot.replace(b"turn 1", b"turn X")},
     SnapshotError, "the snapshot hashes to ", None),
    ("count that lies", lambda s, c: _resigned(s, c, count=99), SnapshotError,
     "the checkpoint counts 99 records, its snapshot holds 6", None),
    ("cover missing a header", lambda s, c: _cover(c, lambda m: m[:-1]), CoverError,
     "the snapshot holds 6 records, the cover 5", None),
    ("cover with a wrong hlc", lambda s, c: _cover(c, lambda m: [*m[:-1], m[-1]._replace(hlc=Hlc(T0 + 1, 9))]),
     CoverError, "the cover and the snapshot disagree", 5),
    ("cover with a wrong seq", lambda s, c: _cover(c, lambda m: [m[0], m[1]._replace(seq=5), *m[2:]]),
     CoverError, "the cover breaks a causal rule (seq 5", 1),
    ("cover naming an outside parent", lambda s, c: _cover(c, lambda m: [m[0]._replace(parents=(c.checkpoint,)),
                                                                         *m[1:]]),
     CoverError, "a parent is outside the cover", 0),
    ("cover naming a record among its own parents", lambda s, c: _naming_itself(c), CoverError,
     "the cover breaks a causal rule (", 5),
    ("heads that lie", lambda s, c: _resigned(s, c, heads=[]), CoverError, "the cover's heads are not the checkpoint's",
     None),
]


@pytest.mark.parametrize(("name", "change", "error", "start", "at"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_what_does_not_vouch_for_itself_is_refused_and_changes_nothing(
    name: str, change: Any, error: type[ConvgraphError], start: str, at: int | None
) -> None:
    source, _, _ = compacted()
    c = bundle(source)
    fresh = Replica.in_memory(clock=ManualClock(T0))
    offered = {"checkpoint": c.record, **change(source, c)}
    with pytest.raises(error) as info:
        adopt(fresh, c, **offered)
    assert type(info.value) is error and info.value.message.startswith(start), info.value.message
    assert info.value.cid == str(CID.of_record(offered["checkpoint"]))  # the checkpoint offered is named
    if isinstance(info.value, CoverError):
        assert info.value.checkpoint == info.value.cid
        assert info.value.record == (None if at is None else str(_headers(c)[at].cid))
    assert fresh.store.count() == 0 and fresh.store.snapshot("c") is None
    assert adopt(fresh, c).adopted == [c.checkpoint]  # the genuine three still adopt


def test_a_cover_that_contradicts_what_the_replica_holds_is_a_conflict() -> None:
    source, other, _ = compacted()
    c = bundle(source)
    m = _headers(c)
    # consistent in itself (an own parent with a smaller seq is allowed), but not what `other` holds
    lie = encode_cover(c.checkpoint, [*m[:2], m[2]._replace(parents=tuple(sorted({m[0].cid, m[1].cid}))), *m[3:]])
    assert Replica.in_memory(clock=ManualClock(T0)).adopt(c.record, c.snapshot, lie).adopted  # a stranger can't tell
    with pytest.raises(CoverConflictError) as info:
        other.adopt(c.record, c.snapshot, lie)
    assert info.value.message == f"the cover disagrees with the record held here: covered record {m[2].cid}"
    assert (info.value.checkpoint, info.value.record) == (str(c.checkpoint), str(m[2].cid))
    mine = Replica.in_memory(SigningKey(bytes(range(7, 39))), clock=ManualClock(T0))
    [own] = mine.write_many("c", [Draft("user_message", {"content": "my own history"})])
    held = mine.checkpoint("c", compact=True)
    with pytest.raises(CoverConflictError) as info:  # one snapshot per conversation
        adopt(mine, c)
    assert info.value.message == (f"this replica's snapshot of 'c' (checkpoint {held.cid}) holds records the "
                                  f"checkpoint does not cover: covered record {own.cid}")
    assert (info.value.checkpoint, info.value.record) == (str(c.checkpoint), str(own.cid))


def test_a_checkpoint_over_exactly_the_records_of_the_snapshot_held_is_adopted() -> None:
    """A second signer's checkpoint of the same records replaces the snapshot: it covers
    every record the held one does, which is all one snapshot per conversation asks."""
    clock = ManualClock(T0)
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(SigningKey(bytes(range(7, 39))), clock=clock)
    a.write_many("c", [Draft("user_message", {"content": f"turn {i}"}) for i in range(3)])
    b.ingest([d for _, d in a.store.records("c")])
    a.checkpoint("c", compact=True)
    b.checkpoint("c", compact=True)
    first, second = bundle(a), bundle(b)
    assert _headers(first) == _headers(second)
    fresh = Replica.in_memory(clock=ManualClock(T0))
    adopt(fresh, first)
    assert adopt(fresh, second).adopted == [second.checkpoint]
    held = fresh.store.snapshot("c")
    assert held is not None and held[0] == second.checkpoint


def test_a_checkpoint_ahead_of_our_clock_waits() -> None:
    source, _, _ = compacted()
    c = bundle(source)
    with pytest.raises(CoverError) as info:
        adopt(Replica.in_memory(clock=ManualClock(T0 - 3_600_000)), c)
    assert info.value.message == "the checkpoint is ahead of our clock: adopt it later"
    assert info.value.checkpoint == str(c.checkpoint)


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


# ---------------------------------------------------------------- a cover, field by field


def _checkpoint_of(c: Compaction) -> Record:
    return decode_record(c.record)


def _raw_cover(c: Compaction, headers: Any, **fields: Any) -> bytes:
    return codec.encode({"v": COVER_VERSION, "checkpoint": c.checkpoint, "headers": headers, **fields})


def _one_header(c: Compaction, **changed: Any) -> bytes:
    """The cover with only its first header, `changed` (a lone header has no order to keep)."""
    return _raw_cover(c, [{**codec.decode(c.cover)["headers"][0], **changed}])


RAW = CID.of_raw(b"not a record")
WRONG_FIELDS: list[tuple[str, dict[str, Any]]] = [
    ("cid not a link", {"cid": "x"}), ("cid of raw bytes", {"cid": RAW}),
    ("actor not bytes", {"actor": "x"}), ("actor of 31 bytes", {"actor": bytes(31)}),
    ("seq not an int", {"seq": "1"}), ("seq 0", {"seq": 0}), ("seq past the maximum", {"seq": MAX_SEQ + 1}),
    ("hlc not a list", {"hlc": "x"}), ("hlc of one int", {"hlc": [T0]}), ("hlc with a text", {"hlc": [T0, "0"]}),
    ("wall below 0", {"hlc": [-1, 0]}), ("wall past the maximum", {"hlc": [MAX_WALL_MS + 1, 0]}),
    ("counter below 0", {"hlc": [T0, -1]}), ("counter past the maximum", {"hlc": [T0, MAX_COUNTER + 1]}),
    ("parents not a list", {"parents": "x"}), ("more parents than the limit", {"parents": [RAW, RAW, RAW]}),
    ("a parent not a link", {"parents": ["x"]}), ("a parent of raw bytes", {"parents": [RAW]}),
    ("parents out of order", {"parents": sorted([CID.of_record(b"a"), CID.of_record(b"b")], reverse=True)}),
    ("a parent twice", {"parents": [CID.of_record(b"a")] * 2}),
]


@pytest.mark.parametrize(("name", "changed"), WRONG_FIELDS, ids=[w[0] for w in WRONG_FIELDS])
def test_a_header_with_one_field_wrong_is_refused_naming_it(name: str, changed: dict[str, Any]) -> None:
    source, _, _ = compacted()
    c = bundle(source)
    first = _headers(c)[0]
    with pytest.raises(CoverError) as info:
        decode_cover(_one_header(c, **changed), _checkpoint_of(c), Limits(max_parents=2))
    cid = changed.get("cid", first.cid)
    at_fault = cid if type(cid) is CID else None  # a cid that is no link names no record
    assert info.value.message == "a header has a field of the wrong type" + (
        "" if at_fault is None else f": covered record {at_fault}")
    assert (info.value.checkpoint, info.value.record) == (str(c.checkpoint), None if at_fault is None else str(at_fault))


def test_a_header_at_every_bound_is_read() -> None:
    source, _, _ = compacted()
    c = bundle(source)
    parents = sorted([CID.of_record(b"a"), CID.of_record(b"b")])
    for hlc in ([0, 0], [MAX_WALL_MS, MAX_COUNTER]):
        [header] = decode_cover(_one_header(c, seq=MAX_SEQ, hlc=hlc, parents=parents), _checkpoint_of(c),
                                Limits(max_parents=2))
        assert (header.seq, header.hlc, header.parents) == (MAX_SEQ, Hlc(*hlc), tuple(parents))
    [header] = decode_cover(_one_header(c, seq=1), _checkpoint_of(c))
    assert header == _headers(c)[0]


@pytest.mark.parametrize("header", [["a list"], {"cid": "a dict short of four keys"}, "extra"])
def test_a_header_that_is_not_the_five_fields_is_refused(header: Any) -> None:
    source, _, _ = compacted()
    c = bundle(source)
    if header == "extra":
        header = {**codec.decode(c.cover)["headers"][0], "extra": 1}
    with pytest.raises(CoverError) as info:
        decode_cover(_raw_cover(c, [header]), _checkpoint_of(c))
    assert info.value.message == "a header must hold exactly cid, actor, seq, hlc, parents"
    assert (info.value.checkpoint, info.value.record) == (str(c.checkpoint), None)


def test_a_cover_that_is_not_one_is_refused_saying_what_it_is() -> None:
    source, _, _ = compacted()
    c = bundle(source)
    ck = _checkpoint_of(c)
    headers = codec.decode(c.cover)["headers"]
    cases = [
        (b"\xa1", "the cover is not canonical DAG-CBOR: "),
        (codec.encode([1]), "not a cover (or an unknown version)"),
        (codec.encode({"v": COVER_VERSION + 1, "checkpoint": c.checkpoint, "headers": headers}),
         "not a cover (or an unknown version)"),
        (_raw_cover(c, "x"), "the cover's headers must be a list"),
    ]
    for data, start in cases:
        with pytest.raises(CoverError) as info:
            decode_cover(data, ck)
        assert info.value.message.startswith(start) and (info.value.message == start) is (not start.endswith(" "))
        assert (info.value.checkpoint, info.value.record) == (str(c.checkpoint), None)
    with pytest.raises(CoverError) as info:
        decode_cover(codec.encode({"v": COVER_VERSION, "checkpoint": RAW, "headers": headers}), ck)
    assert info.value.message == f"the cover belongs to checkpoint {RAW!r}"
    assert info.value.checkpoint == str(c.checkpoint)


@pytest.mark.parametrize("twice", [False, True])
def test_headers_out_of_canonical_order_are_refused_naming_the_first_out_of_place(twice: bool) -> None:
    source, _, _ = compacted()
    c = bundle(source)
    headers = codec.decode(c.cover)["headers"]
    misplaced = [headers[0], headers[1], headers[1], *headers[2:]] if twice else [headers[1], headers[0], *headers[2:]]
    with pytest.raises(CoverError) as info:
        decode_cover(_raw_cover(c, misplaced), _checkpoint_of(c))
    at_fault = headers[1 if twice else 0]["cid"]
    assert info.value.message == f"headers out of canonical order: covered record {at_fault}"
    assert (info.value.checkpoint, info.value.record) == (str(c.checkpoint), str(at_fault))


def test_cover_checkpoint_names_the_checkpoint_of_a_well_formed_cover_only() -> None:
    source, _, _ = compacted()
    c = bundle(source)
    assert cover_checkpoint(c.cover) == c.checkpoint
    for data in (b"\xa1", codec.encode([c.checkpoint]), codec.encode({"headers": []}),
                 codec.encode({"checkpoint": str(c.checkpoint)}), codec.encode({"checkpoint": RAW})):
        assert cover_checkpoint(data) is None, data


# ---------------------------------------------------------------- the checkpoint against the store


def _checkpoint_on(source: Replica, c: Compaction, *, parents: list[CID], hlc: Hlc) -> dict[str, bytes]:
    """The checkpoint signed again with other parents and stamp, and its cover."""
    ck = source.get(c.checkpoint)
    data = sign_record(source.key, conv=ck.conv, seq=ck.seq, hlc=hlc, parents=parents, kind=ck.kind,
                       payload=ck.payload).data
    return {"checkpoint": data, "cover": encode_cover(CID.of_record(data), _headers(c))}


def test_a_checkpoint_parent_outside_the_cover_must_be_held() -> None:
    source, other, late = compacted()
    c = bundle(source)
    ck = source.get(c.checkpoint)
    changed = _checkpoint_on(source, c, parents=sorted([*ck.parents, late.cid]),
                             hlc=Hlc(max(ck.hlc, late.hlc).wall_ms, max(ck.hlc, late.hlc).counter + 1))
    offered = CID.of_record(changed["checkpoint"])
    assert adopt(other, c, **changed).adopted == [offered]  # `other` holds the late reply
    fresh = Replica.in_memory(clock=ManualClock(T0))
    with pytest.raises(CoverError) as info:
        adopt(fresh, c, **changed)
    assert info.value.message == f"parent {late.cid} is neither covered nor held"
    assert (info.value.checkpoint, info.value.record) == (str(offered), None)


def test_a_checkpoint_stamped_before_its_parent_is_refused() -> None:
    source, _, _ = compacted()
    c = bundle(source)
    ck = source.get(c.checkpoint)
    changed = _checkpoint_on(source, c, parents=list(ck.parents), hlc=Hlc(T0 - 1, 0))
    with pytest.raises(CoverError) as info:
        adopt(Replica.in_memory(clock=ManualClock(T0)), c, **changed)
    assert info.value.message.startswith("the checkpoint breaks a causal rule (hlc")
    assert info.value.checkpoint == str(CID.of_record(changed["checkpoint"]))


def test_a_replica_reads_the_checkpoint_and_its_cover_under_its_own_limits() -> None:
    clock = ManualClock(T0)
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(SigningKey(bytes(range(7, 39))), clock=clock)
    a1 = a.say("c", "user", "one")
    b.ingest([a1.data])
    b.say("c", "assistant", "two")
    a.say("c", "user", "three, concurrent")
    a.ingest([d for _, d in b.store.records("c")])
    merge = a.say("c", "user", "four, on both")
    assert len(merge.parents) == 2
    a.checkpoint("c", compact=True)
    c = bundle(a)

    def strict(**limits: int) -> Replica:
        return Replica.in_memory(clock=ManualClock(T0), config=Config(limits=Limits(**limits)))

    with pytest.raises(CoverError) as info:
        adopt(strict(max_parents=1), c)  # the checkpoint has one parent; the merge in its cover two
    assert info.value.record == str(merge.cid)
    assert adopt(strict(max_parents=2), c).adopted == [c.checkpoint]
    with pytest.raises(SizeLimitError):
        adopt(strict(max_record_bytes=len(c.record) - 1), c)


def test_a_snapshot_whose_checkpoint_has_no_bytes_is_a_store_error() -> None:
    checkpoint = CID.of_record(b"lost")

    class Broken:
        def snapshot(self, conv: str) -> tuple[CID, bytes]:
            return checkpoint, b""

        def get(self, cid: CID) -> None:
            return None

    with pytest.raises(StoreError) as info:
        compaction_of(Broken(), "c")  # type: ignore[arg-type]
    assert (info.value.message, info.value.cid) == ("the checkpoint of 'c''s snapshot has no bytes", str(checkpoint))
