"""A conversation's DAG laid out for drawing: one row per record, lanes per branch and per
concurrent head, an edge from each record to each of its parents.

Pure: points in (canonical order, oldest first), a `Layout` out, which the SVG template
draws. A lane segment holds the records of one line of work: a branch, or main. A record
continues the open segment of its own branch whose tip it descends from (main when it has
no branch); when there is none it opens a segment in the first free lane. So a branch
stands beside main, and so does a writer who wrote concurrently with another, from a head
the other already continued: their records do not descend from each other's. A record that
descends from the tips of other segments of its branch joins those concurrent heads and
ends them; a merge also ends its branch's segment. Invariant: every point has exactly one
node and its own row, each record of a segment descends from the one before it, and every parent
held in the window has an edge to it (a parent outside the window gets a stub,
`Edge.parent_row == -1`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

_C = TypeVar("_C", bound=Hashable)

ROW_PX: Final = 26
LANE_PX: Final = 22
MARGIN_PX: Final = 14
CONCURRENT: Final = "concurrent"


@dataclass(frozen=True)
class Point(Generic[_C]):
    """What the layout needs of a record: its id, its parents' ids, its author, its branch,
    and for a merge the branch it merges (`merges`)."""

    cid: _C
    parents: tuple[_C, ...]
    author: bytes
    branch: str | None = None
    merges: str | None = None


@dataclass(frozen=True)
class Node(Generic[_C]):
    """One record's place: `row` (0 = oldest), `lane`, and the pixel centre (`x`, `y`).

    `segment` numbers the segment it belongs to (lanes are reused once a segment ends);
    `opens` labels a segment this record opens beside others (its branch, or `concurrent`);
    `author` indexes `Layout.authors` (in order of first appearance); `head`: nothing in the
    window names it as a parent."""

    cid: _C
    row: int
    lane: int
    x: int
    y: int
    author: int
    parents: int
    segment: int
    opens: str | None = None
    head: bool = False


@dataclass(frozen=True)
class Edge:
    """A line from a child's node to its parent's; `parent_row` -1: the parent is not in the window."""

    child_row: int
    parent_row: int
    path: str  # SVG path data: numbers and the letters M, L, C only


@dataclass(frozen=True)
class Layout(Generic[_C]):
    """The drawing: nodes in row order, edges, the lanes used, authors by index, and the size in pixels."""

    nodes: tuple[Node[_C], ...]
    edges: tuple[Edge, ...]
    lanes: int
    authors: tuple[bytes, ...]
    width: int
    height: int


@dataclass
class _Segment(Generic[_C]):
    ident: int
    lane: int
    branch: str | None
    tip: _C
    tip_row: int


@dataclass
class _State(Generic[_C]):
    lanes: list[_Segment[_C] | None] = field(default_factory=list)
    # per record: for each open segment it descends from, the last row of it that it reaches
    # (a segment is a chain, so reaching row r reaches every earlier row of it)
    reach: dict[_C, dict[int, int]] = field(default_factory=dict)
    segments: int = 0


def layout(points: Sequence[Point[_C]]) -> Layout[_C]:
    """The drawing of `points`, given in canonical order (oldest first)."""
    state: _State[_C] = _State()
    rows: dict[_C, int] = {}
    placed: list[tuple[int, int, str | None]] = []
    joined: set[tuple[_C, _C]] = set()  # (child, parent): the parent's segment ended in this child
    authors: dict[bytes, int] = {}
    has_child: set[_C] = set()
    for row, p in enumerate(points):
        segment, opens, ended = _place(state, p, row)
        placed.append((segment.lane, segment.ident, opens))
        joined.update((p.cid, q) for q in ended)
        rows[p.cid] = row
        authors.setdefault(p.author, len(authors))
        has_child.update(p.parents)
    nodes = tuple(
        Node(p.cid, row, lane, _x(lane), _y(row), authors[p.author], len(p.parents), segment, opens,
             head=p.cid not in has_child)
        for row, (p, (lane, segment, opens)) in enumerate(zip(points, placed, strict=True))
    )
    edges = tuple(_edge(n, nodes[rows[q]] if q in rows else None, along_parent=(p.cid, q) in joined)
                  for n, p in zip(nodes, points, strict=True) for q in p.parents)
    lanes = max((n.lane for n in nodes), default=0) + 1
    return Layout(nodes, edges, lanes, tuple(authors), _x(lanes - 1) + MARGIN_PX,
                  _y(len(nodes) - 1) + MARGIN_PX)


def _place(state: _State[_C], p: Point[_C], row: int) -> tuple[_Segment[_C], str | None, list[_C]]:
    """The segment `p` joins (the state updated), the label when it opens a segment beside
    others, and the tips of the segments that end in it."""
    reach: dict[int, int] = {}
    for q in p.parents:
        for ident, last in state.reach.get(q, {}).items():
            reach[ident] = max(last, reach.get(ident, -1))
    below = [s for s in state.lanes if s is not None and reach.get(s.ident) == s.tip_row]
    mine = sorted((s for s in below if s.branch == p.branch), key=lambda s: (s.tip not in p.parents, s.lane))
    opens: str | None = None
    if mine:
        segment = mine[0]
    else:
        others = any(s is not None and s.branch == p.branch for s in state.lanes)
        if p.branch is not None:
            opens = p.branch
        elif others:
            opens = CONCURRENT
        segment = _open(state, p.branch, p.cid, row)
    ends = {p.branch} if p.merges is None else {p.branch, p.merges}
    ended = [s for s in below if s is not segment and s.branch in ends]
    for s in ended:
        state.lanes[s.lane] = None
    segment.tip, segment.tip_row = p.cid, row
    open_ids = {s.ident for s in state.lanes if s is not None}
    state.reach[p.cid] = {i: r for i, r in reach.items() if i in open_ids} | {segment.ident: row}
    return segment, opens, [s.tip for s in ended if s.tip in p.parents]


def _open(state: _State[_C], branch: str | None, cid: _C, row: int) -> _Segment[_C]:
    lane = next((i for i, s in enumerate(state.lanes) if s is None), len(state.lanes))
    if lane == len(state.lanes):
        state.lanes.append(None)
    state.segments += 1
    segment = state.lanes[lane] = _Segment(state.segments, lane, branch, cid, row)
    return segment


def _x(lane: int) -> int:
    return MARGIN_PX + lane * LANE_PX


def _y(row: int) -> int:
    return MARGIN_PX + row * ROW_PX


def _edge(child: Node[_C], parent: Node[_C] | None, *, along_parent: bool) -> Edge:
    """The line up from `child` to `parent`: straight within a lane; across lanes it runs up
    the parent's lane when the child ended that segment (a merge, joined heads), else up the
    child's lane, bending at the end that is not in that lane."""
    x1, y1 = child.x, child.y
    if parent is None:  # a stub up and out of the window
        return Edge(child.row, -1, f"M{x1},{y1} L{x1},{y1 - ROW_PX // 2}")
    x2, y2 = parent.x, parent.y
    half = ROW_PX // 2
    if x1 == x2:
        path = f"M{x1},{y1} L{x2},{y2}"
    elif along_parent:
        path = f"M{x1},{y1} C{x1},{y1 - half} {x2},{y1 - half} {x2},{y1 - ROW_PX} L{x2},{y2}"
    else:
        path = f"M{x1},{y1} L{x1},{y2 + ROW_PX} C{x1},{y2 + half} {x2},{y2 + half} {x2},{y2}"
    return Edge(child.row, parent.row, path)
