"""Forgetting a conversation in the SQL stores: every row of it goes, and every block no other
conversation names.

Invariant: after `forget`, no table holds a row of the conversation, `forgotten` names it,
and the sync cursor never moves back (no id is drawn twice).
"""

from __future__ import annotations

from collections.abc import Iterable

from convgraph.core.record import load_trusted
from convgraph.store.base import unshared_blocks
from convgraph.store.sql.blocks import Blocks
from convgraph.store.sql.core import FORGET_TABLES, PENDING_COLS
from convgraph.store.sql_rows import pending_of_row


class SqlStore(Blocks):
    """A whole `Store` over SQL, but for the connection and the DDL, which a dialect adds."""

    def forget(self, conv: str) -> None:
        with self.transaction():
            dropped = [(self._blob(c),) for c in unshared_blocks(self, conv)]  # type: ignore[arg-type]
            self._bump()
            top = self.cursor()
            self._x("DELETE FROM {s}.records WHERE conv = %s", conv)
            if self.cursor() < top:  # `since` cursors handed out stay valid: no id drawn twice
                self._x("INSERT INTO {s}.meta VALUES ('id_floor', %s) ON CONFLICT (key)"
                        " DO UPDATE SET value = excluded.value", top)
            for table in FORGET_TABLES:
                self._x(f"DELETE FROM {{s}}.{table} WHERE conv = %s", conv)
            waiting = self._x(f"SELECT {PENDING_COLS} FROM {{s}}.pending").fetchall()
            gone = [p for p in map(pending_of_row, waiting)  # the quarantine keeps no conv
                    if load_trusted(bytes(p.data), p.cid).conv == conv]
            self._xm("DELETE FROM {s}.pending WHERE cid = %s", [(bytes(p.cid),) for p in gone])
            self._xm("DELETE FROM {s}.pending_missing WHERE missing = %s AND cid = %s",
                     [(bytes(m), bytes(p.cid)) for p in gone for m in p.missing])
            self._xm("DELETE FROM {s}.blocks WHERE cid = %s", dropped)
            self._xm("DELETE FROM {s}.block_links WHERE manifest = %s", dropped)
            self._x("INSERT INTO {s}.forgotten VALUES (%s) ON CONFLICT DO NOTHING", conv)

    def forgotten(self, convs: Iterable[str]) -> set[str]:
        rows = self._any("SELECT conv FROM {s}.forgotten WHERE conv {in}", set(convs), text=True)
        return {r[0] for r in rows}
