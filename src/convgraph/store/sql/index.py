"""The turn index of the SQL stores (docs/conversation.md §8): `turn_line`, `turn_targets`,
`turn_branches` and the hidden set, with the backfills an older schema needs.

Invariant: the index rows of a conversation are those of its stored records with bytes and
of its kept snapshot; `hidden` answers only while no record arrived after its marker.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from convgraph.core.cid import CID
from convgraph.core.record import load_trusted
from convgraph.projections.index_rows import (
    BranchRow,
    LineRow,
    OrderKey,
    Row,
    TargetRow,
    row_of,
    snapshot_rows,
)
from convgraph.projections.state import entry_from_bytes
from convgraph.store.sql.core import ARTIFACT_REFS_INSERT, INDEX_INSERTS, ORDER_DESC, PAGE, SqlCore
from convgraph.store.sql_rows import artifact_rows, branch_row, index_params, line_row, target_row


class Index(SqlCore):
    """The turn index's reads and writes."""

    def _index(self, rows: Iterable[tuple[str, Row]]) -> None:
        self._batch(zip(INDEX_INSERTS, index_params(rows), strict=True))

    def _index_snapshot(self, conv: str, snapshot: bytes) -> None:
        self._index(snapshot_rows(conv, snapshot))

    def _backfill_index(self) -> None:
        """Fill the turn index from every record held with bytes and every kept snapshot."""
        after = 0
        page = "SELECT id, conv, cid, data FROM {s}.records WHERE id > %s ORDER BY id LIMIT %s"
        while rows := self._x(page, after, PAGE).fetchall():
            entries = ((conv, entry_from_bytes(CID(cid), data)) for _, conv, cid, data in rows if data)
            self._index((conv, row) for conv, e in entries if (row := row_of(e)) is not None)
            after = rows[-1][0]
        for conv, data in self._x("SELECT conv, data FROM {s}.snapshots").fetchall():
            self._index_snapshot(conv, bytes(data))

    def _backfill_artifact_refs(self) -> None:
        """Fill `artifact_refs` from every record held with bytes (version 4 added it)."""
        after = 0
        page = "SELECT id, cid, data FROM {s}.records WHERE id > %s ORDER BY id LIMIT %s"
        while rows := self._x(page, after, PAGE).fetchall():
            refs = artifact_rows(load_trusted(bytes(d), CID(bytes(c))) for _, c, d in rows if d)
            self._xm(ARTIFACT_REFS_INSERT, refs)
            after = rows[-1][0]

    def line(self, conv: str, line: str, below: OrderKey | None, limit: int) -> list[LineRow]:
        select = "SELECT wall, counter, actor, cid, kind FROM {s}.turn_line WHERE conv = %s AND line = %s"
        if below is None:  # an index-only scan of the primary key, backwards
            rows = self._q(select + ORDER_DESC, conv, line, limit)
        else:
            before = " AND (wall, counter, actor, cid) < (%s, %s, %s, %s)"
            rows = self._q(select + before + ORDER_DESC, conv, line, *below, limit)
        return [line_row(line, r) for r in rows]

    def targets(self, conv: str, targets: Iterable[CID]) -> list[tuple[TargetRow, bytes]]:
        rows = self._any(f"SELECT t.target, t.wall, t.counter, t.actor, t.cid, t.kind, {self._data('r.data')}"
                         " FROM {s}.turn_targets t JOIN {s}.records r ON r.conv = t.conv AND r.cid = t.cid"
                         " WHERE t.conv = %s AND t.target {in}", {bytes(c) for c in targets}, conv)
        return [(target_row(r[:6]), bytes(r[6])) for r in rows]

    def branch_rows(self, conv: str, name: str) -> list[BranchRow]:
        rows = self._q("SELECT wall, counter, actor, cid, origin FROM {s}.turn_branches"
                       " WHERE conv = %s AND name = %s ORDER BY wall, counter, actor, cid", conv, name)
        return [branch_row(name, r) for r in rows]

    def index_rows(self, conv: str) -> list[Row]:
        cols, where = "wall, counter, actor, cid", "WHERE conv = %s"
        with self.reading():
            lines = self._q(f"SELECT line, {cols}, kind FROM {{s}}.turn_line {where}", conv)
            targets = self._q(f"SELECT target, {cols}, kind FROM {{s}}.turn_targets {where}", conv)
            branches = self._q(f"SELECT name, {cols}, origin FROM {{s}}.turn_branches {where}", conv)
        return [*(line_row(r[0], r[1:]) for r in lines), *map(target_row, targets),
                *(branch_row(r[0], r[1:]) for r in branches)]

    def reindex(self, conv: str, rows: Iterable[Row]) -> None:
        with self.transaction():
            self._bump(conv)  # the views read these rows: cached answers must see the change
            for table in ("turn_line", "turn_targets", "turn_branches"):
                self._x(f"DELETE FROM {{s}}.{table} WHERE conv = %s", conv)
            self._index((conv, row) for row in rows)

    def hidden(self, conv: str) -> frozenset[CID] | None:
        with self.reading():
            marker = self._q("SELECT cursor FROM {s}.turn_hidden_as_of WHERE conv = %s", conv)
            arrived = self._q("SELECT arrivals FROM {s}.convs WHERE conv = %s", conv)
            if not marker or (arrived and arrived[0][0] > marker[0][0]):
                return None
            rows: list[Any] = self._q("SELECT cid FROM {s}.turn_hidden WHERE conv = %s", conv)
        return frozenset(CID(bytes(r[0])) for r in rows)

    def set_hidden(self, conv: str, cids: Iterable[CID]) -> None:
        wanted = {bytes(c) for c in cids}
        with self.transaction():
            arrivals = self._hold([conv])[conv].arrivals  # the marker: as of this arrival
            held = {bytes(r[0]) for r in self._x("SELECT cid FROM {s}.turn_hidden WHERE conv = %s", conv)}
            if held != wanted:
                self._bump(conv)  # a moved marker alone changes no view (index and fold agree)
                self._x("DELETE FROM {s}.turn_hidden WHERE conv = %s", conv)
                self._xm("INSERT INTO {s}.turn_hidden VALUES (%s, %s)", [(conv, c) for c in sorted(wanted)])
            self._x("INSERT INTO {s}.turn_hidden_as_of VALUES (%s, %s)"
                    " ON CONFLICT (conv) DO UPDATE SET cursor = excluded.cursor", conv, arrivals)
