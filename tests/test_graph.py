"""DAG algorithms (`convgraph.graph`) against naive reference implementations.

The references compute ancestry by dynamic programming over a topological numbering of
the nodes (no walk at all), so they share no code path with the iterative walks under
test. Every search is run without `hlc_of`, with a full `hlc_of` (pruning) and with a
partial one (pruning where a stamp is known): all three must give the reference answer.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.graph import (
    ancestors,
    canonical_order,
    closure,
    extends,
    heads,
    is_ancestor,
    missing_ancestors,
    reaches,
)

STRANGER = CID.of_record(b"a record nobody names")


@dataclass
class Dag:
    """Known nodes in a topological numbering, their parents, stamps and unknown parents."""

    cids: list[CID]
    parents: dict[CID, tuple[CID, ...]]
    hlc: dict[CID, Hlc]
    unknown: list[CID]
    actor: dict[CID, bytes] = field(default_factory=dict)
    partial_hlc: dict[CID, Hlc] = field(default_factory=dict)

    def parents_of(self, cid: CID) -> tuple[CID, ...] | None:
        return self.parents.get(cid)

    @property
    def pool(self) -> list[CID]:
        """Everything a query may name: known, unknown-but-named and never-named CIDs."""
        return [*self.cids, *self.unknown, STRANGER]

    def hlc_variants(self) -> list[Callable[[CID], Hlc | None] | None]:
        return [None, self.hlc.get, self.partial_hlc.get]


@st.composite
def dags(draw: st.DrawFn, max_nodes: int = 30) -> Dag:
    """A random DAG: each node's parents are earlier nodes; hlc strictly increases along edges."""
    n = draw(st.integers(0, max_nodes))
    unknown = [CID.of_record(b"unknown %d" % i) for i in range(draw(st.integers(0, 3)))]
    cids = [CID.of_record(b"node %d" % i) for i in range(n)]
    dag = Dag(cids, {}, {}, unknown)
    for i, cid in enumerate(cids):
        chosen = draw(st.lists(st.integers(0, i - 1), max_size=4, unique=True)) if i else []
        parents = [cids[j] for j in chosen]
        if unknown and draw(st.integers(0, 4)) == 0:
            parents.append(draw(st.sampled_from(unknown)))
        known = [dag.hlc[p] for p in parents if p in dag.hlc]
        if not known:
            stamp = Hlc(draw(st.integers(0, 3)), draw(st.integers(0, 2)))
        else:
            base, bump = max(known), draw(st.integers(0, 2))
            stamp = Hlc(base.wall_ms, base.counter + 1) if bump == 0 else Hlc(
                base.wall_ms + bump, draw(st.integers(0, 2))
            )
        dag.parents[cid] = tuple(sorted(set(parents)))
        dag.hlc[cid] = stamp
        dag.actor[cid] = bytes([draw(st.integers(0, 2))]) * 32
        if draw(st.booleans()):
            dag.partial_hlc[cid] = stamp
    return dag


def ref_named_ancestors(dag: Dag) -> dict[CID, set[CID]]:
    """For each known node: every CID named as a parent by it or by a known ancestor."""
    out: dict[CID, set[CID]] = {}
    for cid in dag.cids:  # topological numbering: parents are already done
        acc: set[CID] = set()
        for p in dag.parents[cid]:
            acc.add(p)
            acc |= out.get(p, set())
        out[cid] = acc
    return out


def ref_ancestors(dag: Dag, start: Iterable[CID]) -> set[CID]:
    named = ref_named_ancestors(dag)
    return {a for s in start for a in named.get(s, set()) if a in dag.parents}


def ref_missing(dag: Dag, start: Iterable[CID]) -> set[CID]:
    named = ref_named_ancestors(dag)
    out: set[CID] = set()
    for s in start:
        if s not in dag.parents:
            out.add(s)  # an unknown start is itself what a fetch would need
        out |= {a for a in named.get(s, set()) if a not in dag.parents}
    return out


def ref_reaches(dag: Dag, sources: Iterable[CID], targets: Iterable[CID]) -> set[CID]:
    named = ref_named_ancestors(dag)
    below = {x for s in sources for x in (s, *named.get(s, set()))}
    return set(targets) & below


