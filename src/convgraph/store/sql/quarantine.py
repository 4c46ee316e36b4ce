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
        # an entry goes iff it and every newer entry, together, exceed a bound: that is
        # what dropping the oldest, one at a time, until within both bounds leaves
        with self.transaction():
            gone = self._x(
                "SELECT added, conv, cid, missing FROM (SELECT added, conv, cid, missing,"
                " count(*) OVER w AS n, sum(length(data)) OVER w AS size FROM {s}.pending"
                " WINDOW w AS (ORDER BY added DESC)) newer"
                " WHERE n > %s OR size > %s ORDER BY added", bounds.max_count, bounds.max_bytes,
            ).fetchall()
            if gone:  # nothing evicted, nothing changed: the change tokens stay put
                self._bump(*{conv for _, conv, _, _ in gone})
                self._xm("DELETE FROM {s}.pending WHERE conv = %s AND cid = %s",
                         [(conv, bytes(c)) for _, conv, c, _ in gone])
                self._xm("DELETE FROM {s}.pending_missing WHERE conv = %s AND missing = %s AND cid = %s",
                         [(conv, bytes(m), bytes(c)) for _, conv, c, missing in gone
                          for m in split_cids(bytes(missing))])
        return [CID(bytes(c)) for _, _, c, _ in gone]

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
