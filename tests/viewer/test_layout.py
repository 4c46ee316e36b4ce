"""The DAG layout: lanes per branch and per concurrent head, an edge per held parent."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from convgraph.viewer.layout import CONCURRENT, Layout, Point, layout

A, B = b"A" * 32, b"B" * 32


def _lanes(drawn: Layout[str]) -> dict[str, int]:
    return {n.cid: n.lane for n in drawn.nodes}


def test_a_line_stays_in_one_lane() -> None:
    drawn = layout([Point("g", (), A), Point("m1", ("g",), A), Point("m2", ("m1",), B)])
    assert set(_lanes(drawn).values()) == {0}
    assert [n.opens for n in drawn.nodes] == [None, None, None]
    assert drawn.authors == (A, B)
    assert [n.head for n in drawn.nodes] == [False, False, True]


def test_concurrent_writers_stand_side_by_side_until_a_write_joins_them() -> None:
    drawn = layout([
        Point("g", (), A), Point("a1", ("g",), A), Point("b1", ("g",), B), Point("a2", ("a1", "b1"), A),
        Point("a3", ("a2",), A),
    ])
    lanes = _lanes(drawn)
    assert lanes == {"g": 0, "a1": 0, "b1": 1, "a2": 0, "a3": 0}
    assert drawn.nodes[2].opens == CONCURRENT
    assert drawn.lanes == 2
    # the join runs up the lane it ends, then into its parent
    join = next(e for e in drawn.edges if (e.child_row, e.parent_row) == (3, 2))
    assert " C" in join.path


def test_a_branch_has_its_lane_even_when_its_records_interleave_with_main() -> None:
    """A replica writes every record on all heads, so a branch's records and main's alternate
    in one chain of parents; the lanes still keep the branch apart, and its merge ends it."""
    drawn = layout([
        Point("g", (), A), Point("m1", ("g",), A), Point("x1", ("m1",), A, branch="x"),
        Point("m2", ("x1",), A), Point("x2", ("m2",), B, branch="x"),
        Point("mg", ("x2",), A, merges="x"), Point("x3", ("mg",), A, branch="x"),
    ])
    lanes = _lanes(drawn)
    assert lanes["x1"] == lanes["x2"] == 1
    assert lanes["m1"] == lanes["m2"] == lanes["mg"] == 0
    assert drawn.nodes[2].opens == "x"
    assert drawn.nodes[6].opens == "x"  # after the merge the branch starts anew


def test_parents_outside_the_window_get_stubs() -> None:
    drawn = layout([Point("m9", ("m8",), A), Point("m10", ("m9",), A)])
    assert [(e.child_row, e.parent_row) for e in drawn.edges] == [(0, -1), (1, 0)]


@st.composite
def _dags(draw: st.DrawFn) -> list[Point[int]]:
    """Random DAGs in a topological order: each record names some earlier ones, in branches."""
    n = draw(st.integers(1, 24))
    points: list[Point[int]] = []
    for i in range(n):
        parents = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        branch = draw(st.sampled_from([None, None, "x", "y"]))
        merges = draw(st.sampled_from([None, "x"])) if len(parents) > 1 else None
        points.append(Point(i, tuple(sorted(parents)), draw(st.sampled_from([A, B])), branch, merges))
    return points


@settings(max_examples=60)
@given(_dags())
def test_every_record_has_one_node_its_row_and_an_edge_per_parent(points: list[Point[int]]) -> None:
    drawn = layout(points)
    assert [n.cid for n in drawn.nodes] == [p.cid for p in points]
    assert [n.row for n in drawn.nodes] == list(range(len(points)))
    assert len({(n.x, n.y) for n in drawn.nodes}) == len(points)
    assert sorted((e.child_row, e.parent_row) for e in drawn.edges) == sorted(
        (i, q) for i, p in enumerate(points) for q in p.parents)
    assert all(0 <= n.lane < drawn.lanes for n in drawn.nodes)
    assert all(n.x < drawn.width and n.y < drawn.height for n in drawn.nodes)
    assert all(re.fullmatch(r"[MLC0-9, -]+", e.path) for e in drawn.edges)


@settings(max_examples=60)
@given(_dags())
def test_each_record_of_a_segment_descends_from_the_one_before(points: list[Point[int]]) -> None:
    drawn = layout(points)
    ancestors: list[set[int]] = []
    for p in points:
        ancestors.append(set(p.parents).union(*(ancestors[q] for q in p.parents)))
    last: dict[int, int] = {}
    for n in drawn.nodes:
        before = last.get(n.segment)
        if before is not None:
            assert before in ancestors[n.row]
            assert drawn.nodes[before].lane == n.lane
        last[n.segment] = n.row
