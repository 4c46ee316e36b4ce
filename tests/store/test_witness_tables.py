"""The `Store` contract for witnessed history (docs/integrity.md §4-§6), on every store:
remembered statements, open receipts, gossip, pending checks, findings, and compaction
keeping what findings cite."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

import pytest
from test_contract import (  # noqa: F401  (fixtures)
    KEYS,
    T0,
    StoreMaker,
    aborted,
    chain,
    commit,
    new_store,
    rec,
)

from convgraph.core.cid import CID
from convgraph.integrity.statement import Statement, sign_statement
from convgraph.store.base import Store
from convgraph.store.rows import GOSSIP_KEEP, FindingRow, PendingCheck

PEERS = [k.public for k in KEYS]


@pytest.fixture
def store(new_store: StoreMaker) -> Iterator[Store]:  # noqa: F811
    with closing(new_store()) as s:
        yield s


def stmt(key: int = 0, conv: str = "c1", *, time: int = T0, count: int = 1,
         stored: tuple[CID, ...] = ()) -> Statement:
    heads = [CID.of_record(b"head %d %d" % (key, count))] if count else []
    return sign_statement(KEYS[key], conv, count, heads, time, stored=stored)


def finding(n: int, conv: str = "c1", *, cites: tuple[CID, ...] = (),
            statements: tuple[Statement, ...] = (), found: int = T0) -> FindingRow:
    bundle = b"bundle %d" % n
    return FindingRow(CID.of_record(bundle), "rollback", conv, bundle, cites,
                      tuple(s.data for s in statements), f"finding {n}", found)


def test_an_empty_store_remembers_nothing(store: Store) -> None:
    assert store.remembered(PEERS[0], "c1") is None and store.remembered_in("c1") == []
    assert store.open_receipts(PEERS[0], "c1") == [] and store.gossip("c1") == []
    assert store.pending_checks(PEERS[0], "c1") == []
    assert store.findings() == [] and store.findings("c1") == [] and store.cited("c1") == set()


def test_remember_replaces_per_peer_and_conversation(store: Store) -> None:
    a1, a2, b1, a_other = stmt(0, time=T0), stmt(0, time=T0 + 5, count=2), stmt(1), stmt(0, "c2")
    for s in (a1, b1, a_other, a2):
        store.remember(s)
    assert store.remembered(PEERS[0], "c1") == a2.data
    assert store.remembered(PEERS[1], "c1") == b1.data
    assert store.remembered(PEERS[0], "c2") == a_other.data
    assert store.remembered(PEERS[1], "c2") is None
    assert sorted(store.remembered_in("c1")) == sorted([a2.data, b1.data])
    assert store.remembered_in("c3") == []


def test_receipts_stay_open_until_closed(store: Store) -> None:
    late, early, mid = (stmt(0, time=T0 + d, stored=(CID.of_record(b"r%d" % d),)) for d in (9, 1, 5))
    theirs = stmt(1, stored=(CID.of_record(b"x"),))
    store.add_receipts([late, early])
    store.add_receipts([mid, early, theirs])  # again: still one
    assert store.open_receipts(PEERS[0], "c1") == [early.data, mid.data, late.data]
    assert store.open_receipts(PEERS[1], "c1") == [theirs.data]
    assert store.open_receipts(PEERS[0], "c2") == []
    store.close_receipts(PEERS[0], "c1", [mid.cid, theirs.cid, CID.of_record(b"never")])
    assert store.open_receipts(PEERS[0], "c1") == [early.data, late.data]
    assert store.open_receipts(PEERS[1], "c1") == [theirs.data]  # another peer's: untouched
    store.close_receipts(PEERS[0], "c1", [])
    assert store.open_receipts(PEERS[0], "c1") == [early.data, late.data]


def test_gossip_keeps_the_latest_per_key_and_conversation(store: Store) -> None:
    mine = [stmt(0, time=T0 + i, count=i + 1) for i in range(GOSSIP_KEEP + 3)]
    theirs = stmt(1, time=T0 + 4)
    elsewhere = stmt(0, "c2", time=T0)
    for s in [*mine[3:6], theirs, *mine[:3], *mine[6:], elsewhere]:
        store.add_gossip(s)
    kept = mine[-GOSSIP_KEEP:]
    want = sorted([*kept, theirs], key=lambda s: (s.time_ms, bytes(s.cid)), reverse=True)
    assert store.gossip("c1") == [s.data for s in want]
    assert store.gossip("c2") == [elsewhere.data]
    store.add_gossip(mine[0])  # older than the eight held: not kept
    assert store.gossip("c1") == [s.data for s in want]
    store.add_gossip(kept[-1])  # held already: nothing changes
    assert store.gossip("c1") == [s.data for s in want]


def test_gossip_a_finding_cites_is_never_pruned(store: Store) -> None:
    old = stmt(0, time=T0)
    store.add_gossip(old)
    store.add_finding(finding(1, statements=(old,)))
    assert old.cid in store.cited("c1")
    newer = [stmt(0, time=T0 + 1 + i, count=i + 2) for i in range(GOSSIP_KEEP + 1)]
    for s in newer:
        store.add_gossip(s)
    held = store.gossip("c1")
    assert held == [s.data for s in reversed(newer[-GOSSIP_KEEP:])] + [old.data]
    cited_late = stmt(0, time=T0 - 5, count=9)  # older than all, but cited: kept when it arrives
    store.add_finding(finding(2, statements=(cited_late,)))
    store.add_gossip(cited_late)
    assert store.gossip("c1") == [*held, cited_late.data]


def test_pending_checks_are_replaced_whole(store: Store) -> None:
    a, b, c = stmt(0, time=T0), stmt(0, time=T0 + 1, count=2), stmt(0, time=T0 + 2, count=3)
    first = [PendingCheck("rollback", (a.data, b.data)), PendingCheck("withholding", (c.data,))]
    store.set_pending_checks(PEERS[0], "c1", [*first, first[0]])
    store.set_pending_checks(PEERS[1], "c1", [PendingCheck("server_equivocation", (a.data,))])
    assert store.pending_checks(PEERS[0], "c1") == first
    assert store.pending_checks(PEERS[0], "c2") == []
    second = [PendingCheck("deletion", (b.data, c.data)), first[1]]
    store.set_pending_checks(PEERS[0], "c1", second)
    assert store.pending_checks(PEERS[0], "c1") == second
    store.set_pending_checks(PEERS[0], "c1", [])
    assert store.pending_checks(PEERS[0], "c1") == []
    assert store.pending_checks(PEERS[1], "c1") == [PendingCheck("server_equivocation", (a.data,))]


def test_findings_are_stored_once_by_id_in_found_order(store: Store) -> None:
    s1, s2 = stmt(0, time=T0), stmt(0, time=T0 + 9, count=2)
    records = (CID.of_record(b"rec a"), CID.of_record(b"rec b"))
    f1 = finding(1, cites=records, statements=(s1, s2), found=T0 + 50)
    f2 = finding(2, "c2", found=T0 + 10)
    f3 = finding(3, found=T0 + 10)
    assert store.add_finding(f1) and store.add_finding(f2) and store.add_finding(f3)
    assert not store.add_finding(f1)
    again = FindingRow(f1.id, "deletion", "c1", f1.bundle, (), (), "other words", T0)
    assert not store.add_finding(again)  # the id decides: the first one stays
    by_found = [*sorted([f2, f3], key=lambda f: bytes(f.id)), f1]
    assert store.findings() == by_found
    assert store.findings("c1") == [f3, f1] and store.findings("c2") == [f2]
    assert store.findings("c3") == []
    assert store.cited("c1") == {*records, s1.cid, s2.cid}
    assert store.cited("c2") == set()


def test_compaction_keeps_the_bytes_of_cited_and_equivocating_records(store: Store) -> None:
    c1 = chain(5)
    rival = rec("c1", 5, c1[3].hlc.wall_ms + 1, (c1[3],), text="rival")
    commit(store, *c1, rival, equivocations=[(rival.cid, c1[4].cid)])
    store.add_finding(finding(1, cites=(c1[1].cid,)))
    store.add_finding(finding(2, "c2", cites=(c1[2].cid,)))  # another conversation's: no shield
    store.compact("c1", [r.cid for r in [*c1, rival]], CID.of_record(b"checkpoint"), b"snap")
    kept = {c1[1].cid, c1[4].cid, rival.cid}
    for r in [*c1, rival]:
        assert store.get(r.cid) == (r.data if r.cid in kept else None), r.seq
    assert len(store.metas([r.cid for r in [*c1, rival]])) == 6


def test_witness_writes_in_a_transaction_that_raises_leave_nothing(store: Store) -> None:
    s1, s2 = stmt(0, time=T0, stored=(CID.of_record(b"r"),)), stmt(0, time=T0 + 1, count=2)
    store.remember(s1)
    store.add_receipts([s1])
    store.add_gossip(s1)
    store.set_pending_checks(PEERS[0], "c1", [PendingCheck("rollback", (s1.data,))])

    def body() -> None:
        store.remember(s2)
        store.add_receipts([s2])
        store.close_receipts(PEERS[0], "c1", [s1.cid])
        store.add_gossip(s2)
        store.set_pending_checks(PEERS[0], "c1", [])
        assert store.add_finding(finding(1, statements=(s2,)))
        assert store.remembered(PEERS[0], "c1") == s2.data  # seen inside

    aborted(store, body)
    assert store.remembered(PEERS[0], "c1") == s1.data
    assert store.open_receipts(PEERS[0], "c1") == [s1.data]
    assert store.gossip("c1") == [s1.data]
    assert store.pending_checks(PEERS[0], "c1") == [PendingCheck("rollback", (s1.data,))]
    assert store.findings() == [] and store.cited("c1") == set()
    assert store.add_finding(finding(1, statements=(s2,)))  # the rolled-back one is not a duplicate
