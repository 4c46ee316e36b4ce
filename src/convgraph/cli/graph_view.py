"""Draw a conversation's DAG as terminal lanes, newest first (in the manner of `git log --graph`).

Pure: records in, lines out. Each record gets a row with `*` in its lane; a record with
several parents opens lanes (`\\`), and lanes that wait for the same record close into it
(`/`). A semantic branch is drawn as git draws one, a line of its own forking from its fork
point: the record joins the nearest records of its own line (main, or the branch it carries),
a `branch` record joins the record it forks `from`, and a `merge` joins main and the branch
heads it names, so records on a branch do not stand in main's line (`drawn_parents`).
Invariant: every record appears exactly once, and a lane stays open from a record down to
the parent it waits for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from convgraph.core.cid import CID
from convgraph.core.record import Record


def render(records: Sequence[Record], label: Callable[[Record], str]) -> list[str]:
    """Lines drawing `records` (canonical order given) newest first, each with `label(r)`."""
    drawn = drawn_parents(records)
    lanes: list[CID | None] = []
    lines: list[str] = []
    for rec in reversed(records):
        cols = [i for i, want in enumerate(lanes) if want == rec.cid]
        if not cols:
            cols = [_free(lanes)]
            lanes[cols[0]] = rec.cid
        col = cols[0]
        if len(cols) > 1:  # lanes waiting for this record close into its lane first
            lines.append(_row(lanes, dict.fromkeys(cols[1:], "/")))
            for i in cols[1:]:
                lanes[i] = None
        lines.append(_row(lanes, {col: "*"}) + "  " + label(rec))
        marks: dict[int, str] = {}
        parents = drawn[rec.cid]
        lanes[col] = parents[0] if parents else None
        for parent in parents[1:]:
            if parent not in lanes:
                i = _free(lanes, after=col)
                lanes[i] = parent
                marks[i] = "\\"
        if marks:
            lines.append(_row(lanes, marks))
        while lanes and lanes[-1] is None:
            lanes.pop()
    return lines


def line_of(rec: Record) -> str | None:
    """The line a record is drawn on: its branch, the branch a `branch` record opens, or None
    (main)."""
    if rec.branch is not None:
        return rec.branch
    name = rec.payload.get("name") if rec.kind == "branch" else None
    return name if isinstance(name, str) else None


def drawn_parents(records: Sequence[Record]) -> dict[CID, list[CID]]:
    """Each record's parents in the drawing, the lane it continues first: a `branch` record's
    fork point; else the nearest ancestors on its own line (found through records of other
    lines), and for a `merge` the nearest records of the branch it merges too. A record none
    of whose ancestors is on its line keeps its parents; one outside `records` is not walked
    through."""
    by_cid = {r.cid: r for r in records}
    nearest: dict[tuple[CID, str | None], tuple[CID, ...]] = {}
    drawn: dict[CID, list[CID]] = {}
    for rec in records:
        line = line_of(rec)
        fork = rec.payload.get("from") if rec.kind == "branch" else None
        if isinstance(fork, CID):
            drawn[rec.cid] = [fork]
            continue
        own = sorted({c for p in rec.parents for c in _nearest(p, line, by_cid, nearest)}, reverse=True)
        merged = rec.payload.get("branch") if rec.kind == "merge" else None
        tips = {c for p in rec.parents for c in _nearest(p, merged, by_cid, nearest)} \
            if isinstance(merged, str) else set()
        joined = sorted(tips - set(own), reverse=True)
        drawn[rec.cid] = own + joined if own else sorted(rec.parents, reverse=True)
    return drawn


def _nearest(
    start: CID, line: str | None, by_cid: dict[CID, Record],
    memo: dict[tuple[CID, str | None], tuple[CID, ...]],
) -> tuple[CID, ...]:
    """The records on `line` nearest `start` among it and its ancestors (itself when it is on
    `line` or not held); a loop, not recursion, for a branch thousands of records long."""
    stack = [start]
    while stack:
        cid = stack[-1]
        if (cid, line) in memo:
            stack.pop()
            continue
        rec = by_cid.get(cid)
        if rec is None or line_of(rec) == line:
            memo[cid, line] = (cid,)
            stack.pop()
            continue
        waiting = [p for p in rec.parents if (p, line) not in memo]
        if waiting:
            stack.extend(waiting)
            continue
        memo[cid, line] = tuple(sorted({c for p in rec.parents for c in memo[p, line]}))
        stack.pop()
    return memo[start, line]


def _free(lanes: list[CID | None], after: int = -1) -> int:
    for i in range(after + 1, len(lanes)):
        if lanes[i] is None:
            return i
    lanes.append(None)
    return len(lanes) - 1


def _row(lanes: list[CID | None], marks: dict[int, str]) -> str:
    width = max([len(lanes), *(i + 1 for i in marks)])
    cells = []
    for i in range(width):
        if i in marks:
            cells.append(marks[i])
        elif i < len(lanes) and lanes[i] is not None:
            cells.append("|")
        else:
            cells.append(" ")
    return " ".join(cells).rstrip()
