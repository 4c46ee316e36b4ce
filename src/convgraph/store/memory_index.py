"""The turn index of the memory store (docs/conversation.md §8): rows in canonical order.

Each (conversation, line | target | branch name) keeps its rows sorted by order key, so a
window is a bisection; the hidden set is kept with the arrival count it was set at. Invariant:
the rows are exactly those `row_of` derives from the stored records (and from adopted
snapshots), as in the SQL stores' `turn_*` tables.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from convgraph.core.cid import CID
from convgraph.core.record import RecordMeta
from convgraph.projections.index_rows import BranchRow, LineRow, OrderKey, Row, TargetRow
from convgraph.store.memory_journal import MemoryJournal


class MemoryIndex(MemoryJournal):
    """The turn index tables and their reads; `MemoryStore` adds a record's row as it stores it."""

    # the records tables `MemoryStore` keeps, which the index reads
    _data: dict[CID, bytes]
    _meta: dict[CID, RecordMeta]
    _arrival: list[CID]

    def __init__(self) -> None:
        super().__init__()
        # (conv, line | target | name) -> rows in canonical order
        self._lines: dict[tuple[str, str], list[tuple[OrderKey, str]]] = defaultdict(list)
        self._targets: dict[tuple[str, CID], list[tuple[OrderKey, str]]] = defaultdict(list)
        self._branch_rows: dict[tuple[str, str], list[tuple[OrderKey, CID]]] = defaultdict(list)
        self._hidden: dict[str, tuple[frozenset[CID], int]] = {}  # conv -> (hidden, arrivals when set)

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

    def _forget_index(self, conv: str) -> None:
        self._drop(conv, ("_hidden",), (("_lines", 0), ("_targets", 0), ("_branch_rows", 0)))
