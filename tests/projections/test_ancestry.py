"""Causal precedence by version vectors (projections/ancestry.py), against a brute-force walk.

The authority projection asks "is y in the causal past of x" for every grant and revocation it
weighs, so a wrong answer is a wrong verdict and a slow one is a cheap attack (an equivocating
actor forces the walk).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.projections.ancestry import Ancestry


@dataclass(frozen=True)
class Rec:
    cid: CID
    actor: bytes
    seq: int
    hlc: Hlc
    parents: tuple[CID, ...]


def rec(name: str, actor: str, seq: int, wall: int, *parents: Rec) -> Rec:
    return Rec(CID.of_record(name.encode()), actor.encode(), seq, Hlc(wall, 0),
               tuple(p.cid for p in parents))


def index(*records: Rec) -> Ancestry:
    a = Ancestry()
    for r in records:
        a.add(r.cid, r.actor, r.seq, r.hlc, r.parents)
    return a


def pasts(records: list[Rec]) -> dict[CID, frozenset[CID]]:
    """The strict causal past of each record, by walking every parent: the definition itself."""
    out: dict[CID, frozenset[CID]] = {}
    for r in records:  # parents first
        out[r.cid] = frozenset(r.parents).union(*(out[p] for p in r.parents))
    return out


@st.composite
def histories(draw: Any) -> list[Rec]:
    """Histories of up to four actors, each naming its previous record (format.md §11.2),
    with equivocations: a record naming an older record of its own actor, or none, as previous."""
    records: list[Rec] = []
    for i in range(draw(st.integers(1, 24))):
        actor = draw(st.sampled_from(["a", "b", "c", "d"]))
        own = [r for r in records if r.actor == actor.encode()]
        choice = draw(st.integers(0, 5))  # 0: fork from any own record (or start again), else the last
        prev = (None if choice == 0 and draw(st.booleans()) else draw(st.sampled_from(own))
                if choice == 0 else own[-1]) if own else None
        others = draw(st.lists(st.sampled_from(records), max_size=3)) if records else []
        parents = {p.cid: p for p in others} | ({prev.cid: prev} if prev else {})
        wall = max((p.hlc.wall_ms for p in parents.values()), default=0) + draw(st.integers(1, 2))
        records.append(Rec(CID.of_record(f"r{i}".encode()), actor.encode(),
                           prev.seq + 1 if prev else 1, Hlc(wall, 0), tuple(sorted(parents))))
    return records


@given(histories(), st.data())
def test_precedence_is_the_strict_causal_past_with_or_without_equivocation(
    records: list[Rec], data: st.DataObject
) -> None:
    a, past = index(*records), pasts(records)
    for x in records:
        for y in records:
            assert a.precedes(y.cid, x.cid) == (y.cid in past[x.cid])
    # a record not yet indexed, on any parents: what precedes_vector answers for ingest
    parents = data.draw(st.lists(st.sampled_from([r.cid for r in records]), unique=True))
    seen = frozenset(parents).union(*(past[p] for p in parents))
    for y in records:
        assert a.precedes_vector(y.cid, a.vector_of(parents), parents) == (y.cid in seen)


def test_a_vector_holds_each_actors_highest_seq_up_to_the_last_actor_in_its_past() -> None:
    g = rec("g", "owner", 1, 1)
    a1, b1 = rec("a1", "A", 1, 2, g), rec("b1", "B", 1, 3, g)
    a2 = rec("a2", "A", 2, 4, a1)
    a = index(g, a1, b1, a2)
    assert [a.nodes[r.cid].vv for r in (g, a1, b1, a2)] == [(1,), (1, 1), (1, 0, 1), (1, 2)]
    assert a.vector_of([a2.cid, b1.cid]) == (1, 2, 1) == a.vector_of([b1.cid, a2.cid])
    assert a.vector_of([]) == ()


def test_only_an_equivocation_makes_the_history_forked() -> None:
    g = rec("g", "owner", 1, 1)
    a1, b1 = rec("a1", "A", 1, 2, g), rec("b1", "B", 1, 3, g)
    a2 = rec("a2", "A", 2, 4, a1, b1)
    a = index(g, a1, b1, a2, a2)  # the same record twice is one record
    assert not a.forked and len(a.nodes) == 4
    a.add(rec("a2'", "A", 2, 5, a1).cid, b"A", 2, Hlc(5, 0), (a1.cid,))
    assert a.forked


class _Reads(dict[CID, Any]):
    """The index's node table, counting what a query reads."""

    def __init__(self, nodes: dict[CID, Any]) -> None:
        super().__init__(nodes)
        self.reads: Counter[CID] = Counter()

    def __getitem__(self, cid: CID) -> Any:
        self.reads[cid] += 1
        return super().__getitem__(cid)


def test_the_walk_of_a_forked_actor_reads_each_later_record_once_and_nothing_older() -> None:
    """An equivocation must not make precedence cost the number of paths or the whole history."""
    old = [rec("old0", "O", 1, 1)]
    for i in range(1, 100):
        old.append(rec(f"old{i}", "O", i + 1, i + 1, old[-1]))
    y, y2 = rec("y", "F", 1, 101, old[-1]), rec("y2", "F", 1, 102, old[-1])  # F equivocates
    ladder, top = [], y2
    for i in range(6):  # six diamonds (each join also names the last): 1560 paths from the top to y2
        left = rec(f"l{i}", "L", i + 1, 103 + 3 * i, top, *ladder[-3:-2])
        right = rec(f"r{i}", "R", i + 1, 103 + 3 * i, top, *ladder[-2:-1])
        top = rec(f"j{i}", "J", i + 1, 104 + 3 * i, left, right, *ladder[-1:])
        ladder += [left, right, top]
    a = index(*old, y, y2, *ladder)
    assert a.forked and a.precedes(y2.cid, top.cid) and a.precedes(old[0].cid, top.cid)
    counted = a.nodes = _Reads(a.nodes)
    assert not a.precedes(y.cid, top.cid)
    assert all(counted.reads[r.cid] <= 2 for r in ladder)
    assert not any(counted.reads[r.cid] for r in old[:-1])
