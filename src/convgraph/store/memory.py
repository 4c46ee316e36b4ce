"""The in-memory twin of the SQLite store: same contract, dicts instead of tables.

Used by tests and by anyone who wants a replica that lives as long as the process. A
transaction keeps an undo journal (and copies each container it touches once), so a
transaction that raises leaves nothing behind, as in SQLite. Invariant: after any sequence
of transactions it answers every query exactly as `SqliteStore` would.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from convgraph.artifacts.links import artifact_links
from convgraph.core.cid import CID
from convgraph.core.hlc import ZERO, Hlc
from convgraph.core.record import Record, RecordMeta, load_trusted
from convgraph.errors import StoreError
from convgraph.integrity.statement import Statement
from convgraph.projections.index_rows import (
    BranchRow,
    LineRow,
    OrderKey,
    Row,
    TargetRow,
    row_of,
    snapshot_rows,
)
from convgraph.store.base import unshared_blocks
from convgraph.store.rows import (
    GOSSIP_KEEP,
    FindingRow,
    Pending,
    PendingCheck,
    QuarantineBounds,
    WriteSet,
    finding_cids,
    manifest_links,
    sort_pairs,
    unique_checks,
)

_Held = dict[CID, tuple[int, bytes]]  # statement CID -> (time, bytes)


def _newest_first(held: _Held) -> list[bytes]:
    return [data for _, _, data in sorted(((t, bytes(c), d) for c, (t, d) in held.items()), reverse=True)]


def _alike(table: dict[Any, Any], rows: dict[Any, Any]) -> dict[Any, Any]:
    """`rows` in a container of `table`'s type (a `defaultdict` keeps its default)."""
    return defaultdict(table.default_factory, rows) if isinstance(table, defaultdict) else rows


