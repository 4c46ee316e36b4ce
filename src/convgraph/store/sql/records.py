"""The records of the SQL stores: the commit, the look-ups, the conversation reads and the
sync cursors.

A commit locks the `convs` row of each conversation it adds records to (sorted), gives each
record the next arrival of its conversation and adds its sync key to the row's sums, so
`since`, `keys_since`, `conv_token` and `key_summary` are reads of one conversation.
Invariant: a commit lands whole or not at all; `heads` always equals the records that no
stored record names as a parent; a conversation's arrivals are 1, 2, … in commit order.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Iterator
from typing import Any

from convgraph.artifacts.links import ARTIFACT_KINDS
from convgraph.core.cid import CID
from convgraph.core.hlc import ZERO, Hlc
from convgraph.core.record import Record, RecordMeta, load_trusted
from convgraph.errors import StoreError
from convgraph.projections.index_rows import OrderKey
from convgraph.store.rows import WriteSet, sort_pairs
from convgraph.store.sql.core import (
    ARTIFACT_REFS_INSERT,
    INDEX_INSERTS,
    META_COLS,
    PAGE,
    TOKEN_BITS,
    UPDATE_CONV,
    Batch,
)
from convgraph.store.sql.index import Index
from convgraph.store.sql_rows import artifact_rows, meta_of_row, prefix_range, record_params

_INSERT: str = ("INSERT INTO {s}.records (cid, conv, actor, seq, wall, counter, parents, data, arrival)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")


class Records(Index):
    """The record tables' reads and the commit that writes them."""

    def _insert_records(self, rows: list[tuple[object, ...]]) -> list[Batch]:
        """The statements that insert these `records` rows (every column but `id`)."""
        return [(_INSERT, rows)]

    def commit(self, writes: WriteSet) -> None:
        """Apply `writes` atomically; each record's parents must be stored or precede it."""
        blob = self._blob
        written = {r.conv for r in writes.records} | {m.conv for m in writes.headers}
        with self.transaction(*written):
            # the conversations written are locked first: their records read next are final
            convs = self._hold(written)
            pairs = sort_pairs(writes.equivocations)  # every read first, in one query
            asked = {bytes(p.cid) for p in writes.pending_put} | {bytes(c) for ab in pairs for c in ab}
            # a record's conversation is in its signed content: it is looked up in that
            # conversation only (on Citus one shard, not a fan-out over every worker)
            mine: dict[str, set[bytes]] = {}
            own: list[Record | RecordMeta] = [*([] if writes.fresh else writes.records), *writes.headers]
            for r in own:
                mine.setdefault(r.conv, set()).add(bytes(r.cid))
            held = self._any("SELECT cid, conv FROM {s}.records WHERE cid {in}", asked)
            by_conv = "SELECT cid, conv FROM {s}.records WHERE conv = %s AND cid {in}"
            for conv, cids in sorted(mine.items()):
                held += self._any(by_conv, cids, conv)
            known: dict[bytes, str] = {bytes(c): conv for c, conv in held}
            fresh = {r.cid: r for r in writes.records if writes.fresh or bytes(r.cid) not in known}
            headers = {m.cid: m for m in writes.headers if bytes(m.cid) not in known and m.cid not in fresh}
            added: list[RecordMeta | Record] = [*headers.values(), *fresh.values()]
            rows: list[tuple[object, ...]] = []
            for r in added:
                row = convs[r.conv]
                row.arrivals += 1
                row.key_sum += int.from_bytes(r.cid[4:], "little")
                row.key_count += 1
                data = r.data if isinstance(r, Record) else b""
                rows.append((blob(r.cid), r.conv, blob(r.actor), r.seq, r.hlc.wall_ms, r.hlc.counter,
                             blob(b"".join(r.parents)), blob(data), row.arrivals))
            # parents precede children (the commit precondition), so the batch's effect on
            # heads is: every named parent stops being one, every unnamed new record becomes one
            known.update((bytes(r.cid), r.conv) for r in added)
            named = {(r.conv, p) for r in added for p in r.parents}
            unheaded = [(c, blob(p)) for c, p in named if p not in fresh and p not in headers]
            headed = [(r.conv, blob(r.cid)) for r in added if (r.conv, r.cid) not in named]
            unpend = [(bytes(c),) for c in [*writes.pending_remove, *(p.cid for p in writes.pending_put)]]
            last = {bytes(p.cid): (i, p) for i, p in enumerate(writes.pending_put)}  # a later entry wins
            entries = [p for c, (_, p) in sorted(last.items(), key=lambda kv: kv[1][0]) if c not in known]
            pending = [(p, load_trusted(p.data, p.cid).conv) for p in entries]
            for a, b in pairs:
                if a == b or bytes(a) not in known or bytes(b) not in known:
                    raise StoreError("an equivocation pair must name two stored records", cid=str(a))
            grown = [convs[c] for c in sorted({r.conv for r in added})]
            for row in grown:
                row.token = secrets.randbits(TOKEN_BITS)
            lines, targets, branches = record_params(fresh.values(), blob)
            self._batch([
                *(self._insert_records(rows) if rows else []),
                (UPDATE_CONV, self._written(grown)),
                (INDEX_INSERTS[0], lines),
                (INDEX_INSERTS[1], targets),
                (INDEX_INSERTS[2], branches),
                (ARTIFACT_REFS_INSERT,
                 artifact_rows(r for r in fresh.values() if r.refs or r.kind in ARTIFACT_KINDS)),
                ("DELETE FROM {s}.heads WHERE conv = %s AND cid = %s", unheaded),
                ("INSERT INTO {s}.heads VALUES (%s, %s)", headed),
                *self._unpend(unpend),
                ("INSERT INTO {s}.pending (cid, reason, wall, missing, data, conv, added)"
                 " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                 [(bytes(p.cid), p.reason, p.wall_ms, b"".join(p.missing), p.data, conv, self._added())
                  for p, conv in pending]),
                ("INSERT INTO {s}.pending_missing VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                 [(bytes(m), bytes(p.cid), conv) for p, conv in pending for m in p.missing]),
                ("INSERT INTO {s}.equivocations VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                 [(bytes(a), bytes(b), known[bytes(a)]) for a, b in pairs]),
                *(self._announce(sorted({r.conv for r in added})) if rows else []),
            ])
            self._moved()
        self._after_commit(len(rows))

    def _added(self) -> int:
        """When a quarantined record arrived: the order eviction drops the oldest in."""
        now = time.time_ns()
        self._last_added = max(now, getattr(self, "_last_added", 0) + 1)
        return self._last_added

    def has(self, cid: CID) -> bool:
        return bool(self._q("SELECT 1 FROM {s}.records WHERE cid = %s", self._blob(cid)))

    def cids_like(self, head: bytes, tail: bytes, limit: int) -> list[CID]:
        # the head is a range of the unique index on cid; the tail is checked row by row
        where, args = prefix_range("cid >= %s AND cid < %s", "cid >= %s", head)
        if tail:
            where.append("substr(cid, length(cid) - %s + 1) = %s")
            args += (len(tail), tail)
        sql = "SELECT cid FROM {s}.records" + (" WHERE " + " AND ".join(where) if where else "")
        return [CID(bytes(r[0])) for r in self._q(sql + " ORDER BY cid LIMIT %s", *args, max(0, limit))]

    def get(self, cid: CID) -> bytes | None:
        rows = self._q(f"SELECT {self._data()} FROM {{s}}.records WHERE cid = %s", self._blob(cid))
        return rows[0][0] or None if rows else None

    def get_many(self, cids: Iterable[CID]) -> dict[CID, bytes]:
        rows = self._any(f"SELECT cid, {self._data()} FROM {{s}}.records WHERE cid {{in}}",
                         set(map(bytes, cids)))
        return {CID._trusted(c): d for c, d in rows if d}

    def metas(self, cids: Iterable[CID]) -> dict[CID, RecordMeta]:
        rows = self._any(f"SELECT {META_COLS} FROM {{s}}.records WHERE cid {{in}}", set(map(bytes, cids)))
        return {m.cid: m for m in map(meta_of_row, rows)}

    def heads(self, conv: str) -> list[CID]:
        rows = self._q("SELECT cid FROM {s}.heads WHERE conv = %s ORDER BY cid", conv)
        return [CID(r[0]) for r in rows]

    def at_seq(self, actor: bytes, conv: str, seq: int) -> list[CID]:
        rows = self._q("SELECT cid FROM {s}.records WHERE actor = %s AND conv = %s AND seq = %s"
                       " ORDER BY cid", actor, conv, seq)
        return [CID(r[0]) for r in rows]

    def last_own(self, actor: bytes, conv: str) -> RecordMeta | None:
        rows = self._q(f"SELECT {META_COLS} FROM {{s}}.records WHERE actor = %s AND conv = %s"
                       " ORDER BY seq DESC, cid DESC LIMIT 1", actor, conv)
        return meta_of_row(rows[0]) if rows else None

    def records(self, conv: str, last: int | None = None) -> list[tuple[CID, bytes]]:
        select = "SELECT cid, data FROM {s}.records WHERE conv = %s AND length(data) > 0 ORDER BY "
        if last is None:
            rows = self._q(select + "wall, counter, actor, cid", conv)
        else:
            newest = "wall DESC, counter DESC, actor DESC, cid DESC LIMIT %s"
            rows = self._q(select + newest, conv, max(0, last))
            rows.reverse()
        return [(CID._trusted(c), d) for c, d in rows]

    def records_after(self, conv: str, after: OrderKey | None, limit: int) -> list[tuple[CID, bytes]]:
        where = "" if after is None else " AND (wall, counter, actor, cid) > (%s, %s, %s, %s)"
        rows = self._q("SELECT cid, data FROM {s}.records WHERE conv = %s AND length(data) > 0" + where
                       + " ORDER BY wall, counter, actor, cid LIMIT %s", conv, *(after or ()), max(0, limit))
        return [(CID._trusted(c), d) for c, d in rows]

    def first(self, conv: str) -> tuple[CID, bytes] | None:
        rows = self._q("SELECT cid, data FROM {s}.records WHERE conv = %s AND length(data) > 0"
                       " ORDER BY wall, counter, actor, cid LIMIT 1", conv)
        return (CID._trusted(rows[0][0]), rows[0][1]) if rows else None

    def conversations(self) -> list[str]:
        return [r[0] for r in self._q("SELECT DISTINCT conv FROM {s}.heads ORDER BY conv")]

    def count(self, conv: str | None = None) -> int:
        if conv is None:
            return int(self._q("SELECT count(*) FROM {s}.records")[0][0])
        return int(self._q("SELECT count(*) FROM {s}.records WHERE conv = %s", conv)[0][0])

    def iter_all(self) -> Iterator[tuple[CID, bytes]]:
        after = 0
        page = f"SELECT id, cid, {self._data()} FROM {{s}}.records WHERE id > %s ORDER BY id LIMIT %s"
        while rows := self._q(page, after, PAGE):
            yield from ((CID(cid), data) for _, cid, data in rows if data)  # compacted: header only
            after = rows[-1][0]

    def since(self, cursor: int, conv: str) -> tuple[list[tuple[CID, bytes]], int]:
        # the conversation's arrivals are drawn under its row lock: in commit order
        rows = self._q(f"SELECT arrival, cid, {self._data()} FROM {{s}}.records WHERE conv = %s"
                       " AND arrival > %s ORDER BY arrival", conv, cursor)
        found = [(CID._trusted(c), d) for _, c, d in rows if d]
        return found, rows[-1][0] if rows else cursor

    def arrivals(self, cursor: int, limit: int) -> tuple[list[tuple[str, CID, bytes]], int]:
        rows = self._q("SELECT id, conv, cid, data FROM {s}.records WHERE id > %s ORDER BY id LIMIT %s",
                       cursor, limit)
        found = [(conv, CID._trusted(c), d) for _, conv, c, d in rows if d]
        return found, rows[-1][0] if rows else cursor

    def sync_keys(self, conv: str) -> list[tuple[int, bytes]]:
        # an index-only scan of `records_order`, sorted here: no second index to maintain
        rows = self._q("SELECT wall, cid FROM {s}.records WHERE conv = %s", conv)
        return sorted((wall, cid[4:]) for wall, cid in rows)

    def cursor(self, conv: str | None = None) -> int:
        if conv is not None:  # the conversation's own arrivals: `since`'s cursor
            rows = self._q("SELECT arrivals FROM {s}.convs WHERE conv = %s", conv)
            return int(rows[0][0]) if rows else 0
        # ids are never drawn twice; the floor keeps the cursor from moving back after a `forget`
        # two scalar subqueries, no outer FROM: Citus plans each apart (a subquery in the target
        # list of a query over a distributed table cannot be pushed down)
        floor = "coalesce((SELECT CAST(value AS BIGINT) FROM {s}.meta WHERE key = 'id_floor'), 0)"
        top = "(SELECT coalesce(max(id), 0) FROM {s}.records)"
        return int(self._q(f"SELECT {self._GREATEST}({top}, {floor})")[0][0])

    def change_token(self) -> object:
        raise NotImplementedError

    def conv_token(self, conv: str) -> object:
        held = self._held_row(conv)
        if held is not None:  # this thread's transaction holds the row: its token is the one held
            return held.token
        rows = self._q("SELECT token FROM {s}.convs WHERE conv = %s", conv)
        return int(rows[0][0]) if rows else 0

    def keys_since(self, conv: str, cursor: int) -> tuple[list[tuple[int, bytes]], int]:
        rows: list[Any] = self._q("SELECT arrival, wall, cid FROM {s}.records"
                                  " WHERE conv = %s AND arrival > %s", conv, cursor)
        found = [(wall, bytes(cid[4:])) for _, wall, cid in rows]
        return found, max((r[0] for r in rows), default=cursor)

    def key_summary(self, conv: str) -> tuple[int, int]:
        rows = self._q("SELECT key_sum, key_count FROM {s}.convs WHERE conv = %s", conv)
        return (int.from_bytes(bytes(rows[0][0]), "little"), int(rows[0][1])) if rows else (0, 0)

    def max_hlc(self) -> Hlc:
        # one probe of `records_order` per conversation (each has a head), never a scan of every record
        rows = self._q(self._MAX_HLC)
        return Hlc(*rows[0]) if rows else ZERO

    def equivocations(self, conv: str | None = None) -> list[tuple[CID, CID]]:
        if conv is None:
            rows = self._q("SELECT a, b FROM {s}.equivocations ORDER BY a, b")
        else:
            rows = self._q("SELECT a, b FROM {s}.equivocations WHERE conv = %s ORDER BY a, b", conv)
        return [(CID(a), CID(b)) for a, b in rows]
