"""The upgrade of a version-5 SQL store to version 6, the same in both dialects.

The dialect moves the v5 conversation tables aside (`old(table)` names one) and creates the
v6 ones; this copies every row across, giving each record its v5 id as its arrival, each
quarantined record its conversation, and each conversation its `convs` row (key sums, and
arrivals from the store-wide cursor). Invariant: every v5 row is in a v6 table afterwards;
each conversation's arrival order is its v5 id order, and a cursor handed out by v5 misses
no record that arrives after the upgrade.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from convgraph.core.cid import CID
from convgraph.core.record import load_trusted
from convgraph.store.sql.core import TOKEN_BITS, SqlCore
from convgraph.store.sql.schema import CONV_TABLES, columns

_SPECIAL = frozenset({"convs", "records", "pending", "pending_missing", "pending_checks"})


def copy_v5(db: SqlCore, old: Callable[[str], str]) -> None:
    """Fill the (empty) v6 conversation tables from the v5 ones `old` names."""
    for table in CONV_TABLES:  # turn_hidden_as_of too: its marker, an id, is an arrival still
        if table not in _SPECIAL:
            cols = ", ".join(columns(table))
            db._x(f"INSERT INTO {{s}}.{table} ({cols}) SELECT {cols} FROM {old(table)}")
    # a record's arrival is its v5 id: the ids were drawn in commit order, so each conversation's
    # arrivals still are, and every cursor handed out before (a store-wide id) stays valid
    db._x("INSERT INTO {s}.records (cid, conv, actor, seq, wall, counter, parents, data, id, arrival)"
          f" SELECT cid, conv, actor, seq, wall, counter, parents, data, id, id FROM {old('records')}")
    waiting = db._x(f"SELECT cid, reason, wall, missing, data, id FROM {old('pending')}").fetchall()
    db._xm("INSERT INTO {s}.pending (cid, reason, wall, missing, data, conv, added)"
           " VALUES (%s, %s, %s, %s, %s, %s, %s)",
           [(c, r, w, m, d, load_trusted(bytes(d), CID(bytes(c))).conv, i) for c, r, w, m, d, i in waiting])
    db._x("INSERT INTO {s}.pending_missing (missing, cid, conv) SELECT m.missing, m.cid, p.conv"
          f" FROM {old('pending_missing')} m JOIN {{s}}.pending p ON p.cid = m.cid")
    db._x("INSERT INTO {s}.pending_checks (peer, conv, reason, statements, pos)"
          " SELECT peer, conv, reason, statements,"
          " row_number() OVER (PARTITION BY peer, conv ORDER BY id) - 1"
          f" FROM {old('pending_checks')}")
    sums: dict[str, list[int]] = {}
    for conv, cid in db._x("SELECT conv, cid FROM {s}.records").fetchall():
        held = sums.setdefault(conv, [0, 0])
        held[0] += int.from_bytes(bytes(cid)[4:], "little")
        held[1] += 1
    for (conv,) in db._x("SELECT conv FROM {s}.forgotten").fetchall():
        sums.setdefault(conv, [0, 0])
    # every conversation goes on from the store-wide cursor: above any cursor handed out
    top = int(db._x("SELECT coalesce(max(id), 0) FROM {s}.records").fetchone()[0])
    floor = db._x("SELECT value FROM {s}.meta WHERE key = 'id_floor'").fetchone()
    top = max(top, int(floor[0]) if floor else 0)
    db._xm("INSERT INTO {s}.convs (conv, arrivals, token, key_sum, key_count) VALUES (%s, %s, %s, %s, %s)",
           [(conv, top, secrets.randbits(TOKEN_BITS), (total % (1 << 256)).to_bytes(32, "little"), n)
            for conv, (total, n) in sorted(sums.items())])