class MemoryStore:
    """A `Store` held in process memory; thread-safe through one re-entrant lock."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
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
        # the turn index: (conv, line | target | name) -> rows in canonical order
        self._lines: dict[tuple[str, str], list[tuple[OrderKey, str]]] = defaultdict(list)
        self._targets: dict[tuple[str, CID], list[tuple[OrderKey, str]]] = defaultdict(list)
        self._branch_rows: dict[tuple[str, str], list[tuple[OrderKey, CID]]] = defaultdict(list)
        self._hidden: dict[str, tuple[frozenset[CID], int]] = {}  # conv -> (hidden, arrivals when set)
        # witnessed history: every table replaced whole per key, so `_set` can undo it
        self._remembered: dict[tuple[bytes, str], bytes] = {}
        self._receipts: dict[tuple[bytes, str], _Held] = {}
        self._gossip: dict[tuple[bytes, str], _Held] = {}
        self._checks: dict[tuple[bytes, str], tuple[PendingCheck, ...]] = {}
        self._findings: dict[CID, FindingRow] = {}
        self._cited: dict[str, frozenset[CID]] = {}
        self._blocks: dict[CID, bytes] = {}
        self._artifact_refs: dict[str, set[CID]] = {}
        self._admitted: dict[CID, frozenset[str]] = {}  # block -> conversations it came for
        self._namers: dict[tuple[str, CID], set[CID]] = {}  # (conv, artifact) -> records naming it
        self._naming: dict[CID, set[str]] = {}  # artifact -> conversations naming it
        self._chunks: dict[CID, frozenset[CID]] = {}  # held manifest -> its chunks
        self._manifests: dict[CID, set[CID]] = {}  # chunk -> held manifests listing it
        self._forgotten: dict[str, None] = {}  # the conversations `forget` dropped
        self._undo: list[Callable[[], object]] | None = None  # set inside a transaction
        self._copied: set[tuple[object, object]] = set()
        self._version = 0  # bumped by every commit, never restored: a rollback only invalidates

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._undo is not None:
                yield
                return
            self._undo, self._copied = [], set()
            saved = (self._max_hlc, self._pending)
            try:
                yield
            except BaseException:
                for undo in reversed(self._undo):
                    undo()
                self._max_hlc, self._pending = saved
                self._version += 1  # a token read after a commit inside must not match what is left
                raise
            finally:
                self._undo = None

    def _own(self, table: dict[Any, Any], key: Any, empty: Callable[[], Any]) -> Any:
        """The container at `table[key]`, copied once per transaction so undo can restore it."""
        token = (id(table), key)
        if self._undo is not None and token not in self._copied:
            self._copied.add(token)
            old = table.get(key)
            table[key] = empty() if old is None else type(old)(old)
            self._undo.append(lambda: table.__setitem__(key, old) if old is not None else table.pop(key))
        elif key not in table:
            table[key] = empty()
        return table[key]

    def _set(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        if self._undo is not None:
            if key in table:
                old = table[key]
                self._undo.append(lambda: table.__setitem__(key, old))
            else:
                self._undo.append(lambda: table.pop(key, None))
        table[key] = value

    def _own_pending(self) -> OrderedDict[CID, Pending]:
        if self._undo is not None and ("pending", None) not in self._copied:
            self._copied.add(("pending", None))
            self._pending = OrderedDict(self._pending)  # `transaction` restores the old object
        return self._pending

    def in_transaction(self) -> bool:
        return self._undo is not None

    def change_token(self) -> object:
        return self._version

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

    def _index(self, conv: str, row: Row) -> None:
        """Add one turn index row (a row held already is left alone), with its precise inverse."""
        table: dict[Any, list[Any]]
        key: Any
        item: Any
        if isinstance(row, LineRow):
            table, key, item = self._lines, (conv, row.line), (row.key, row.kind)
        elif isinstance(row, TargetRow):
            table, key, item = self._targets, (conv, row.target), (row.key, row.kind)
        else:
            table, key, item = self._branch_rows, (conv, row.name), (row.key, row.origin)
        slots = table[key]
        i = bisect.bisect_left(slots, row.key, key=lambda s: s[0])
        if i < len(slots) and slots[i][0] == row.key:
            return
        slots.insert(i, item)
        if self._undo is not None:
            self._undo.append(lambda: slots.remove(item))

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

    def cursor(self) -> int:
        with self._lock:
            return len(self._arrival)

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

    def equivocations(self, conv: str | None = None) -> list[tuple[CID, CID]]:
        with self._lock:
            return sorted(k for k, c in self._equivocations.items() if conv in (None, c))

    def _evidence(self, conv: str) -> frozenset[CID]:
        """Records whose bytes compaction keeps: cited by a finding, or equivocating."""
        pairs = (p for p, c in self._equivocations.items() if c == conv)
        return self._cited.get(conv, frozenset()) | {cid for pair in pairs for cid in pair}

    # ------------------------------------------------------------ the turn index

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._lock:
            yield

    def line(self, conv: str, line: str, below: OrderKey | None, limit: int) -> list[LineRow]:
        with self._lock:
            slots = self._lines.get((conv, line), [])
            end = len(slots) if below is None else bisect.bisect_left(slots, below, key=lambda s: s[0])
            picked = slots[max(0, end - max(0, limit)) : end]
            return [LineRow(line, key, kind) for key, kind in reversed(picked)]

    def targets(self, conv: str, targets: Iterable[CID]) -> list[tuple[TargetRow, bytes]]:
        with self._lock:
            return [(TargetRow(t, key, kind), self._data[CID._trusted(key[3])])
                    for t in set(targets) for key, kind in self._targets.get((conv, t), ())]

    def branch_rows(self, conv: str, name: str) -> list[BranchRow]:
        with self._lock:
            return [BranchRow(name, key, origin) for key, origin in self._branch_rows.get((conv, name), ())]

    def index_rows(self, conv: str) -> list[Row]:
        with self._lock:
            rows: list[Row] = []
            rows += (LineRow(n, k, v) for (c, n), s in self._lines.items() if c == conv for k, v in s)
            rows += (TargetRow(t, k, v) for (c, t), s in self._targets.items() if c == conv for k, v in s)
            rows += (BranchRow(n, k, o) for (c, n), s in self._branch_rows.items() if c == conv for k, o in s)
            return rows

    def reindex(self, conv: str, rows: Iterable[Row]) -> None:
        with self.transaction():
            self._version += 1  # the views read these rows: cached answers must see the change
            tables: list[dict[Any, Any]] = [self._lines, self._targets, self._branch_rows]
            for table in tables:
                for key in [k for k in table if k[0] == conv]:
                    self._own(table, key, list).clear()
            for row in rows:
                self._index(conv, row)

    def hidden(self, conv: str) -> frozenset[CID] | None:
        with self._lock:
            held = self._hidden.get(conv)
            if held is None or any((m := self._meta.get(c)) is not None and m.conv == conv
                                   for c in self._arrival[held[1] :]):
                return None
            return held[0]

    def set_hidden(self, conv: str, cids: Iterable[CID]) -> None:
        with self.transaction():
            held, wanted = self._hidden.get(conv), frozenset(cids)
            if held is None or held[0] != wanted:
                self._version += 1  # a moved marker alone changes no view (index and fold agree)
            self._set(self._hidden, conv, (wanted, len(self._arrival)))

    # ------------------------------------------------------------ witnessed history

    def remember(self, statement: Statement) -> None:
        with self.transaction():
            self._set(self._remembered, (statement.key, statement.conv), statement.data)

    def remembered(self, peer: bytes, conv: str) -> bytes | None:
        with self._lock:
            return self._remembered.get((peer, conv))

    def remembered_in(self, conv: str) -> list[bytes]:
        with self._lock:
            return [data for (_, c), data in sorted(self._remembered.items()) if c == conv]

    def add_receipts(self, receipts: Iterable[Statement]) -> None:
        with self.transaction():
            for r in receipts:
                held = dict(self._receipts.get((r.key, r.conv), {}))
                held[r.cid] = (r.time_ms, r.data)
                self._set(self._receipts, (r.key, r.conv), held)

    def open_receipts(self, peer: bytes, conv: str) -> list[bytes]:
        with self._lock:
            return _newest_first(self._receipts.get((peer, conv), {}))[::-1]

    def close_receipts(self, peer: bytes, conv: str, cids: Iterable[CID]) -> None:
        with self.transaction():
            gone = set(cids)
            held = {c: v for c, v in self._receipts.get((peer, conv), {}).items() if c not in gone}
            self._set(self._receipts, (peer, conv), held)

    def add_gossip(self, statement: Statement) -> None:
        with self.transaction():
            where = (statement.key, statement.conv)
            held = {**self._gossip.get(where, {}), statement.cid: (statement.time_ms, statement.data)}
            cited = self._cited.get(statement.conv, frozenset())
            latest = sorted(held, key=lambda c: (held[c][0], bytes(c)), reverse=True)[:GOSSIP_KEEP]
            self._set(self._gossip, where, {c: v for c, v in held.items() if c in cited or c in latest})

    def gossip(self, conv: str) -> list[bytes]:
        with self._lock:
            merged: _Held = {}
            for (_, c), held in self._gossip.items():
                if c == conv:
                    merged.update(held)
            return _newest_first(merged)

    def pending_checks(self, peer: bytes, conv: str) -> list[PendingCheck]:
        with self._lock:
            return list(self._checks.get((peer, conv), ()))

    def set_pending_checks(self, peer: bytes, conv: str, checks: Sequence[PendingCheck]) -> None:
        with self.transaction():
            self._set(self._checks, (peer, conv), tuple(unique_checks(checks)))

    def add_finding(self, finding: FindingRow) -> bool:
        with self.transaction():
            if finding.id in self._findings:
                return False
            self._set(self._findings, finding.id, finding)
            cited = self._cited.get(finding.conv, frozenset())
            self._set(self._cited, finding.conv, cited | finding_cids(finding))
            return True

    def findings(self, conv: str | None = None) -> list[FindingRow]:
        with self._lock:
            rows = [f for f in self._findings.values() if conv in (None, f.conv)]
            return sorted(rows, key=lambda f: (f.found_ms, bytes(f.id)))

    def cited(self, conv: str) -> set[CID]:
        with self._lock:
            return set(self._cited.get(conv, ()))

    def _name(self, record: Record, links: frozenset[CID]) -> None:
        self._own(self._artifact_refs, record.conv, set).update(links)
        for cid in links:
            self._own(self._namers, (record.conv, cid), set).add(record.cid)
            self._own(self._naming, cid, set).add(record.conv)

    def put_blocks(self, blocks: Iterable[tuple[CID, bytes]]) -> None:
        with self.transaction():
            for cid, data in blocks:
                if cid not in self._blocks:
                    self._set(self._blocks, cid, bytes(data))
                    if chunks := frozenset(CID._trusted(c) for _, c in manifest_links([(cid, data)])):
                        self._set(self._chunks, cid, chunks)
                        for chunk in chunks:
                            self._own(self._manifests, chunk, set).add(cid)

    # reads take the lock like the others: a put in another thread's open transaction may
    # still roll back, and must not be seen before it commits
    def get_block(self, cid: CID) -> bytes | None:
        with self._lock:
            return self._blocks.get(cid)

    def has_blocks(self, cids: Iterable[CID]) -> set[CID]:
        with self._lock:
            return {c for c in cids if c in self._blocks}

    def block_cids(self) -> Iterator[CID]:
        with self._lock:
            cids = sorted(self._blocks)
        yield from cids

    def artifact_refs(self, conv: str) -> set[CID]:
        with self._lock:
            return set(self._artifact_refs.get(conv, ()))

    def admit_blocks(self, conv: str, cids: Iterable[CID]) -> None:
        with self.transaction():
            for cid in set(cids):
                if conv not in (had := self._admitted.get(cid, frozenset())):
                    self._set(self._admitted, cid, had | {conv})

    def admitted(self, conv: str, cids: Iterable[CID]) -> set[CID]:
        with self._lock:
            return {c for c in set(cids) if conv in self._admitted.get(c, ())}

    def admitting(self, cids: Iterable[CID]) -> set[str]:
        with self._lock:
            return {conv for c in set(cids) for conv in self._admitted.get(c, ())}

    def records_naming(self, conv: str, cids: Iterable[CID]) -> dict[CID, set[CID]]:
        with self._lock:
            return {c: set(self._namers[conv, c]) for c in set(cids) if (conv, c) in self._namers}

    def conversations_naming(self, cids: Iterable[CID]) -> set[str]:
        with self._lock:
            return {conv for c in set(cids) for conv in self._naming.get(c, ())}

    def chunks_of(self, manifests: Iterable[CID]) -> dict[CID, set[CID]]:
        with self._lock:
            return {m: set(self._chunks[m]) for m in set(manifests) if m in self._chunks}

    def manifests_of(self, chunks: Iterable[CID]) -> dict[CID, set[CID]]:
        with self._lock:
            return {c: set(self._manifests[c]) for c in set(chunks) if c in self._manifests}

    # ------------------------------------------------------------ forgetting

    def _replace(self, name: str, value: Any) -> None:
        """Rebind the table `name` to `value`; a rollback rebinds the old one (left untouched)."""
        old = getattr(self, name)
        if self._undo is not None:
            self._undo.append(lambda: setattr(self, name, old))
        setattr(self, name, value)

    def forget(self, conv: str) -> None:
        with self.transaction():
            dropped = unshared_blocks(self, conv)
            self._version += 1
            gone = {c for c, m in self._meta.items() if m.conv == conv}
            keep = self._replace
            keep("_data", {c: d for c, d in self._data.items() if c not in gone})
            keep("_meta", {c: m for c, m in self._meta.items() if c not in gone})
            self._max_hlc = max((m.hlc for m in self._meta.values()), default=ZERO)
            for name in ("_order", "_heads", "_snapshots", "_hidden", "_cited", "_artifact_refs"):
                table = getattr(self, name)
                keep(name, _alike(table, {k: v for k, v in table.items() if k != conv}))
            # tables keyed by (…, conv, …): the conversation's place in the key
            for name, at in (("_chain", 1), ("_last", 1), ("_lines", 0), ("_targets", 0), ("_branch_rows", 0),
                             ("_remembered", 1), ("_receipts", 1), ("_gossip", 1), ("_checks", 1),
                             ("_namers", 0)):
                table = getattr(self, name)
                keep(name, _alike(table, {k: v for k, v in table.items() if k[at] != conv}))
            keep("_equivocations", {k: c for k, c in self._equivocations.items() if c != conv})
            keep("_findings", {k: f for k, f in self._findings.items() if f.conv != conv})
            keep("_admitted", {c: left for c, convs in self._admitted.items() if (left := convs - {conv})})
            keep("_naming", {c: named for c, convs in self._naming.items() if (named := convs - {conv})})
            keep("_blocks", {c: d for c, d in self._blocks.items() if c not in dropped})
            keep("_chunks", {m: cs for m, cs in self._chunks.items() if m not in dropped})
            keep("_manifests", {c: listing for c, ms in self._manifests.items() if (listing := ms - dropped)})
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
