"""Forgetting a conversation in the SQL stores: every row of it goes, and every block no other
conversation names.

Invariant: after `forget`, no table holds a row of the conversation, `forgotten` names it,
and the sync cursor never moves back (no id is drawn twice).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

from convgraph.store.base import unshared_blocks
from convgraph.store.sql.blocks import Blocks
from convgraph.store.sql.core import FORGET_TABLES, TOKEN_BITS, UPDATE_CONV


class SqlStore(Blocks):
    """A whole `Store` over SQL, but for the connection and the DDL, which a dialect adds."""

    def forget(self, conv: str) -> None:
        with self.transaction():
            row = self._hold([conv])[conv]
            dropped = [(self._blob(c),) for c in unshared_blocks(self, conv)]  # type: ignore[arg-type]
            top = self.cursor()
            self._x("DELETE FROM {s}.records WHERE conv = %s", conv)
            if self.cursor() < top:  # `arrivals` cursors handed out stay valid: no id drawn twice
                self._x("INSERT INTO {s}.meta VALUES ('id_floor', %s) ON CONFLICT (key)"
                        " DO UPDATE SET value = excluded.value", top)
            for table in FORGET_TABLES:
                self._x(f"DELETE FROM {{s}}.{table} WHERE conv = %s", conv)
            self._xm("DELETE FROM {s}.blocks WHERE cid = %s", dropped)
            self._xm("DELETE FROM {s}.block_links WHERE manifest = %s", dropped)
            self._x("INSERT INTO {s}.forgotten VALUES (%s) ON CONFLICT DO NOTHING", conv)
            # the row stays, with its arrivals: `since` cursors handed out stay valid too
            row.key_sum = row.key_count = 0
            row.token = secrets.randbits(TOKEN_BITS)
            self._xm(UPDATE_CONV, self._written([row]))
            self._moved()

    def forgotten(self, convs: Iterable[str]) -> set[str]:
        rows = self._any("SELECT conv FROM {s}.forgotten WHERE conv {in}", set(convs), text=True)
        return {r[0] for r in rows}
