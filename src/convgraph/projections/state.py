"""The folded state of one conversation: every surface, from records in any order.

`fold(records)` builds it, `apply(state, record)` extends it by one record, `snapshot`
encodes it canonically (DAG-CBOR) and `restore` reads that back. The state is a function
of the *set* of records folded: entries are keyed by CID and every index is kept in
canonical order `(wall_ms, counter, actor, cid)`, so arrival order never shows. Invariant:
for any records and any order, `snapshot(fold(rs)) == snapshot(apply(…apply(fold(()), r1)…))`
and `snapshot(restore(snapshot(s))) == snapshot(s)`.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from convgraph.core import codec
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.core.hlc import MAX_COUNTER, MAX_WALL_MS, Hlc
from convgraph.core.kinds import check_payload
from convgraph.core.record import Record
from convgraph.errors import ConvgraphError, SnapshotError
from convgraph.projections.surfaces import ENTITY_KEYS, SURFACES, Surface
from convgraph.projections.turn import TURN_KINDS, Turn

SNAPSHOT_VERSION: Final = 1
OrderKey = tuple[int, int, bytes, bytes]
_ENTRY_REQUIRED: Final = frozenset({"cid", "kind", "actor", "hlc", "payload"})
_ENTRY_FIELDS: Final = _ENTRY_REQUIRED | {"branch"}
Slot = tuple[OrderKey, CID]


@dataclass(frozen=True, slots=True)
class Entry:
    """What the views need of one record: its header fields and its payload."""

    cid: CID
    kind: str
    actor: bytes
    hlc: Hlc
    branch: str | None
    payload: dict[str, Any]

    @property
    def order_key(self) -> OrderKey:
        """The canonical order key, as `Record.order_key`."""
        return (self.hlc.wall_ms, self.hlc.counter, self.actor, bytes(self.cid))

    def to_map(self) -> dict[str, Any]:
        m = {"cid": self.cid, "kind": self.kind, "actor": self.actor,
             "hlc": [self.hlc.wall_ms, self.hlc.counter], "payload": self.payload}
        if self.branch is not None:
            m["branch"] = self.branch
        return m


@dataclass
class ConvState:
    """Every folded record of one conversation, with the indexes the views read."""

    entries: dict[CID, Entry] = field(default_factory=dict)
    lines: defaultdict[str | None, list[Slot]] = field(default_factory=lambda: defaultdict(list))
    retractions: defaultdict[CID, list[Slot]] = field(default_factory=lambda: defaultdict(list))
    supersessions: defaultdict[CID, list[Slot]] = field(default_factory=lambda: defaultdict(list))
    branches: defaultdict[str, list[Slot]] = field(default_factory=lambda: defaultdict(list))
    replay: list[Slot] = field(default_factory=list)
    entities: defaultdict[tuple[str, Any], list[Slot]] = field(default_factory=lambda: defaultdict(list))
    # the Turn each turn entry projects to, made on first view: entries never change
    turns: dict[CID, Turn] = field(default_factory=dict, repr=False, compare=False)
    # a rooted conversation's retractions were all authorized on ingest (by the target's
    # author or an admin, docs/authority.md §3); a legacy one's count only from the author
    any_retractor: bool = field(default=False, compare=False)

    @property
    def count(self) -> int:
        """How many distinct records were folded."""
        return len(self.entries)


def entry_of(record: Record) -> Entry:
    """The entry a record folds to."""
    return Entry(record.cid, record.kind, record.actor, record.hlc, record.branch, record.payload)


def entry_from_bytes(cid: CID, data: bytes) -> Entry:
    """The entry of a stored record's bytes (verified on ingest), without building a `Record`."""
    m = codec.decode_trusted(data)
    wall, counter = m["hlc"]
    return Entry(cid, m["kind"], m["actor"], Hlc(wall, counter), m.get("branch"), m["payload"])


def fold(records: Iterable[Record]) -> ConvState:
    """The state of these records (any order, duplicates ignored)."""
    state = ConvState()
    for record in records:
        apply(state, record)
    return state