def ref_heads(dag: Dag, cids: Iterable[CID]) -> set[CID]:
    members = set(cids)
    return {c for c in members if not any(c in (dag.parents.get(o) or ()) for o in members)}


subsets = st.lists(st.integers(0, 10_000), max_size=6)


def pick(dag: Dag, idx: list[int]) -> list[CID]:
    pool = dag.pool
    return [pool[i % len(pool)] for i in idx]


# ---------------------------------------------------------------- property tests


@given(dags(), subsets)
def test_ancestors_matches_reference(dag: Dag, idx: list[int]) -> None:
    start = pick(dag, idx)
    got = ancestors(start, dag.parents_of)
    assert got == ref_ancestors(dag, start)
    assert got <= set(dag.cids)


@given(dags(), subsets)
def test_missing_ancestors_matches_reference(dag: Dag, idx: list[int]) -> None:
    start = pick(dag, idx)
    assert missing_ancestors(start, dag.parents_of) == ref_missing(dag, start)


@given(dags(), subsets)
def test_closure_matches_reference(dag: Dag, idx: list[int]) -> None:
    start = pick(dag, idx)
    got = closure(start, dag.parents_of)
    held = {s for s in start if s in dag.parents} | ref_ancestors(dag, start)
    assert got.held == held
    assert got.missing == ref_missing(dag, start)
    assert got.parents == {p for c in held for p in dag.parents[c]}


@given(dags(), subsets)
def test_heads_matches_reference(dag: Dag, idx: list[int]) -> None:
    members = pick(dag, idx)
    assert heads(members, dag.parents_of) == ref_heads(dag, members)
    everything = heads(dag.cids, dag.parents_of)
    assert everything == ref_heads(dag, dag.cids)
    # every known node is a head or an ancestor of one
    assert set(dag.cids) == everything | ref_ancestors(dag, everything)


@given(dags(), subsets, subsets)
def test_reaches_matches_reference_with_and_without_pruning(
    dag: Dag, src: list[int], dst: list[int]
) -> None:
    sources, targets = pick(dag, src), pick(dag, dst)
    want = ref_reaches(dag, sources, targets)
    for hlc_of in dag.hlc_variants():
        assert reaches(sources, targets, dag.parents_of, hlc_of) == want


@given(dags(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), max_size=8))
def test_is_ancestor_matches_reference_with_and_without_pruning(
    dag: Dag, pairs: list[tuple[int, int]]
) -> None:
    named = ref_named_ancestors(dag)
    for i, j in pairs:
        a, b = pick(dag, [i, j])
        want = a in named.get(b, set())
        for hlc_of in dag.hlc_variants():
            assert is_ancestor(a, b, dag.parents_of, hlc_of) is want
        assert is_ancestor(a, a, dag.parents_of) is False


@given(dags(), subsets, subsets)
def test_extends_matches_reference_with_and_without_pruning(
    dag: Dag, new_idx: list[int], old_idx: list[int]
) -> None:
    new, old = pick(dag, new_idx), pick(dag, old_idx)
    want = ref_reaches(dag, new, old) == set(old)
    for hlc_of in dag.hlc_variants():
        assert extends(new, old, dag.parents_of, hlc_of) is want
        assert extends(new, new, dag.parents_of, hlc_of) is True
        assert extends(new, [], dag.parents_of, hlc_of) is True


@dataclass(frozen=True)
class Node:
    cid: CID
    hlc: Hlc
    actor: bytes

    @property
    def order_key(self) -> tuple[int, int, bytes, bytes]:
        return (self.hlc.wall_ms, self.hlc.counter, self.actor, bytes(self.cid))


@given(dags(), st.randoms(use_true_random=False))
def test_canonical_order_is_total_and_topological(dag: Dag, rnd: random.Random) -> None:
    nodes = [Node(c, dag.hlc[c], dag.actor[c]) for c in dag.cids]
    shuffled = list(nodes)
    rnd.shuffle(shuffled)
    got = canonical_order(shuffled)
    # naive reference: repeatedly take the smallest remaining key
    remaining, want = list(nodes), []
    while remaining:
        smallest = min(remaining, key=lambda n: (n.hlc.wall_ms, n.hlc.counter, n.actor, bytes(n.cid)))
        remaining.remove(smallest)
        want.append(smallest)
    assert got == want
    assert canonical_order(reversed(got)) == got  # independent of arrival order
    position = {n.cid: i for i, n in enumerate(got)}
    for n in got:
        for p in dag.parents[n.cid]:
            if p in position:
                assert position[p] < position[n.cid]


