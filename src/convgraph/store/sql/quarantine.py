"""The quarantine of the SQL stores: records held until their parents or their time arrive.

Invariant: an entry and its `pending_missing` rows come and go together; eviction drops the
oldest entries first, until both bounds hold.
"""

from __future__ import annotations

from collections.abc import Iterable

from convgraph.core.cid import CID
from convgraph.store.rows import Pending, QuarantineBounds
from convgraph.store.sql.core import PENDING_COLS
from convgraph.store.sql.records import Records
from convgraph.store.sql_rows import pending_of_row, split_cids


class Quarantine(Records):
    """The `pending` and `pending_missing` tables."""

    def evict_pending(self, bounds: QuarantineBounds) -> list[CID]:
        with self.transaction():
            gone = self._evict(bounds, held=None)
        assert gone is not None  # naming no conversation, the transaction holds off every writer
        return gone

    def evict_pending_held(self, bounds: QuarantineBounds) -> list[CID] | None:
        return self._evict(bounds, held=self._held())

    def _evict(self, bounds: QuarantineBounds, held: set[str] | None) -> list[CID] | None:
        """What dropping the oldest, one at a time, until within both bounds leaves: the totals
        are one aggregate pass (no sort, no window over every entry), then only the entries
        that go are read, oldest first, so a part's eviction costs what it evicts. With `held`,
        only if every entry that goes is of those conversations (None: nothing done)."""
        count, size = self.pending_stats()
        gone: list[tuple[str, bytes, bytes]] = []
        step, seen = max(count - bounds.max_count, 64), 0
        while count > bounds.max_count or size > bounds.max_bytes:
            rows = self._x("SELECT conv, cid, missing, length(data) FROM {s}.pending"
                           " ORDER BY added, conv, cid LIMIT %s OFFSET %s", step, seen).fetchall()
            if not rows:
                break
            for conv, cid, missing, n in rows:
                if count <= bounds.max_count and size <= bounds.max_bytes:
                    break
                if held is not None and conv not in held:
                    return None
                gone.append((conv, bytes(cid), bytes(missing)))
                count, size = count - 1, size - int(n)
            seen, step = seen + len(rows), step * 2
        if gone:  # nothing evicted, nothing changed: the change tokens stay put
            self._bump(*sorted({conv for conv, _, _ in gone}))
            self._xm("DELETE FROM {s}.pending WHERE conv = %s AND cid = %s",
                     [(conv, c) for conv, c, _ in gone])
            self._xm("DELETE FROM {s}.pending_missing WHERE conv = %s AND missing = %s AND cid = %s",
                     [(conv, m, c) for conv, c, missing in gone for m in split_cids(missing)])
        return [CID(c) for _, c, _ in gone]

    def pending_any(self) -> bool:
        return bool(self._q("SELECT 1 FROM {s}.pending LIMIT 1"))

    def pending_get(self, cids: Iterable[CID]) -> dict[CID, Pending]:
        rows = self._any(f"SELECT {PENDING_COLS} FROM {{s}}.pending WHERE cid {{in}}", set(map(bytes, cids)))
        return {p.cid: p for p in map(pending_of_row, rows)}

    def pending_waiting_on(self, cids: Iterable[CID]) -> list[Pending]:
        rows = self._any(
            f"SELECT {', '.join('p.' + c for c in PENDING_COLS.split(', '))} FROM {{s}}.pending_missing m"
            # joined on conv too: the two tables are co-located by conv on Citus, never by cid
            " JOIN {s}.pending p ON p.conv = m.conv AND p.cid = m.cid WHERE m.missing {in}",
            set(map(bytes, cids)),
        )
        found = {p.cid: p for p in map(pending_of_row, rows)}
        return [found[c] for c in sorted(found)]

    def pending_due(self, wall_ms: int) -> list[Pending]:
        rows = self._q(f"SELECT {PENDING_COLS} FROM {{s}}.pending WHERE reason = 'clock' AND wall <= %s"
                       " ORDER BY added", wall_ms)
        return [pending_of_row(r) for r in rows]

    def pending_stats(self) -> tuple[int, int]:
        row = self._q("SELECT count(*), coalesce(sum(length(data)), 0) FROM {s}.pending")[0]
        return int(row[0]), int(row[1])
