"""covered / missing / extends / inconsistent (docs/integrity.md §2.4, §2.5) against a reference.

The reference decides ancestry by dynamic programming over a topological numbering (no
walk, no hlc), so it shares no code path with the pruned covered-walk under test. Partial
knowledge is modelled by hiding records from the lookup: a verdict must then equal the
truth or be UNDECIDED, never the opposite.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.errors import IntegrityError
from convgraph.integrity.consistency import (
    Lookup,
    Verdict,
    covered,
    covered_each,
    extends,
    inconsistent,
    missing,
    region,
    self_inconsistent,
)
from convgraph.integrity.statement import ORDER_SLACK_MS, Statement, sign_statement

KEY = SigningKey(bytes(range(32)))
OTHER = SigningKey(bytes(32))
CONV = "c"


@dataclass
class Dag:
    cids: list[CID]  # topological numbering
    parents: dict[CID, tuple[CID, ...]]
    hlc: dict[CID, Hlc]

    def lookup(self, hidden: Iterable[CID] = ()) -> Lookup:
        gone = set(hidden)

        def get(cid: CID) -> tuple[Hlc, tuple[CID, ...]] | None:
            if cid in gone or cid not in self.parents:
                return None
            return self.hlc[cid], self.parents[cid]

        return get

    def below(self, heads: Iterable[CID]) -> set[CID]:
        """Reference: the heads and all their ancestors."""
        anc: dict[CID, set[CID]] = {}
        for c in self.cids:
            acc = {c}
            for p in self.parents[c]:
                acc |= anc[p]
            anc[c] = acc
        return {a for h in heads for a in anc[h]}

    def heads_of(self, members: set[CID]) -> set[CID]:
        return {c for c in members if not any(c in self.parents[o] for o in members)}


@st.composite
def dags(draw: st.DrawFn, max_nodes: int = 25) -> Dag:
    n = draw(st.integers(1, max_nodes))
    cids = [CID.of_record(b"node %d" % i) for i in range(n)]
    dag = Dag(cids, {}, {})
    for i, cid in enumerate(cids):
        chosen = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        parents = tuple(sorted(cids[j] for j in chosen))
        known = [dag.hlc[p] for p in parents]
        if not known:
            stamp = Hlc(draw(st.integers(0, 3)), draw(st.integers(0, 2)))
        else:
            top = max(known)
            stamp = Hlc(top.wall_ms, top.counter + 1) if draw(st.booleans()) else Hlc(
                top.wall_ms + draw(st.integers(1, 2)), draw(st.integers(0, 2))
            )
        dag.parents[cid] = parents
        dag.hlc[cid] = stamp
    return dag


def downsets(dag: Dag, data: st.DataObject, k: int) -> list[set[CID]]:
    """`k` growing causally closed sets (an honest replica's states over time)."""
    order = list(dag.cids)  # any prefix of a topological order is closed under parents
    cuts = sorted(data.draw(st.lists(st.integers(0, len(order)), min_size=k, max_size=k)))
    return [set(order[:c]) for c in cuts]


def state(
    members: set[CID], dag: Dag, time_ms: int, stored: Iterable[CID] = (), key: SigningKey = KEY
) -> Statement:
    return sign_statement(key, CONV, len(members), dag.heads_of(members), time_ms, stored=stored)


def truth(x: CID, heads: Iterable[CID], dag: Dag) -> Verdict:
    return Verdict.YES if x in dag.below(heads) else Verdict.NO


@given(st.data())
def test_covered_agrees_with_the_reference_and_is_never_wrong_when_records_are_hidden(
    data: st.DataObject,
) -> None:
    dag = data.draw(dags())
    heads = data.draw(st.sets(st.sampled_from(dag.cids), max_size=3))
    x = data.draw(st.sampled_from(dag.cids))
    assert covered(x, heads, dag.lookup()) is truth(x, heads, dag)
    hidden = data.draw(st.sets(st.sampled_from(dag.cids)))
    got = covered(x, heads, dag.lookup(hidden))
    assert got in (truth(x, heads, dag), Verdict.UNDECIDED)
    if x in heads:
        assert got is Verdict.YES
    # exactly the region decides: holding only it gives the verdict of holding everything
    only = region(heads, {x}, dag.lookup())
    assert covered(x, heads, dag.lookup(set(dag.cids) - only)) is truth(x, heads, dag)


@given(st.data())
def test_hiding_a_record_the_walk_needs_makes_a_no_undecided(data: st.DataObject) -> None:
    dag = data.draw(dags())
    heads = data.draw(st.sets(st.sampled_from(dag.cids), min_size=1, max_size=3))
    x = data.draw(st.sampled_from(dag.cids))
    if truth(x, heads, dag) is Verdict.YES:
        return
    needed = sorted(region(heads, {x}, dag.lookup()))
    gone = data.draw(st.sampled_from(needed))
    assert covered(x, heads, dag.lookup({gone})) is Verdict.UNDECIDED


@given(st.data())
def test_honest_monotone_statements_are_never_inconsistent(data: st.DataObject) -> None:
    dag = data.draw(dags())
    k = data.draw(st.integers(2, 4))
    sets = downsets(dag, data, k)
    times = sorted(data.draw(st.lists(st.integers(0, 5_000), min_size=k, max_size=k)))
    statements = []
    for i, members in enumerate(sets):
        # a receipt names records of its own state (stored after being taken is impossible)
        stored = data.draw(st.sets(st.sampled_from(sorted(members)), max_size=2)) if members else set()
        statements.append(state(members, dag, times[i], stored))
    hidden = data.draw(st.sets(st.sampled_from(dag.cids), max_size=3))
    for lookup in (dag.lookup(), dag.lookup(hidden)):
        for i, a in enumerate(statements):
            assert self_inconsistent(a, lookup) is not Verdict.YES
            for b in statements[i:]:
                assert inconsistent(a, b, lookup) is not Verdict.YES
                assert inconsistent(b, a, lookup) is not Verdict.YES
                assert extends(b, a, lookup) is not Verdict.NO
    for i, a in enumerate(statements):
        for b in statements[i:]:
            assert extends(b, a, dag.lookup()) is Verdict.YES
            assert inconsistent(a, b, dag.lookup()) is Verdict.NO


@given(st.data())
def test_a_later_statement_omitting_a_receipted_record_is_always_caught(data: st.DataObject) -> None:
    dag = data.draw(dags())
    x = data.draw(st.sampled_from(dag.cids))
    earlier_set = dag.below({x})
    receipt = state(earlier_set, dag, 1_000, stored={x})
    # any state of the full DAG that lacks x: everything that is not x or a descendant of x
    lacking = {c for c in dag.cids if x not in dag.below({c})}
    lacking = data.draw(st.sampled_from([lacking, set(sorted(lacking)[: len(lacking) // 2])]))
    lacking = {c for c in lacking if dag.below({c}) <= lacking}  # keep it causally closed
    later = state(lacking, dag, 1_000 + ORDER_SLACK_MS + data.draw(st.integers(1, 10_000)))
    lookup = dag.lookup()
    gone, decided = missing(receipt, later, lookup)
    assert x in gone and decided
    assert extends(later, receipt, lookup) is Verdict.NO
    assert inconsistent(receipt, later, lookup) is Verdict.YES
    assert inconsistent(later, receipt, lookup) is Verdict.YES
    # and a statement whose own heads omit what it receipts is self-inconsistent
    liar = state(lacking, dag, 5, stored={x})
    assert self_inconsistent(liar, lookup) is Verdict.YES


def test_within_the_slack_only_mutual_non_extension_is_inconsistent() -> None:
    dag = Dag([], {}, {})
    a, b, c = (CID.of_record(b"%d" % i) for i in range(3))
    for cid, stamp in ((a, Hlc(1, 0)), (b, Hlc(2, 0)), (c, Hlc(2, 1))):
        dag.cids.append(cid)
        dag.parents[cid] = (a,) if cid != a else ()
        dag.hlc[cid] = stamp
    lookup = dag.lookup()
    small = state({a}, dag, 10_000)
    left = state({a, b}, dag, 10_000 + ORDER_SLACK_MS)  # not later: exactly the slack
    right = state({a, c}, dag, 10_000)
    assert inconsistent(left, small, lookup) is Verdict.NO  # left extends small
    assert inconsistent(small, left, lookup) is Verdict.NO  # order of arguments is irrelevant
    assert inconsistent(left, right, lookup) is Verdict.YES  # a fork: neither extends
    shrunk = state({a}, dag, left.time_ms + ORDER_SLACK_MS + 1)
    assert inconsistent(left, shrunk, lookup) is Verdict.YES  # later and not extending
    assert inconsistent(shrunk, left, lookup) is Verdict.YES
    # the count fell (2 -> 1): decided even when the records are not held
    assert inconsistent(left, shrunk, dag.lookup({a, b})) is Verdict.YES
    same_count = state({a, c}, dag, left.time_ms + ORDER_SLACK_MS + 1)
    assert inconsistent(left, same_count, lookup) is Verdict.YES  # later, lacks b
    assert inconsistent(left, same_count, dag.lookup({b})) is Verdict.UNDECIDED


def test_a_smaller_count_alone_is_not_extending() -> None:
    x = CID.of_record(b"x")
    dag = Dag([x], {x: ()}, {x: Hlc(1, 0)})
    earlier = sign_statement(KEY, CONV, 5, [x], 0)
    later = sign_statement(KEY, CONV, 4, [x], 5_000)
    assert missing(earlier, later, dag.lookup()) == (frozenset(), True)
    assert extends(later, earlier, dag.lookup()) is Verdict.NO
    assert extends(later, earlier, dag.lookup({x})) is Verdict.NO


def test_an_unheld_target_is_undecided_unless_it_is_a_head() -> None:
    x, y = CID.of_record(b"x"), CID.of_record(b"y")
    dag = Dag([x, y], {x: (), y: (x,)}, {x: Hlc(1, 0), y: Hlc(2, 0)})
    assert covered(x, [y], dag.lookup({x})) is Verdict.UNDECIDED  # the walk needs x's hlc
    assert covered(x, [x], dag.lookup({x})) is Verdict.YES
    assert covered(x, [y], dag.lookup({y})) is Verdict.UNDECIDED  # a head not held
    assert covered(x, [], dag.lookup()) is Verdict.NO


def test_a_parent_whose_hlc_is_not_below_its_child_leaves_the_walk_undecided() -> None:
    # records that break docs/format.md §11.2 are refused at ingest; a bundle may still
    # carry them, and the hlc pruning would then be unsound
    x, p, h = (CID.of_record(b"%d" % i) for i in range(3))
    dag = Dag([x, p, h], {x: (), p: (), h: (p,)}, {x: Hlc(5, 0), p: Hlc(9, 0), h: Hlc(6, 0)})
    assert covered(x, [h], dag.lookup()) is Verdict.UNDECIDED
    dag.hlc[p] = Hlc(5, 1)
    assert covered(x, [h], dag.lookup()) is Verdict.NO


def test_statements_of_different_keys_or_conversations_are_refused() -> None:
    a = sign_statement(KEY, CONV, 0, [], 0)
    with pytest.raises(IntegrityError):
        extends(a, sign_statement(OTHER, CONV, 0, [], 0), lambda _c: None)
    with pytest.raises(IntegrityError):
        inconsistent(a, sign_statement(KEY, "d", 0, [], 0), lambda _c: None)


@st.composite
def wild_dags(draw: st.DrawFn, max_nodes: int = 14) -> Dag:
    """A DAG whose hlcs are arbitrary: records breaking docs/format.md §11.2, as a bundle may hold."""
    n = draw(st.integers(1, max_nodes))
    cids = [CID.of_record(b"wild %d" % i) for i in range(n)]
    dag = Dag(cids, {}, {})
    for i, cid in enumerate(cids):
        chosen = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        dag.parents[cid] = tuple(sorted(cids[j] for j in chosen))
        dag.hlc[cid] = Hlc(draw(st.integers(0, 6)), 0)
    return dag


@given(st.data())
def test_one_walk_for_many_targets_decides_each_as_its_own_walk_would(data: st.DataObject) -> None:
    dag = data.draw(wild_dags())
    heads = data.draw(st.sets(st.sampled_from(dag.cids), max_size=3))
    xs = data.draw(st.sets(st.sampled_from(dag.cids), min_size=1, max_size=5))
    hidden = data.draw(st.sets(st.sampled_from(dag.cids), max_size=2))
    lookup = dag.lookup(hidden)
    together = covered_each(xs, heads, lookup)
    for x in xs:
        assert together[x] is covered(x, heads, lookup) is _one_walk(x, heads, lookup)


def _one_walk(x: CID, heads: Iterable[CID], lookup: Lookup) -> Verdict:
    """docs/integrity.md §2.4 steps 1-4, literally, for one target."""
    heads = set(heads)
    if x in heads:
        return Verdict.YES
    mine = lookup(x)
    if mine is None:
        return Verdict.UNDECIDED
    reached, gap, stack, expanded = set(heads), False, list(heads), set()
    while stack:
        cid = stack.pop()
        meta = lookup(cid)
        if meta is None:
            gap = True
            continue
        if cid in expanded or meta[0] <= mine[0]:
            continue
        expanded.add(cid)
        for p in meta[1]:
            parent = lookup(p)
            gap |= parent is not None and parent[0] >= meta[0]
            reached.add(p)
            stack.append(p)
    if x in reached:
        return Verdict.YES
    return Verdict.UNDECIDED if gap else Verdict.NO


def test_a_broken_hlc_order_elsewhere_does_not_make_a_target_found() -> None:
    # h(10) -> r2(3) -> r(7) -> x(5): x's own walk stops at r2 (3 <= 5) and x is not covered;
    # a walk expanding down to y(1) reaches x only through r2, so x must still be not covered
    h, r2, r, x, y = (CID.of_record(b"b%d" % i) for i in range(5))
    dag = Dag([y, x, r, r2, h], {y: (), x: (), r: (x,), r2: (r,), h: (r2,)},
              {y: Hlc(1, 0), x: Hlc(5, 0), r: Hlc(7, 0), r2: Hlc(3, 0), h: Hlc(10, 0)})
    lookup = dag.lookup()
    assert covered(x, [h], lookup) is Verdict.NO
    assert covered_each({x, y}, [h], lookup) == {x: Verdict.NO, y: Verdict.UNDECIDED}


def test_self_consistency_is_no_when_decided_and_undecided_when_a_stored_record_is_unknown() -> None:
    key = SigningKey(bytes(32))
    root, child, stranger = (CID.of_record(x) for x in (b"root", b"child", b"stranger"))
    held = {root: (Hlc(1, 0), ()), child: (Hlc(2, 0), (root,))}
    s = sign_statement(key, "c", 2, [child], 10, stored=[root])
    assert self_inconsistent(s, held.get) is Verdict.NO
    unknown = sign_statement(key, "c", 2, [child], 10, stored=[stranger])
    assert self_inconsistent(unknown, held.get) is Verdict.UNDECIDED
    # no walk runs when every target is a head or unknown: the region is the heads and targets
    assert region([child], [child, stranger], held.get) == {child, stranger}
    other = sign_statement(SigningKey(bytes([1]) * 32), "c", 2, [child], 10)
    with pytest.raises(IntegrityError) as caught:
        missing(s, other, held.get)
    assert str(caught.value) == "statements by different keys or about different conversations are not comparable"


# Found by mutation testing (issue 30 §4): the walk's order, and the region's edge.


def _two_paths(lo: CID, hi: CID, stamps: dict[str, Hlc]) -> tuple[Dag, CID, CID, CID]:
    """x <- m <- a <- hi and m <- lo, and x0 apart: m is reached at lo's level and, through a, at a's.

    lo's hlc is below m's (lo breaks docs/format.md §11.2, as a bundle's record may); x0 is
    a second target whose low hlc lowers the walk's floor below lo's.
    """
    x0, x, m, a = (CID.of_record(b"two paths %s" % n) for n in (b"x0", b"x", b"m", b"a"))
    dag = Dag([x0, x, m, a, hi, lo], {x0: (), x: (), m: (x,), a: (m,), hi: (a,), lo: (m,)},
              {c: stamps[n] for c, n in ((x0, "x0"), (x, "x"), (m, "m"), (a, "a"), (hi, "hi"), (lo, "lo"))})
    return dag, x0, x, m


@pytest.mark.parametrize("stamps", [
    # levels differ in wall time
    {"x0": Hlc(5, 0), "x": Hlc(50, 0), "m": Hlc(60, 0), "a": Hlc(90, 0), "hi": Hlc(100, 0), "lo": Hlc(20, 0)},
    # levels differ only in the counter
    {"x0": Hlc(50, 0), "x": Hlc(100, 5), "m": Hlc(100, 6), "a": Hlc(100, 8), "hi": Hlc(100, 9), "lo": Hlc(100, 3)},
])
@pytest.mark.parametrize("swap", [False, True])
def test_a_record_reached_at_two_levels_is_expanded_at_the_higher_one(
    stamps: dict[str, Hlc], swap: bool
) -> None:
    # One walk for x0 and x: popping m at lo's level (above the floor, x0's hlc) before a
    # raises it would reach x only at lo's level, below x's hlc, and mark m done, so the
    # higher level through a is lost: x wrongly NO, or (m not held) a gap too low, NO again.
    # `swap` gives the low head the other CID, so either head may sort first on its bytes.
    one, two = CID.of_record(b"head one"), CID.of_record(b"head two")
    lo, hi = (two, one) if swap else (one, two)
    dag, x0, x, m = _two_paths(lo, hi, stamps)
    for lookup in (dag.lookup(), dag.lookup({m})):
        assert covered_each({x0, x}, [lo, hi], lookup) == {t: _one_walk(t, [lo, hi], lookup) for t in (x0, x)}
    assert covered_each({x0, x}, [lo, hi], dag.lookup()) == {x0: Verdict.UNDECIDED, x: Verdict.YES}  # lo's broken order: a gap above x0
    assert covered_each({x0, x}, [lo, hi], dag.lookup({m})) == {x0: Verdict.UNDECIDED, x: Verdict.UNDECIDED}
    assert region([lo, hi], {x0, x}, dag.lookup()) == set(dag.cids)


def test_the_region_stops_at_a_record_whose_hlc_is_the_targets() -> None:
    # h(10) -> x(5) -> y(3): x's walk does not expand x (5 <= 5), so y decides nothing
    h, x, y = (CID.of_record(b"edge %d" % i) for i in range(3))
    dag = Dag([y, x, h], {y: (), x: (y,), h: (x,)}, {y: Hlc(3, 0), x: Hlc(5, 0), h: Hlc(10, 0)})
    assert region([h], {x}, dag.lookup()) == {h, x}
    assert covered(x, [h], dag.lookup({y})) is Verdict.YES
    # a record at the target's hlc but off its path is not expanded either
    z = CID.of_record(b"edge z")
    dag.cids.insert(2, z)
    dag.parents[z], dag.hlc[z] = (y,), Hlc(5, 0)
    dag.parents[h] = (x, z)
    assert region([h], {x}, dag.lookup()) == {h, x, z}


def _dag(edges: dict[str, tuple[str, ...]], stamps: dict[str, int]) -> tuple[Dag, dict[str, CID]]:
    """A Dag of named records, listed children after parents; a name without a stamp is not held."""
    ids = {n: CID.of_record(b"named " + n.encode()) for n in edges}
    dag = Dag([ids[n] for n in edges if n in stamps], {}, {})
    for n, ps in edges.items():
        if n in stamps:
            dag.parents[ids[n]], dag.hlc[ids[n]] = tuple(ids[p] for p in ps), Hlc(stamps[n], 0)
    return dag, ids


def _agrees(dag: Dag, ids: dict[str, CID], heads: list[str], targets: list[str]) -> dict[str, Verdict]:
    lookup, hs = dag.lookup(), [ids[h] for h in heads]
    got = covered_each({ids[t] for t in targets}, hs, lookup)
    assert got == {ids[t]: _one_walk(ids[t], hs, lookup) for t in targets}
    return {t: got[ids[t]] for t in targets}


def test_a_lower_gap_met_later_does_not_lower_the_gap() -> None:
    # h(100) -> p(150) breaks the hlc order at level 100; later a(30) meets another break
    # (q(40)) and a record not held (m), both at level 30: the gap stays 100, above x(50)
    dag, ids = _dag({"x0": (), "x": (), "p": (), "q": (), "m": (), "a": ("m", "q"), "h": ("a", "p")},
                    {"x0": 5, "x": 50, "p": 150, "q": 40, "a": 30, "h": 100})
    assert _agrees(dag, ids, ["h"], ["x0", "x"]) == {"x0": Verdict.UNDECIDED, "x": Verdict.UNDECIDED}


def test_the_walk_goes_on_past_a_record_not_held() -> None:
    # h(100) -> m (not held) and h -> a(90) -> b(70) -> x(50): x is found all the same
    dag, ids = _dag({"x": (), "b": ("x",), "a": ("b",), "m": (), "h": ("a", "m")},
                    {"x": 50, "b": 70, "a": 90, "h": 100})
    assert _agrees(dag, ids, ["h"], ["x"]) == {"x": Verdict.YES}


def test_a_lower_path_met_later_does_not_lower_a_queued_level() -> None:
    # p(60) is queued at level 90 through a; b(20), popped before p (level 95 through c),
    # reaches p at level 20: p must still be expanded at 90, so x(50) is reached above its hlc
    dag, ids = _dag({"x0": (), "x": (), "p": ("x",), "a": ("p",), "b": ("p",), "c": ("b",), "h": ("a", "c")},
                    {"x0": 5, "x": 50, "p": 60, "a": 90, "b": 20, "c": 95, "h": 100})
    assert _agrees(dag, ids, ["h"], ["x0", "x"]) == {"x0": Verdict.UNDECIDED, "x": Verdict.YES}


def test_the_walk_goes_on_past_a_stale_copy_in_its_queue() -> None:
    # p(20) is queued at 30 through b, then at 90 through c(95) -> a(90); once p is expanded,
    # its stale copy at 30 comes out before y(10) at 20, and z(8) below y must still be found
    dag, ids = _dag({"z": (), "y": ("z",), "p": ("y",), "b": ("p",), "a": ("p",), "c": ("a",), "h": ("b", "c")},
                    {"z": 8, "y": 10, "p": 20, "b": 30, "a": 90, "c": 95, "h": 100})
    assert _agrees(dag, ids, ["h"], ["z"]) == {"z": Verdict.YES}


def test_a_parent_as_recent_as_its_child_breaks_the_order() -> None:
    # docs/format.md §11.2 wants a parent's hlc strictly below its child's: h(6) -> p(6) leaves
    # x(5), which the walk does not reach, undecided
    dag, ids = _dag({"x": (), "p": (), "h": ("p",)}, {"x": 5, "p": 6, "h": 6})
    assert _agrees(dag, ids, ["h"], ["x"]) == {"x": Verdict.UNDECIDED}