# ---------------------------------------------------------------- pinned cases


def _dag(edges: dict[str, tuple[str, ...]], hlcs: dict[str, int] | None = None) -> tuple[
    dict[str, CID], Callable[[CID], tuple[CID, ...] | None], Callable[[CID], Hlc | None]
]:
    names = {*edges, *(p for ps in edges.values() for p in ps)}
    cid = {n: CID.of_record(n.encode()) for n in sorted(names)}
    parents = {cid[n]: tuple(cid[p] for p in ps) for n, ps in edges.items()}
    stamps = {cid[n]: Hlc(w, 0) for n, w in (hlcs or {}).items()}
    return cid, parents.get, stamps.get


def test_diamond() -> None:
    c, parents_of, hlc_of = _dag(
        {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c")}, {"a": 1, "b": 2, "c": 2, "d": 3}
    )
    a, b, cc, d = c["a"], c["b"], c["c"], c["d"]
    assert heads([a, b, cc, d], parents_of) == {d}
    assert heads([a, b, cc], parents_of) == {b, cc}
    assert ancestors([d], parents_of) == {a, b, cc}
    assert ancestors([b], parents_of) == {a}
    assert ancestors([a], parents_of) == set()
    assert missing_ancestors([d], parents_of) == set()
    for h in (None, hlc_of):
        assert is_ancestor(a, d, parents_of, h)
        assert is_ancestor(b, d, parents_of, h)
        assert not is_ancestor(b, cc, parents_of, h)
        assert not is_ancestor(d, a, parents_of, h)
        assert reaches([b], [a, cc, d], parents_of, h) == {a}
        assert reaches([b, cc], [b, cc], parents_of, h) == {b, cc}
        assert extends([d], [b, cc], parents_of, h)
        assert extends([b, cc], [a], parents_of, h)
        assert not extends([b], [cc], parents_of, h)
        assert not extends([b], [b, cc], parents_of, h)
        assert not extends([a], [d], parents_of, h)


def test_disjoint_roots() -> None:
    c, parents_of, hlc_of = _dag(
        {"r1": (), "x1": ("r1",), "r2": (), "x2": ("r2",)}, {"r1": 1, "x1": 2, "r2": 1, "x2": 5}
    )
    assert heads(list(c.values()), parents_of) == {c["x1"], c["x2"]}
    assert ancestors([c["x1"]], parents_of) == {c["r1"]}
    assert ancestors([c["x1"], c["x2"]], parents_of) == {c["r1"], c["r2"]}
    for h in (None, hlc_of):
        assert not is_ancestor(c["r2"], c["x1"], parents_of, h)
        assert not extends([c["x1"]], [c["x2"]], parents_of, h)
        assert not extends([c["x2"]], [c["x1"]], parents_of, h)
        assert extends([c["x1"], c["x2"]], [c["r1"], c["r2"]], parents_of, h)


def test_unknown_parents() -> None:
    # "u" and "v" are named as parents but not held
    c, parents_of, hlc_of = _dag({"x": ("u",), "y": ("x", "v"), "z": ("y",)}, {"x": 5, "y": 6, "z": 7})
    u, v, x, y, z = (c[k] for k in "uvxyz")
    assert ancestors([z], parents_of) == {x, y}  # known records only
    assert missing_ancestors([z], parents_of) == {u, v}
    assert missing_ancestors([x], parents_of) == {u}
    assert missing_ancestors([u], parents_of) == {u}
    assert heads([x, y, z, u], parents_of) == {z}
    for h in (None, hlc_of):
        # an unknown record named as a parent is still reached by name
        assert is_ancestor(u, z, parents_of, h)
        assert is_ancestor(v, y, parents_of, h)
        assert not is_ancestor(v, x, parents_of, h)
        assert not is_ancestor(z, u, parents_of, h)
        assert extends([z], [u, v], parents_of, h)
        assert not extends([x], [v], parents_of, h)
        assert reaches([u], [u], parents_of, h) == {u}
        assert reaches([STRANGER], [x], parents_of, h) == set()


def test_is_ancestor_of_itself_is_false() -> None:
    c, parents_of, hlc_of = _dag({"a": (), "b": ("a",)}, {"a": 1, "b": 2})
    for h in (None, hlc_of):
        assert not is_ancestor(c["a"], c["a"], parents_of, h)
        assert not is_ancestor(c["b"], c["b"], parents_of, h)
        assert not is_ancestor(STRANGER, STRANGER, parents_of, h)


def test_extends_with_empty_old_and_with_new_equal_old() -> None:
    c, parents_of, hlc_of = _dag({"a": (), "b": ("a",), "c": ("a",)}, {"a": 1, "b": 2, "c": 2})
    for h in (None, hlc_of):
        assert extends([], [], parents_of, h)
        assert extends([c["b"]], [], parents_of, h)
        assert extends([STRANGER], [], parents_of, h)
        assert extends([c["b"], c["c"]], [c["b"], c["c"]], parents_of, h)
        assert extends([c["a"]], [c["a"]], parents_of, h)
        assert extends([STRANGER], [STRANGER], parents_of, h)
        assert not extends([], [c["a"]], parents_of, h)
        assert extends([c["b"]], [c["a"], c["a"]], parents_of, h)  # duplicates in old


def test_hlc_pruning_stops_the_walk_early() -> None:
    # a chain of 2000 records, and a head that merges the chain's tip with a late side record
    n = 2000
    cids = [fake_cid(i) for i in range(n + 2)]
    parents = {cids[0]: ()}
    for i in range(1, n):
        parents[cids[i]] = (cids[i - 1],)
    side, head = cids[n], cids[n + 1]
    parents[side] = (cids[n - 10],)
    parents[head] = (cids[n - 1], side)
    stamps = {c: Hlc(i, 0) for i, c in enumerate(cids)}
    calls = 0

    def counting(cid: CID) -> tuple[CID, ...] | None:
        nonlocal calls
        calls += 1
        return parents.get(cid)

    # `side` is not an ancestor of the chain tip; without pruning the whole chain is walked
    assert not is_ancestor(side, cids[n - 1], counting)
    unpruned, calls = calls, 0
    assert not is_ancestor(side, cids[n - 1], counting, stamps.get)
    assert unpruned >= n - 1
    assert calls <= 15
    calls = 0
    assert is_ancestor(cids[n - 5], head, counting, stamps.get)
    assert calls <= 15


# ---------------------------------------------------------------- scale

_FAKE_PREFIX = b"\x01\x71\x12\x20"


def fake_cid(i: int) -> CID:
    return CID(_FAKE_PREFIX + i.to_bytes(32, "big"))


def test_a_million_records() -> None:
    """Two interleaved chains that merge every 1000 records; the last record merges both."""
    n = 1_000_000
    t0 = time.perf_counter()
    cids = [CID(_FAKE_PREFIX + i.to_bytes(32, "big")) for i in range(n)]
    parents: dict[CID, tuple[CID, ...]] = {cids[0]: ()}
    tip_a = tip_b = cids[0]
    for i in range(1, n):
        cid = cids[i]
        if i % 1000 == 0 or i == n - 1:
            parents[cid] = (tip_a, tip_b)
            tip_a = tip_b = cid
        elif i % 2:
            parents[cid] = (tip_a,)
            tip_a = cid
        else:
            parents[cid] = (tip_b,)
            tip_b = cid
    first, last, middle = cids[0], cids[-1], cids[n // 2 + 1]
    del cids

    def hlc_of(cid: CID) -> Hlc | None:  # the fake CID's digest is its number, its hlc
        return Hlc(int.from_bytes(bytes(cid)[4:], "big"), 0) if cid in parents else None

    built = time.perf_counter() - t0
    t1 = time.perf_counter()
    parents_of = parents.get
    assert len(ancestors([last], parents_of)) == n - 1
    assert is_ancestor(first, last, parents_of, hlc_of)
    assert not is_ancestor(last, first, parents_of, hlc_of)
    assert extends([last], [first, middle], parents_of, hlc_of)
    assert not extends([middle], [last], parents_of, hlc_of)  # pruned at once: last is newest
    assert missing_ancestors([last], parents_of) == set()
    walked = time.perf_counter() - t1
    # linear, not timed: a quadratic walk would run into pytest's timeout instead
    print(f"1M-record DAG: build {built:.1f}s, walks {walked:.1f}s")
