"""Ingest: every outcome (accept, duplicate, quarantine, hold, release, reject, evict,
equivocation) and the promise that delivery order never changes what a replica holds."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from convgraph import Config, Limits, ManualClock, QuarantineBounds, Record, Replica, SigningKey
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import sign_record
from convgraph.errors import ForbiddenError, HlcOrderError, ParentRejectedError, SeqChainError, SizeLimitError

A, B = SigningKey(bytes(range(32))), SigningKey(bytes(range(1, 33)))


def chain(key: SigningKey, n: int, conv: str = "c", start: int = 1000) -> list[Record]:
    out: list[Record] = []
    for i in range(n):
        out.append(sign_record(key, conv=conv, seq=i + 1, hlc=Hlc(start + i, 0),
                               parents=[out[-1].cid] if out else [], kind="user_message",
                               payload={"content": f"m{i}"}))
    return out


def fresh(clock: ManualClock | None = None, **config: object) -> Replica:
    return Replica.in_memory(clock=clock or ManualClock(10_000), config=Config(**config))  # type: ignore[arg-type]


def test_accept_and_duplicates() -> None:
    r = fresh()
    recs = chain(A, 3)
    report = r.ingest([x.data for x in recs] + [recs[0].data])
    assert report.accepted == [x.cid for x in recs]
    assert report.duplicates == [recs[0].cid]
    again = r.ingest([recs[1].data])
    assert again.duplicates == [recs[1].cid] and not again.accepted
    assert r.heads("c") == [recs[-1].cid]


def test_one_bad_record_never_stops_the_rest() -> None:
    r = fresh()
    recs = chain(A, 3)
    bad = bytearray(recs[1].data)
    bad[-1] ^= 1
    report = r.ingest([recs[0].data, bytes(bad), b"\x00garbage", recs[2].data, (recs[1].data, recs[0].cid)])
    assert report.accepted == [recs[0].cid]
    assert {x.rule for x in report.rejected} == {"signature", "decode", "cid"}
    assert report.quarantined == [recs[2].cid]  # waits for recs[1], which arrived only forged
    assert r.store.count() == 1


def test_quarantine_then_release_when_parents_arrive() -> None:
    r = fresh()
    recs = chain(A, 4)
    first = r.ingest([recs[3].data, recs[2].data])
    assert sorted(first.quarantined) == sorted([recs[3].cid, recs[2].cid]) and not first.accepted
    assert r.store.pending_stats()[0] == 2
    second = r.ingest([recs[0].data, recs[1].data])
    assert second.accepted == [x.cid for x in recs]
    assert sorted(second.released) == sorted([recs[2].cid, recs[3].cid])
    assert r.store.pending_stats() == (0, 0)


def test_quarantine_survives_reopen(tmp_path: object) -> None:
    from pathlib import Path

    home = Path(str(tmp_path)) / "r"
    recs = chain(A, 2)
    with Replica.open(home, clock=ManualClock(10_000)) as r:
        assert r.ingest([recs[1].data]).quarantined == [recs[1].cid]
    with Replica.open(home, clock=ManualClock(10_000)) as r:
        assert r.ingest([recs[0].data]).accepted == [recs[0].cid, recs[1].cid]


def test_quarantine_bound_evicts_oldest() -> None:
    r = fresh(quarantine=QuarantineBounds(max_count=3, max_bytes=1 << 20))
    orphans = [chain(A, 2, conv=f"c{i}")[1] for i in range(5)]
    evicted = []
    for o in orphans:
        evicted += r.ingest([o.data]).evicted
    assert evicted == [orphans[0].cid, orphans[1].cid]
    assert r.store.pending_stats()[0] == 3
    byte_bound = fresh(quarantine=QuarantineBounds(max_count=100, max_bytes=len(orphans[0].data) * 2))
    report = byte_bound.ingest([o.data for o in orphans[:3]])
    assert report.evicted == [orphans[0].cid]


def test_held_records_count_against_the_quarantine_bounds() -> None:
    """Held and parent-waiting records share one quarantine; the oldest go first, whatever
    they wait for (docs/format.md §11.3)."""
    clock = ManualClock(1_000_000)
    r = fresh(clock, max_drift_ms=60_000, quarantine=QuarantineBounds(max_count=10, max_bytes=1 << 20))
    held = [sign_record(A, conv=f"h{i}", seq=1, hlc=Hlc(2_000_000 + i, 0), parents=[], kind="user_message",
                        payload={"content": f"early {i}"}) for i in range(30)]
    report = r.ingest([h.data for h in held])
    assert report.held == [h.cid for h in held[20:]]  # each record in one outcome: where it ended
    assert report.evicted == [h.cid for h in held[:20]] and r.store.pending_stats()[0] == 10
    orphans = [chain(A, 2, conv=f"o{i}")[1] for i in range(4)]
    assert r.ingest([o.data for o in orphans]).evicted == [h.cid for h in held[20:24]]
    clock.advance(1_000_000)
    released = r.release_held()
    assert released.accepted == [h.cid for h in held[24:]] and r.store.count() == 6


def test_far_future_record_is_held_and_never_advances_the_clock() -> None:
    clock = ManualClock(1_000_000)
    r = fresh(clock, max_drift_ms=60_000)
    future = sign_record(A, conv="c", seq=1, hlc=Hlc(1_000_000 + 3_600_000, 0), parents=[],
                         kind="user_message", payload={"content": "from the future"})
    child = sign_record(B, conv="c", seq=1, hlc=Hlc(1_000_000 + 3_600_001, 0), parents=[future.cid],
                        kind="user_message", payload={"content": "reply"})
    report = r.ingest([future.data, child.data])
    assert report.held == [future.cid, child.cid] and not report.quarantined  # both beyond drift
    assert r.now() < Hlc(1_000_000 + 60_000, 0)
    mine = r.write("c", "user_message", {"content": "local"})
    assert mine.hlc.wall_ms == 1_000_000 and mine.parents == ()
    clock.advance(3_600_000 - 60_000 + 1)
    released = r.release_held()
    assert released.accepted == [future.cid, child.cid]
    assert released.released == [future.cid, child.cid]


def test_causal_rejections_and_their_descendants() -> None:
    r = fresh()
    a1 = chain(A, 1)[0]
    stale = sign_record(B, conv="c", seq=1, hlc=Hlc(999, 0), parents=[a1.cid], kind="user_message",
                        payload={"content": "clock behind parent"})
    grandchild = sign_record(B, conv="c", seq=2, hlc=Hlc(2000, 0), parents=[stale.cid],
                             kind="user_message", payload={"content": "x"})
    skip = sign_record(A, conv="c", seq=3, hlc=Hlc(2000, 0), parents=[a1.cid], kind="user_message",
                       payload={"content": "x"})
    report = r.ingest([grandchild.data, a1.data, stale.data, skip.data])
    errors = {x.cid: type(x.error) for x in report.rejected}
    assert errors == {stale.cid: HlcOrderError, grandchild.cid: ParentRejectedError, skip.cid: SeqChainError}
    assert report.accepted == [a1.cid]
    assert r.store.count() == 1 and r.store.pending_stats() == (0, 0)


def test_equivocation_keeps_both_with_evidence() -> None:
    r = fresh()
    a1 = chain(A, 1)[0]
    left = sign_record(A, conv="c", seq=2, hlc=Hlc(2000, 0), parents=[a1.cid], kind="user_message",
                       payload={"content": "I said yes"})
    right = sign_record(A, conv="c", seq=2, hlc=Hlc(2000, 0), parents=[a1.cid], kind="user_message",
                        payload={"content": "I said no"})
    r.ingest([a1.data, left.data])
    report = r.ingest([right.data])
    assert report.accepted == [right.cid]
    assert report.equivocations == [(left.cid, right.cid)]
    assert r.store.equivocations("c") == [tuple(sorted([left.cid, right.cid]))]
    assert sorted(r.heads("c")) == sorted([left.cid, right.cid])
    assert r.verify().ok


def test_equivocation_within_one_batch() -> None:
    r = fresh()
    a1 = chain(A, 1)[0]
    twins = [sign_record(A, conv="c", seq=2, hlc=Hlc(2000 + i, 0), parents=[a1.cid], kind="user_message",
                         payload={"content": "x"}) for i in range(2)]
    report = r.ingest([a1.data, *(t.data for t in twins)])
    assert len(report.equivocations) == 1 and len(report.accepted) == 3


def test_a_sync_exchange_stores_only_the_conversations_it_covers() -> None:
    c, d = chain(A, 2, conv="c"), chain(B, 2, conv="d")
    batch = [c[0].data, d[0].data, c[1].data, d[1].data, d[1].data]
    r = fresh()
    report = r.ingest(batch, conversations={"c"})
    assert report.accepted == [c[0].cid, c[1].cid] and not report.duplicates and not report.quarantined
    assert [(x.cid, type(x.error), x.rule) for x in report.rejected] == [
        (x.cid, ForbiddenError, "forbidden") for x in (d[0], d[1], d[1])]
    assert all("'d'" in str(x.error) and x.error.cid == str(x.cid) for x in report.rejected)
    assert r.conversations() == ["c"] and r.store.count() == 2 and r.store.pending_stats() == (0, 0)
    assert not fresh().ingest(batch, conversations=()).accepted  # covering nothing admits nothing
    assert len(fresh().ingest(batch).accepted) == 4  # no filter: every conversation


def _world(seed: int) -> list[Record]:
    """Three actors writing concurrently with random partial views, identical texts included."""
    rng = random.Random(seed)
    keys = [A, B, SigningKey(bytes(range(2, 34)))]
    replicas = [Replica.in_memory(k, clock=ManualClock(5_000)) for k in keys]
    made: list[Record] = []
    for _ in range(rng.randint(3, 25)):
        w = rng.choice(replicas)
        if made and rng.random() < 0.5:
            w.ingest([m.data for m in made if rng.random() < 0.7])
        made.append(w.write("c", "user_message", {"content": rng.choice(["yes", "no"]), "timestamp": 1}))
    return made


@given(st.integers(0, 10_000), st.randoms(use_true_random=False))
def test_any_delivery_order_gives_identical_replicas(seed: int, rnd: random.Random) -> None:
    made = _world(seed)
    views = []
    for _ in range(3):
        batch = [m.data for m in made] + [m.data for m in made if rnd.random() < 0.3]
        rnd.shuffle(batch)
        r = Replica.in_memory(clock=ManualClock(5_000))
        while batch:  # delivered in random chunks
            cut = rnd.randint(1, len(batch))
            r.ingest(batch[:cut])
            batch = batch[cut:]
        assert r.store.pending_stats() == (0, 0)
        views.append((r.heads("c"), b"".join(d for _, d in r.store.records("c"))))
    assert views[0] == views[1] == views[2]
    assert len(views[0][1]) == sum(len(m.data) for m in made)


def forged(rec: Record) -> bytes:
    """`rec` with one byte of its signature flipped: well-formed, wrongly signed."""
    data = bytearray(rec.data)
    at = data.find(rec.sig)
    data[at] ^= 1
    return bytes(data)


def test_a_child_of_a_parent_that_fails_the_intrinsic_checks_is_rejected_in_any_order() -> None:
    recs = chain(A, 3)
    bad = forged(recs[0])
    bad_cid = CID.of_record(bad)
    child = sign_record(B, conv="c", seq=1, hlc=Hlc(2000, 0), parents=[bad_cid], kind="user_message",
                        payload={"content": "a reply to a forgery"})
    grandchild = sign_record(B, conv="c", seq=2, hlc=Hlc(2001, 0), parents=[child.cid], kind="user_message",
                             payload={"content": "and more"})
    for items in ([bad, child.data, grandchild.data], [grandchild.data, child.data, bad],
                  [(child.data, child.cid), (bad, bad_cid), grandchild.data]):
        r = fresh()
        report = r.ingest(items)
        errors = {x.cid: x.rule for x in report.rejected}
        assert errors == {bad_cid: "signature", child.cid: "parent_rejected", grandchild.cid: "parent_rejected"}
        assert not report.quarantined and not report.accepted
        assert r.store.count() == 0 and r.store.pending_stats() == (0, 0)


def test_a_waiting_child_is_rejected_when_its_parent_arrives_forged() -> None:
    r = fresh()
    bad = forged(chain(A, 1)[0])
    child = sign_record(B, conv="c", seq=1, hlc=Hlc(2000, 0), parents=[CID.of_record(bad)],
                        kind="user_message", payload={"content": "early"})
    assert r.ingest([child.data]).quarantined == [child.cid]
    report = r.ingest([bad])
    assert [x.rule for x in report.rejected] == ["signature", "parent_rejected"]
    assert report.rejected[1].cid == child.cid and not report.quarantined
    assert r.store.pending_stats() == (0, 0)


def test_bytes_offered_under_another_cid_reject_no_child() -> None:
    r = fresh()
    recs = chain(A, 2)
    report = r.ingest([(recs[0].data, recs[1].cid), recs[1].data])
    assert [x.rule for x in report.rejected] == ["cid"]
    assert report.quarantined == [recs[1].cid]  # the real recs[0] may still come
    assert r.ingest([recs[0].data]).accepted == [recs[0].cid, recs[1].cid]
    # offered under the CID of a parent: that parent is still unknown, not refused, so its
    # child waits for it (refusing the CID would reject the child as a forgery's)
    r = fresh()
    report = r.ingest([(recs[1].data, recs[0].cid), recs[1].data])
    assert [(x.cid, x.rule) for x in report.rejected] == [(recs[0].cid, "cid")]
    assert report.quarantined == [recs[1].cid]
    assert r.ingest([recs[0].data]).accepted == [recs[0].cid, recs[1].cid]


def test_each_record_is_reported_once_by_where_it_ended() -> None:
    recs = chain(A, 4)
    r = fresh()
    report = r.ingest([recs[3].data, recs[1].data, recs[2].data, recs[0].data])
    assert report.accepted == [recs[0].cid, recs[1].cid, recs[2].cid, recs[3].cid]
    assert report.quarantined == [] and report.held == [] and report.released == []
    stale = sign_record(B, conv="c", seq=1, hlc=Hlc(999, 0), parents=[recs[0].cid], kind="user_message",
                        payload={"content": "clock behind its parent"})
    late = sign_record(B, conv="c", seq=2, hlc=Hlc(3000, 0), parents=[stale.cid], kind="user_message",
                       payload={"content": "x"})
    r = fresh()
    report = r.ingest([late.data, recs[0].data, stale.data])
    assert [x.cid for x in report.rejected] == [stale.cid, late.cid] and report.quarantined == []
    outcomes = [*report.accepted, *report.quarantined, *report.held, *(x.cid for x in report.rejected)]
    assert sorted(outcomes) == sorted({recs[0].cid, stale.cid, late.cid})


def test_a_record_evicted_at_once_is_reported_evicted_only() -> None:
    r = fresh(quarantine=QuarantineBounds(max_count=1, max_bytes=1 << 20))
    orphans = [chain(A, 2, conv=f"c{i}")[1] for i in range(3)]
    report = r.ingest([o.data for o in orphans])
    assert report.evicted == [orphans[0].cid, orphans[1].cid]
    assert report.quarantined == [orphans[2].cid]


def test_a_replica_applies_its_own_record_limits_on_ingest() -> None:
    big = sign_record(A, conv="c", seq=1, hlc=Hlc(1000, 0), parents=[], kind="user_message",
                      payload={"content": "x" * 500})
    report = fresh(limits=Limits(max_record_bytes=400)).ingest([big.data])
    assert [type(x.error) for x in report.rejected] == [SizeLimitError] and not report.accepted


def test_a_bad_record_of_exactly_the_size_limit_is_refused_under_its_own_cid() -> None:
    """The limit is inclusive: bytes of exactly that size were hashed, so a forgery of that
    size is named, and whatever names it as a parent is rejected too."""
    bad = forged(sign_record(A, conv="c", seq=1, hlc=Hlc(1000, 0), parents=[], kind="user_message",
                             payload={"content": "x" * 300}))
    child = sign_record(B, conv="c", seq=1, hlc=Hlc(2000, 0), parents=[CID.of_record(bad)],
                        kind="user_message", payload={"content": "y"})
    assert len(child.data) < len(bad)
    report = fresh(limits=Limits(max_record_bytes=len(bad))).ingest([bad, child.data])
    assert [(x.cid, x.rule) for x in report.rejected] == [
        (CID.of_record(bad), "signature"), (child.cid, "parent_rejected")]
    assert not report.quarantined and not report.accepted


def test_a_refused_record_is_reported_under_the_cid_its_sender_claimed() -> None:
    claimed = chain(A, 1)[0].cid
    report = fresh().ingest([(b"\x00garbage", claimed), b"\x00garbage"])
    assert [x.cid for x in report.rejected] == [claimed, CID.of_record(b"\x00garbage")]  # unclaimed: its own


def test_a_record_waiting_for_two_parents_is_placed_once_when_both_arrive() -> None:
    a1, b1 = chain(A, 1)[0], chain(B, 1)[0]
    child = sign_record(A, conv="c", seq=2, hlc=Hlc(2000, 0), parents=[a1.cid, b1.cid], kind="user_message",
                        payload={"content": "both"})
    r = fresh()
    assert r.ingest([child.data]).quarantined == [child.cid]
    [entry] = r.store.pending_get([child.cid]).values()
    assert (entry.reason, sorted(entry.missing)) == ("parents", sorted([a1.cid, b1.cid]))
    report = r.ingest([a1.data, b1.data])
    assert report.accepted == [a1.cid, b1.cid, child.cid] and report.released == [child.cid]
    assert r.store.count() == 3 and r.store.pending_stats() == (0, 0)


def test_a_record_whose_two_parents_are_refused_is_refused_once() -> None:
    a1 = chain(A, 1)[0]
    bad = [sign_record(B, conv="c", seq=1, hlc=Hlc(999 - i, 0), parents=[a1.cid], kind="user_message",
                       payload={"content": f"stale {i}"}) for i in range(2)]  # hlc before their parent's
    child = sign_record(A, conv="c", seq=2, hlc=Hlc(2000, 0), parents=sorted([a1.cid, *(b.cid for b in bad)]),
                        kind="user_message", payload={"content": "x"})
    r = fresh()
    r.ingest([child.data])
    report = r.ingest([a1.data, *(b.data for b in bad)])
    rejected = [(x.cid, type(x.error)) for x in report.rejected]
    assert rejected == [(bad[0].cid, HlcOrderError), (bad[1].cid, HlcOrderError), (child.cid, ParentRejectedError)]
    assert report.rejected[2].error.message == "a parent was rejected"
    assert report.rejected[2].error.cid == str(child.cid)
    assert r.store.count() == 1 and r.store.pending_stats() == (0, 0)


def _where(report: object) -> dict[str, set[CID]]:
    names = ("accepted", "duplicates", "quarantined", "held", "released", "evicted")
    out = {n: set(getattr(report, n)) for n in names}
    out["rejected"] = {r.cid for r in report.rejected if r.cid is not None}  # type: ignore[attr-defined]
    return out


def test_an_ingest_in_parts_reports_and_stores_what_one_ingest_does() -> None:
    bad: list[Record] = []
    for i in range(12):  # the sixth is not after its parent: rejected, and every one after it
        bad.append(sign_record(A, conv="c", seq=i + 1, hlc=Hlc(1000 + i - (i >= 5), 0),
                               parents=[bad[-1].cid] if bad else [], kind="user_message",
                               payload={"content": f"m{i}"}))
    good = chain(B, 8, start=2000)
    good[3], good[4] = good[4], good[3]  # a child before its parent, across a part boundary
    ghost, *orphans = chain(B, 4, conv="d", start=3000)  # waits for a parent never sent
    items = [r.data for r in [*good, *bad, *orphans, good[0]]]
    whole = fresh(quarantine=QuarantineBounds(max_count=2))
    expected = whole.ingest(items)
    for size in (1, 2, 4, 5):
        parts = fresh(quarantine=QuarantineBounds(max_count=2))
        merged = None
        refused: set[CID] = set()
        for start in range(0, len(items), size):
            taken = parts.ingest(items[start:start + size], refused=refused)
            refused |= {r.cid for r in taken.rejected if r.cid is not None}
            if merged is None:
                merged = taken
            else:
                merged.merge(taken)
        assert _where(merged) == _where(expected), size
        assert sorted(map(str, merged.accepted)) == sorted(map(str, expected.accepted))  # type: ignore[union-attr]
        assert parts.store.count() == whole.store.count() and parts.store.pending_stats() == whole.store.pending_stats()
    assert ghost.cid not in _where(expected)["accepted"]
    assert _where(expected)["rejected"] == {r.cid for r in bad[5:]}


def test_a_push_onto_the_heads_reads_the_stored_metas_once() -> None:
    # whether the pushed records are held already and their parents' headers: one look-up
    key = SigningKey.generate()
    records = chain(key, 4)
    r = fresh()
    r.ingest([x.data for x in records[:2]])
    asked: list[set[CID]] = []
    metas = r.store.metas

    def counted(cids: object) -> object:
        asked.append(set(cids))  # type: ignore[call-overload]
        return metas(asked[-1])

    r.store.metas = counted  # type: ignore[method-assign]
    report = r.ingest([x.data for x in records[2:]])
    assert report.accepted == [x.cid for x in records[2:]]
    assert asked == [{records[1].cid, records[2].cid, records[3].cid}], asked
