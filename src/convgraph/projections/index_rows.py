"""The rows of the turn index: what a resume window reads instead of the fold.

One entry (a record's CID, kind, actor, hlc, branch and payload) makes at most one row: a
turn or a `merge` a `LineRow` on its line, a `system_prompt` one on `SYSTEM_LINE`, a
`retraction` or `supersession` a `TargetRow` under its target, a `branch` record a
`BranchRow` under its name; other kinds none. Every row carries the entry's canonical order
key `(wall_ms, counter, actor, cid)`, the tail of the stores' primary keys (docs/conversation.md
§8.1). Invariant: a conversation's rows are `row_of(e)` for each entry `e` of its fold, so they
are a function of the set of records.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.errors import ConvgraphError, SnapshotError
from convgraph.projections.state import Entry, OrderKey
from convgraph.projections.turn import TURN_KINDS, Folded

__all__ = ["LINE_KINDS", "MAIN", "SYSTEM_KIND", "SYSTEM_LINE", "TARGET_KINDS", "BranchRow", "LineRow",
           "OrderKey", "Row", "TargetRow", "line_of", "order_key", "row_of", "rows_of", "snapshot_entries",
           "snapshot_rows"]

MAIN: Final = ""  # the line of records on no branch (a branch name is never empty)
SYSTEM_KIND: Final = "system_prompt"
SYSTEM_LINE: Final = "\x1fsystem_prompt"
"""The line `system_prompt` rows sit on, whatever their branch (docs/conversation.md §9); rows
are also told apart by kind, so a branch of that name (legal, if odd) shares it harmlessly."""
LINE_KINDS: Final = TURN_KINDS | {"merge"}
TARGET_KINDS: Final = frozenset({"retraction", "supersession"})
_MALFORMED: Final = (ConvgraphError, LookupError, TypeError, ValueError, AttributeError)


@dataclass(frozen=True, slots=True)
class LineRow:
    """A turn or merge on `line` (`MAIN`, or its branch's name)."""

    line: str
    key: OrderKey
    kind: str

    @property
    def cid(self) -> CID:
        return CID._trusted(self.key[3])


@dataclass(frozen=True, slots=True)
class TargetRow:
    """A retraction or supersession of `target`; its author is `key[2]`."""

    target: CID
    key: OrderKey
    kind: str

    @property
    def cid(self) -> CID:
        return CID._trusted(self.key[3])


@dataclass(frozen=True, slots=True)
class BranchRow:
    """A `branch` record naming `name`, forking at `origin` (its payload's `from`)."""

    name: str
    key: OrderKey
    origin: CID

    @property
    def cid(self) -> CID:
        return CID._trusted(self.key[3])


Row = LineRow | TargetRow | BranchRow


def line_of(branch: str | None) -> str:
    """The line a record with this `branch` field belongs to."""
    return MAIN if branch is None else branch


def order_key(entry: Folded) -> OrderKey:
    return (entry.hlc.wall_ms, entry.hlc.counter, entry.actor, bytes(entry.cid))


def row_of(entry: Folded) -> Row | None:
    """The row `entry` makes, if any (a turn's payload is never read: appends stay cheap)."""
    kind = entry.kind
    if kind in LINE_KINDS:
        return LineRow(line_of(entry.branch), order_key(entry), kind)
    if kind == SYSTEM_KIND:
        return LineRow(SYSTEM_LINE, order_key(entry), kind)
    if kind in TARGET_KINDS:
        return TargetRow(entry.payload["target"], order_key(entry), kind)
    if kind == "branch":
        return BranchRow(entry.payload["name"], order_key(entry), entry.payload["from"])
    return None


def rows_of(entries: Iterable[Folded]) -> Iterator[Row]:
    """The rows of `entries`, in their order."""
    for entry in entries:
        row = row_of(entry)
        if row is not None:
            yield row


def snapshot_entries(data: bytes) -> list[Entry]:
    """The entries of snapshot bytes a store keeps (checked when they were kept: decoded, not
    re-verified); `SnapshotError` when they are not a snapshot's shape."""
    try:
        value: Any = codec.decode_trusted(data)
        out = []
        for m in value["entries"]:
            wall, counter = m["hlc"]
            branch = m.get("branch")
            out.append(Entry(m["cid"], m["kind"], m["actor"], Hlc(wall, counter), branch, m["payload"]))
    except _MALFORMED as exc:
        raise SnapshotError(f"a kept snapshot is not a convgraph snapshot: {exc}") from None
    return out


def snapshot_rows(conv: str, data: bytes) -> list[tuple[str, Row]]:
    """The rows of a kept snapshot's entries, each with `conv`; none for bytes that are not a
    snapshot (`verify` reports those: the store keeps what it is given)."""
    try:
        return [(conv, row) for row in rows_of(snapshot_entries(data))]
    except (SnapshotError, *_MALFORMED):
        return []
