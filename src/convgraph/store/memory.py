"""The in-memory twin of the SQLite store: same contract, dicts instead of tables.

Used by tests and by anyone who wants a replica that lives as long as the process. A
transaction keeps an undo journal (`memory_journal`; each container it touches is copied
once), so a transaction that raises leaves nothing behind, as in SQLite. This module keeps the
records, their heads and order, and the quarantine; the turn index, the witnessed history and
the artifact blocks are its parts in `memory_index`, `memory_witness` and `memory_blocks`.
Invariant: after any sequence of transactions it answers every query exactly as `SqliteStore`
would.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Iterator
from typing import ClassVar

from convgraph.artifacts.links import artifact_links
from convgraph.core.cid import CID
from convgraph.core.hlc import ZERO, Hlc
from convgraph.core.record import RecordMeta, load_trusted
from convgraph.errors import StoreError
from convgraph.projections.index_rows import OrderKey, row_of, snapshot_rows
from convgraph.store.base import unshared_blocks
from convgraph.store.memory_blocks import MemoryBlocks
from convgraph.store.memory_index import MemoryIndex
from convgraph.store.memory_witness import MemoryWitness
from convgraph.store.rows import Pending, QuarantineBounds, WriteSet, key_summary, sort_pairs


class MemoryStore(MemoryIndex, MemoryWitness, MemoryBlocks):
    """A `Store` held in process memory; thread-safe through one re-entrant lock."""

    _rebound: ClassVar[tuple[str, ...]] = ("_max_hlc", "_pending")

    def __init__(self) -> None:
        super().__init__()
        self._data: dict[CID, bytes] = {}
        self._meta: dict[CID, RecordMeta] = {}
        self._order: dict[str, list[tuple[OrderKey, CID]]] = defaultdict(list)
        self._heads: dict[str, set[CID]] = defaultdict(set)
        self._arrival: list[CID] = []
        self._snapshots: dict[str, tuple[CID, bytes]] = {}
        self._chain: dict[tuple[bytes, str, int], list[CID]] = defaultdict(list)
        self._last: dict[tuple[bytes, str], RecordMeta] = {}
        self._pending: OrderedDict[CID, Pending] = OrderedDict()
        self._waiting: dict[CID, set[CID]] = defaultdict(set)  # missing parent -> waiters
        self._equivocations: dict[tuple[CID, CID], str] = {}
        self._max_hlc = ZERO
        self._forgotten: dict[str, None] = {}  # the conversations `forget` dropped

    def _own_pending(self) -> OrderedDict[CID, Pending]:
        if self._undo is not None and ("pending", None) not in self._copied:
            self._copied.add(("pending", None))
            self._pending = OrderedDict(self._pending)  # `transaction` restores the old object
        return self._pending

    def commit(self, writes: WriteSet) -> None:
        with self.transaction():
            self._version += 1
            for meta in writes.headers:
                self._put(meta, b"")
            for record in writes.records:
                if self._put(record.meta, record.data):
                    if (row := row_of(record)) is not None:
                        self._index(record.conv, row)
                    if links := artifact_links(record):
                        self._name(record, links)
            for cid in writes.pending_remove:
                self._unpend(cid)
            for entry in writes.pending_put:
                self._unpend(entry.cid)
                if entry.cid not in self._data:
                    self._own_pending()[entry.cid] = entry
                    for missing in entry.missing:
                        self._own(self._waiting, missing, set).add(entry.cid)
            for a, b in sort_pairs(writes.equivocations):
                if a not in self._meta or b not in self._meta:
                    raise StoreError("an equivocation pair must name two stored records", cid=str(a))
                self._set(self._equivocations, (a, b), self._meta[a].conv)

    def _unpend(self, cid: CID) -> None:
        if cid not in self._pending:
            return
        entry = self._own_pending().pop(cid)
        for missing in entry.missing:
            waiters = self._own(self._waiting, missing, set)
            waiters.discard(cid)

    def _put(self, meta: RecordMeta, data: bytes) -> bool:
        """Store a record (`data` empty: its header only, as compaction leaves one); False if held."""
        if meta.cid in self._data:
            return False
        self._set(self._data, meta.cid, data)
        self._set(self._meta, meta.cid, meta)
        entry = ((meta.hlc.wall_ms, meta.hlc.counter, meta.actor, bytes(meta.cid)), meta.cid)
        order = self._order[meta.conv]
        bisect.insort(order, entry)
        heads = self._heads[meta.conv]
        dropped = heads.intersection(meta.parents)
        heads.difference_update(dropped)
        heads.add(meta.cid)
        chain = self._chain[(meta.actor, meta.conv, meta.seq)]
        chain.append(meta.cid)
        self._arrival.append(meta.cid)
        if self._undo is not None:  # precise inverses: copying a conversation's order is O(n)

            def undo() -> None:
                self._arrival.pop()
                del order[bisect.bisect_left(order, entry)]
                heads.discard(meta.cid)
                heads.update(dropped)
                chain.remove(meta.cid)

            self._undo.append(undo)
        last = self._last.get((meta.actor, meta.conv))
        if last is None or (meta.seq, bytes(meta.cid)) > (last.seq, bytes(last.cid)):
            self._set(self._last, (meta.actor, meta.conv), meta)
        self._max_hlc = max(self._max_hlc, meta.hlc)
        return True

    def evict_pending(self, bounds: QuarantineBounds) -> list[CID]:
        with self.transaction():
            self._version += 1
            evicted: list[CID] = []
            size = sum(len(p.data) for p in self._pending.values())
            while self._pending and (len(self._pending) > bounds.max_count or size > bounds.max_bytes):
                cid = next(iter(self._pending))
                size -= len(self._pending[cid].data)
                self._unpend(cid)
                evicted.append(cid)
            return evicted

    def evict_pending_held(self, bounds: QuarantineBounds) -> list[CID] | None:
        return self.evict_pending(bounds)  # one lock for every writer: all are held off

    def since(self, cursor: int, conv: str) -> tuple[list[tuple[CID, bytes]], int]:
        with self._lock:
            fresh = self._arrival[cursor:]  # a forgotten record's place stays: cursors stay valid
            found = [(c, self._data[c]) for c in fresh
                     if (m := self._meta.get(c)) is not None and m.conv == conv and self._data[c]]
            return found, len(self._arrival)

    def arrivals(self, cursor: int, limit: int) -> tuple[list[tuple[str, CID, bytes]], int]:
        with self._lock:
            fresh = self._arrival[cursor : cursor + limit]
            found = [(self._meta[c].conv, c, data) for c in fresh if (data := self._data.get(c))]
            return found, cursor + len(fresh)

    def sync_keys(self, conv: str) -> list[tuple[int, bytes]]:
        with self._lock:
            return sorted((key[0], cid.digest) for key, cid in self._order.get(conv, []))

    def cursor(self, conv: str | None = None) -> int:  # noqa: ARG002 (one arrival order for all)
        with self._lock:
            return len(self._arrival)

    def conv_token(self, conv: str) -> object:  # noqa: ARG002 (coarse until per-conversation rows)
        return self.change_token()

    def keys_since(self, conv: str, cursor: int) -> tuple[list[tuple[int, bytes]], int]:
        with self._lock:
            fresh = self._arrival[cursor:]  # a forgotten record's place stays: cursors stay valid
            found = [(m.hlc.wall_ms, c.digest) for c in fresh
                     if (m := self._meta.get(c)) is not None and m.conv == conv]
            return found, len(self._arrival)

    def key_summary(self, conv: str) -> tuple[int, int]:
        return key_summary(self.sync_keys(conv))

    def compact(self, conv: str, covered: Iterable[CID], checkpoint: CID, snapshot: bytes) -> None:
        covered = list(covered)
        with self.transaction():
            for cid in covered:  # all checked before any is touched, as SQLite does
                meta = self._meta.get(cid)
                if meta is None or meta.conv != conv:
                    raise StoreError("compaction names a record this conversation does not hold", cid=cid)
            self._version += 1
            evidence = self._evidence(conv)
            for cid in covered:
                if cid in evidence:
                    continue
                self._set(self._data, cid, b"")
            self._set(self._snapshots, conv, (checkpoint, snapshot))
            for _, row in snapshot_rows(conv, snapshot):  # rows of an adopted conversation's records
                self._index(conv, row)

    def snapshot(self, conv: str) -> tuple[CID, bytes] | None:
        with self._lock:
            return self._snapshots.get(conv)

    def has(self, cid: CID) -> bool:
        with self._lock:
            return cid in self._data

    def cids_like(self, head: bytes, tail: bytes, limit: int) -> list[CID]:
        with self._lock:
            found = sorted(c for c in self._meta if bytes(c).startswith(head) and bytes(c).endswith(tail))
        return found[: max(0, limit)]

    def get(self, cid: CID) -> bytes | None:
        with self._lock:
            return self._data.get(cid) or None

    def get_many(self, cids: Iterable[CID]) -> dict[CID, bytes]:
        with self._lock:
            return {c: d for c in cids if (d := self._data.get(c))}

    def metas(self, cids: Iterable[CID]) -> dict[CID, RecordMeta]:
        with self._lock:
            return {c: self._meta[c] for c in cids if c in self._meta}

    def heads(self, conv: str) -> list[CID]:
        with self._lock:
            return sorted(self._heads.get(conv, ()))

    def at_seq(self, actor: bytes, conv: str, seq: int) -> list[CID]:
        with self._lock:
            return sorted(self._chain.get((actor, conv, seq), ()))

    def last_own(self, actor: bytes, conv: str) -> RecordMeta | None:
        with self._lock:
            return self._last.get((actor, conv))

    def records(self, conv: str, last: int | None = None) -> list[tuple[CID, bytes]]:
        with self._lock:
            order = self._order.get(conv, [])
            chosen = order if last is None else order[max(0, len(order) - last) :]
            if last is not None and any(not self._data[c] for _, c in chosen):
                chosen = [s for s in order if self._data[s[1]]]
                chosen = chosen[max(0, len(chosen) - last) :]
            return [(cid, self._data[cid]) for _, cid in chosen if self._data[cid]]

    def records_after(self, conv: str, after: OrderKey | None, limit: int) -> list[tuple[CID, bytes]]:
        with self._lock:
            order = self._order.get(conv, [])
            at = 0 if after is None else bisect.bisect_right(order, after, key=lambda slot: slot[0])
            out: list[tuple[CID, bytes]] = []
            for _, cid in order[at:]:
                if len(out) >= limit:
                    break
                if self._data[cid]:
                    out.append((cid, self._data[cid]))
            return out

    def first(self, conv: str) -> tuple[CID, bytes] | None:
        with self._lock:
            cid = next((c for _, c in self._order.get(conv, []) if self._data[c]), None)
            return None if cid is None else (cid, self._data[cid])

    def conversations(self) -> list[str]:
        with self._lock:
            return sorted(c for c, order in self._order.items() if order)

    def count(self, conv: str | None = None) -> int:
        with self._lock:
            return len(self._data) if conv is None else len(self._order.get(conv, ()))

    def iter_all(self) -> Iterator[tuple[CID, bytes]]:
        with self._lock:
            items = [(c, d) for c, d in self._data.items() if d]
        yield from items

    def max_hlc(self) -> Hlc:
        with self._lock:
            return self._max_hlc

    def pending_get(self, cids: Iterable[CID]) -> dict[CID, Pending]:
        with self._lock:
            return {c: self._pending[c] for c in cids if c in self._pending}

    def pending_waiting_on(self, cids: Iterable[CID]) -> list[Pending]:
        with self._lock:
            waiters = {w for c in cids for w in self._waiting.get(c, ())} & self._pending.keys()
            return [self._pending[w] for w in sorted(waiters)]

    def pending_due(self, wall_ms: int) -> list[Pending]:
        with self._lock:
            return [p for p in self._pending.values() if p.reason == "clock" and p.wall_ms <= wall_ms]

    def pending_stats(self) -> tuple[int, int]:
        with self._lock:
            return len(self._pending), sum(len(p.data) for p in self._pending.values())

    def pending_any(self) -> bool:
        return bool(self._pending)

    def equivocations(self, conv: str | None = None) -> list[tuple[CID, CID]]:
        with self._lock:
            return sorted(k for k, c in self._equivocations.items() if conv in (None, c))

    def _evidence(self, conv: str) -> frozenset[CID]:
        """Records whose bytes compaction keeps: cited by a finding, or equivocating."""
        pairs = (p for p, c in self._equivocations.items() if c == conv)
        return self._cited.get(conv, frozenset()) | {cid for pair in pairs for cid in pair}

    # ------------------------------------------------------------ forgetting

    def forget(self, conv: str) -> None:
        with self.transaction():
            dropped = unshared_blocks(self, conv)
            self._version += 1
            gone = {c for c, m in self._meta.items() if m.conv == conv}
            keep = self._replace
            keep("_data", {c: d for c, d in self._data.items() if c not in gone})
            keep("_meta", {c: m for c, m in self._meta.items() if c not in gone})
            self._max_hlc = max((m.hlc for m in self._meta.values()), default=ZERO)
            self._drop(conv, ("_order", "_heads", "_snapshots"), (("_chain", 1), ("_last", 1)))
            keep("_equivocations", {k: c for k, c in self._equivocations.items() if c != conv})
            self._forget_index(conv)
            self._forget_witness(conv)
            self._forget_blocks(conv, dropped)
            for entry in list(self._pending.values()):  # the quarantine's records: decoded for their conv
                if load_trusted(entry.data, entry.cid).conv == conv:
                    self._unpend(entry.cid)
            self._set(self._forgotten, conv, None)

    def forgotten(self, convs: Iterable[str]) -> set[str]:
        with self._lock:
            return {c for c in convs if c in self._forgotten}

    def vacuum(self) -> None:
        """Nothing to hand back: forgotten entries left memory with `forget`."""
        if self.in_transaction():
            raise StoreError("vacuum cannot run inside a transaction")

    def close(self) -> None:
        """Nothing to release; present for the protocol."""
