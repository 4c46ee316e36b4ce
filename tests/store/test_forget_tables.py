"""The `Store` contract for forgetting a conversation, on every store: `forget` drops the
conversation's records, quarantine entries and every per-conversation row, and the blocks no
other conversation names, keeps a tombstone (`forgotten`), leaves every other conversation's
answers as they were, rolls back whole with its transaction, and never lets a cursor handed out
before it miss a later record."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_block_tables import blocks, named
from test_contract import (  # noqa: F401  (fixtures)
    SERVER_EXAMPLES,
    SERVER_KINDS,
    STORE_EXAMPLES,
    T0,
    History,
    StoreMaker,
    Universe,
    aborted,
    chain,
    commit,
    histories,
    new_store,
    observe,
    pend,
    rec,
)
from test_witness_tables import PEERS, finding, stmt

from convgraph.artifacts import CHUNK_SIZE, split
from convgraph.core.cid import CID
from convgraph.core.record import Record
from convgraph.errors import StoreError
from convgraph.projections.index_rows import LineRow
from convgraph.store.base import Store
from convgraph.store.rows import PendingCheck


@pytest.fixture
def store(new_store: StoreMaker) -> Iterator[Store]:  # noqa: F811
    with closing(new_store()) as s:
        yield s


SHARED, MINE = CID.of_raw(b"shared artifact"), CID.of_raw(b"mine alone")


def _populate(store: Store) -> dict[str, Any]:
    """c1 with every kind of row a conversation can have; c2 sharing an artifact with it."""
    big, big_blocks = split(b"c1 only " * (CHUNK_SIZE // 4))  # a manifest and its chunks
    c1 = chain(4)
    art = named("c1", "user_message", {"content": "see"}, refs=(SHARED, MINE, big), seq=5, parents=(c1[-1],))
    rival = rec("c1", 4, c1[2].hlc.wall_ms + 5, (c1[2],), text="rival")
    waiting = rec("c1", 9, T0 + 99, (rec("c1", 8, T0 + 98),), text="waits")
    c2 = chain(3, "c2")
    c2_art = named("c2", "user_message", {"content": "also"}, refs=(SHARED,), seq=4, parents=(c2[-1],))
    store.put_blocks([*blocks(b"shared artifact", b"mine alone"), *big_blocks])
    commit(store, *c1, art, rival, *c2, c2_art, pending_put=[pend(waiting, missing=(waiting.parents[0],))],
           equivocations=[(rival.cid, c1[3].cid)])
    store.admit_blocks("c1", [SHARED, MINE, *(c for c, _ in big_blocks)])
    store.admit_blocks("c2", [SHARED])
    for conv in ("c1", "c2"):
        s = stmt(0, conv)
        store.remember(s)
        store.add_receipts([s])
        store.add_gossip(s)
        store.set_pending_checks(PEERS[0], conv, [PendingCheck("rollback", (s.data,))])
        store.add_finding(finding(1 if conv == "c1" else 2, conv, cites=(c1[0].cid,)))
        store.set_hidden(conv, [c1[0].cid] if conv == "c1" else [c2[0].cid])
    store.compact("c1", [c1[0].cid], CID.of_record(b"checkpoint"), b"snapshot")
    return {"c1": [*c1, art, rival], "waiting": waiting, "c2": [*c2, c2_art], "big": big,
            "chunks": [c for c, _ in big_blocks if c != big]}


def _answers(store: Store, conv: str, cids: list[CID]) -> dict[str, Any]:
    return {
        "records": store.records(conv), "heads": store.heads(conv), "count": store.count(conv),
        "sync_keys": store.sync_keys(conv), "metas": store.metas(cids), "get_many": store.get_many(cids),
        "since": store.since(0, conv)[0], "first": store.first(conv), "snapshot": store.snapshot(conv),
        "equivocations": store.equivocations(conv), "findings": store.findings(conv), "cited": store.cited(conv),
        "remembered": store.remembered_in(conv), "receipts": store.open_receipts(PEERS[0], conv),
        "gossip": store.gossip(conv), "checks": store.pending_checks(PEERS[0], conv),
        "index": sorted(map(repr, store.index_rows(conv))), "hidden": store.hidden(conv),
        "artifact_refs": store.artifact_refs(conv), "admitted": store.admitted(conv, [SHARED, MINE]),
        "line": store.line(conv, "main", None, 100),
    }


def test_forget_drops_the_conversation_and_only_it(store: Store) -> None:
    held = _populate(store)
    c1 = [r.cid for r in held["c1"]]
    c2 = [r.cid for r in held["c2"]]
    before = _answers(store, "c2", c2)
    assert store.forgotten(["c1", "c2"]) == set()
    store.forget("c1")
    assert store.conversations() == ["c2"] and store.forgotten(["c1", "c2", "c3"]) == {"c1"}
    gone = _answers(store, "c1", c1)
    assert all(not v for v in gone.values()), {k: v for k, v in gone.items() if v}
    assert store.metas(c1) == {} and not any(store.has(c) for c in c1)
    assert store.count() == len(c2) and [c for c, _ in store.iter_all()] == c2
    waiting = held["waiting"]
    assert store.pending_get([waiting.cid]) == {} and store.pending_waiting_on(waiting.parents) == []
    assert store.pending_stats() == (0, 0) and store.equivocations() == []
    assert [f.conv for f in store.findings()] == ["c2"]
    assert store.max_hlc() == max(r.hlc for r in held["c2"])
    big, chunks = held["big"], held["chunks"]
    assert len(chunks) > 1 and store.has_blocks([SHARED, MINE, big, *chunks]) == {SHARED}  # c2 names it
    assert store.chunks_of([big]) == {} and store.manifests_of(chunks) == {}
    assert store.admitting([SHARED, MINE]) == {"c2"} and store.conversations_naming([SHARED, MINE]) == {"c2"}
    assert _answers(store, "c2", c2) == before


def test_forget_moves_the_change_token(store: Store) -> None:
    commit(store, *chain(2), *chain(2, "c2"))
    token = store.change_token()
    store.forget("c1")
    assert store.change_token() != token


def test_a_forget_that_rolls_back_leaves_everything(store: Store) -> None:
    held = _populate(store)
    c1 = [r.cid for r in held["c1"]]
    before = {"c1": _answers(store, "c1", c1), "blocks": store.has_blocks([SHARED, MINE]),
              "pending": store.pending_stats(), "conversations": store.conversations()}
    aborted(store, lambda: store.forget("c1"))
    after = {"c1": _answers(store, "c1", c1), "blocks": store.has_blocks([SHARED, MINE]),
             "pending": store.pending_stats(), "conversations": store.conversations()}
    assert after == before and store.forgotten(["c1"]) == set()


def test_a_cursor_handed_out_before_a_forget_misses_no_later_record(store: Store) -> None:
    c2 = chain(3, "c2")
    commit(store, *c2[:2])
    commit(store, *chain(3))  # the newest records are c1's
    cursor, of_c1, of_c2 = store.cursor(), store.cursor("c1"), store.cursor("c2")
    store.forget("c1")
    assert store.cursor() >= cursor  # never moves back: a later record lands past it
    assert store.cursor("c1") >= of_c1  # nor does the forgotten conversation's own
    commit(store, c2[2])
    assert store.since(of_c2, "c2")[0] == [(c2[2].cid, c2[2].data)]
    assert [c for _, c, _ in store.arrivals(cursor, 10)[0]] == [c2[2].cid]


def test_forgetting_what_was_never_held_only_keeps_the_tombstone(store: Store) -> None:
    commit(store, *chain(2))
    store.forget("absent")
    assert store.forgotten(["absent"]) == {"absent"} and store.conversations() == ["c1"]
    assert store.forgotten([]) == set()


def test_vacuum_runs_outside_a_transaction_only(store: Store) -> None:
    commit(store, *chain(3), *chain(2, "c2"))
    store.forget("c1")
    store.vacuum()
    assert store.conversations() == ["c2"] and store.count() == 2

    def inside() -> None:
        with pytest.raises(StoreError, match="transaction"):
            store.vacuum()

    aborted(store, inside)


def test_the_index_rows_of_a_forgotten_conversation_go_with_it(store: Store) -> None:
    c1 = chain(3)
    commit(store, *c1)
    assert LineRow in {type(r) for r in store.index_rows("c1")}
    store.forget("c1")
    assert store.index_rows("c1") == [] and store.line("c1", "main", None, 10) == []


def _land(store: Store, hist: History, keep: Callable[[Record], bool]) -> None:
    """Commit the history's records that `keep` holds, with their equivocation pairs, one by one."""
    held: set[CID] = set()
    for r in hist.records:
        if keep(r):
            commit(store, r, equivocations=[(a, r.cid) for a in hist.rivals[r.cid] if a in held])
            held.add(r.cid)


def test_a_forgotten_conversation_reads_as_never_held(new_store: StoreMaker) -> None:  # noqa: F811
    """The promise: after `forget(c)`, every answer equals a store's that never held `c`."""

    @(SERVER_EXAMPLES if new_store.kind in SERVER_KINDS else STORE_EXAMPLES)
    @given(histories(), st.sampled_from(["c1", "c2", "c3"]))
    def check(hist: History, conv: str) -> None:
        with closing(new_store()) as forgot, closing(new_store()) as never:
            _land(forgot, hist, lambda r: True)
            forgot.forget(conv)
            _land(never, hist, lambda r: r.conv != conv)
            universe = Universe.of(hist.records)
            assert observe(forgot, universe) == observe(never, universe)
            assert forgot.forgotten([conv]) == {conv} and never.forgotten([conv]) == set()

    check()
