"""Draw a conversation's DAG as terminal lanes, newest first (in the manner of `git log --graph`).

Pure: records in, lines out. Each record gets a row with `*` in its lane; a record with
several parents opens lanes (`\\`), and lanes that wait for the same record close into it
(`/`). Invariant: every record appears exactly once, and a lane stays open from a record
down to the parent it waits for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from convgraph.core.cid import CID
from convgraph.core.record import Record


def render(records: Sequence[Record], label: Callable[[Record], str]) -> list[str]:
    """Lines drawing `records` (canonical order given) newest first, each with `label(r)`."""
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
        parents = sorted(rec.parents, reverse=True)
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
