"""A conversation's records as they stand, compacted or not (docs/conversation.md §6): held
records from their bytes, compacted ones from the snapshot of the latest compaction.

`Store.since` and `Store.get_many` leave compacted records out; the adapters fold `arrived`
instead, and read by CID through `Replica.entries`. `arrived(store, conv, None)` reads the
snapshot's entries (canonical order) and then every record held with bytes that the snapshot
does not hold (arrival order); given the mark it returned, it reads what arrived since, or,
when a checkpoint that arrived came with another snapshot (a compaction, an adoption), the
whole conversation again (`again`). Invariant: folding the entries of a chain of calls,
starting over at each `again`, folds each record of `conv` whose payload the store knows once.
"""

from __future__ import annotations

from dataclasses import dataclass

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.projections.state import Entry, entry_from_bytes
from convgraph.store.base import Store


@dataclass(frozen=True)
class Mark:
    """Where a reader of one conversation stands: the store's `since` cursor and the
    checkpoint of the snapshot it read (None: none)."""

    cursor: int
    checkpoint: CID | None


@dataclass(frozen=True)
class Arrived:
    """What `arrived` read: the entries, in order, the mark to pass next, whether the entries
    are the conversation from its start (what was folded before is to be dropped), and how
    many of the first entries the snapshot gave (their records may have no bytes here)."""

    entries: list[Entry]
    mark: Mark
    again: bool
    from_snapshot: int = 0


def snapshot_entries(data: bytes) -> list[Entry]:
    """The entries of a snapshot this store keeps (checked when it was kept), in canonical order."""
    return [Entry(m["cid"], m["kind"], m["actor"], Hlc(*m["hlc"]), m.get("branch"), m["payload"])
            for m in codec.decode_trusted(data)["entries"]]


def arrived(store: Store, conv: str, mark: Mark | None) -> Arrived:
    """The entries of `conv` that arrived after `mark` (None: all of them, `again`)."""
    if mark is not None:
        rows, cursor = store.since(mark.cursor, conv)
        entries = [entry_from_bytes(c, d) for c, d in rows]
        # a compaction or an adoption lands a checkpoint: only then can the snapshot have moved
        if not any(e.kind == "checkpoint" for e in entries) or _checkpoint(store, conv) == mark.checkpoint:
            return Arrived(entries, Mark(cursor, mark.checkpoint), again=False)
    with store.reading():
        snap = store.snapshot(conv)
        rows, cursor = store.since(0, conv)
    base = snapshot_entries(snap[1]) if snap is not None else []
    seen = {e.cid for e in base}  # records kept as evidence hold their bytes too
    entries = base + [entry_from_bytes(c, d) for c, d in rows if c not in seen]
    mark = Mark(cursor, None if snap is None else snap[0])
    return Arrived(entries, mark, again=True, from_snapshot=len(base))


def first(store: Store, conv: str) -> Entry | None:
    """The entry of `conv`'s first record in canonical order, compacted or not."""
    held = store.first(conv)
    found = None if held is None else entry_from_bytes(*held)
    snap = store.snapshot(conv)
    if snap is not None:
        entries = snapshot_entries(snap[1])
        if entries and (found is None or entries[0].order_key < found.order_key):
            found = entries[0]
    return found


def _checkpoint(store: Store, conv: str) -> CID | None:
    snap = store.snapshot(conv)
    return None if snap is None else snap[0]