def apply(state: ConvState, record: Record | Entry) -> ConvState:
    """Fold one more record into `state` (in place) and return it; a known CID changes nothing."""
    entry = record if isinstance(record, Entry) else entry_of(record)
    if entry.cid in state.entries:
        return state
    state.entries[entry.cid] = entry
    slot = (entry.order_key, entry.cid)
    kind, p = entry.kind, entry.payload
    if kind in TURN_KINDS or kind == "merge":
        bisect.insort(state.lines[entry.branch], slot)
    elif kind == "retraction":
        bisect.insort(state.retractions[p["target"]], slot)
    elif kind == "supersession":
        bisect.insort(state.supersessions[p["target"]], slot)
    elif kind == "branch":
        bisect.insort(state.branches[p["name"]], slot)
    elif SURFACES[kind] is Surface.REPLAY:
        bisect.insort(state.replay, slot)
    elif SURFACES[kind] is Surface.ENTITY:
        bisect.insort(state.entities[(kind, ENTITY_KEYS[kind](p))], slot)
    return state


def without(state: ConvState, hidden: Iterable[CID]) -> ConvState:
    """A copy of `state` without the entries named in `hidden` (same flags, same turns cache)."""
    gone = set(hidden)
    out = ConvState(any_retractor=state.any_retractor)
    for cid, entry in state.entries.items():
        if cid not in gone:
            apply(out, entry)
    out.turns = state.turns
    return out


def snapshot(state: ConvState) -> bytes:
    """The canonical DAG-CBOR encoding of `state`: equal states give equal bytes."""
    entries = sorted(state.entries.values(), key=lambda e: e.order_key)
    return codec.encode({"v": SNAPSHOT_VERSION, "entries": [e.to_map() for e in entries]})


def snapshot_cid(data: bytes) -> CID:
    """The CID a checkpoint names its snapshot by."""
    return CID.of_record(data)


def restore(data: bytes) -> ConvState:
    """The state `snapshot` encoded; raises `SnapshotError` for anything else."""
    try:
        value = codec.decode(data)
        if type(value) is not dict or value.keys() != {"v", "entries"} or value["v"] != SNAPSHOT_VERSION:
            raise SnapshotError("not a convgraph snapshot (or an unknown version)")
        if type(value["entries"]) is not list:
            raise SnapshotError("snapshot entries must be a list")
        state = ConvState()
        for m in value["entries"]:
            apply(state, _entry(m))
        if snapshot(state) != data:
            raise SnapshotError("snapshot bytes are not canonical")
    except SnapshotError:
        raise
    except ConvgraphError as exc:
        raise SnapshotError(f"snapshot does not restore: {exc}") from exc
    return state


def _entry(m: Any) -> Entry:
    """One snapshot entry, checked as ingest checks a record's header and payload."""
    if type(m) is not dict or not _ENTRY_REQUIRED <= m.keys() <= _ENTRY_FIELDS:
        raise SnapshotError("a snapshot entry has the wrong fields")
    cid, kind, actor, hlc, branch = m["cid"], m["kind"], m["actor"], m["hlc"], m.get("branch")
    ok = (
        type(cid) is CID and cid.codec == DAG_CBOR and type(kind) is str and kind in SURFACES
        and type(actor) is bytes and len(actor) == 32 and (branch is None or type(branch) is str)
        and type(hlc) is list and len(hlc) == 2 and all(type(x) is int for x in hlc)
        and 0 <= hlc[0] <= MAX_WALL_MS and 0 <= hlc[1] <= MAX_COUNTER
    )
    if not ok:
        raise SnapshotError("a snapshot entry has a field of the wrong type")
    try:
        check_payload(kind, m["payload"], cid=cid)
    except ConvgraphError:
        # the snapshot does not say which form its conversation's id has: a payload valid
        # under either table is one some conversation can hold (its cover says which records)
        check_payload(kind, m["payload"], cid=cid, rooted=True)
    return Entry(cid, kind, actor, Hlc(hlc[0], hlc[1]), branch, m["payload"])
