"""The undo journal the memory store's parts share: one lock, and a rollback that restores.

`MemoryJournal` holds the re-entrant lock and, inside a transaction, a list of inverses: each
write through `_own`, `_set` or `_replace` records how to undo itself, and a transaction that
raises runs them last first. Invariant: a transaction that raises leaves every table as it
found it (the attributes named in `_rebound` are restored whole), as a SQLite rollback does.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar


def _alike(table: dict[Any, Any], rows: dict[Any, Any]) -> dict[Any, Any]:
    """`rows` in a container of `table`'s type (a `defaultdict` keeps its default)."""
    return defaultdict(table.default_factory, rows) if isinstance(table, defaultdict) else rows


class MemoryJournal:
    """The lock, the undo journal and the change token of a store held in memory."""

    # attributes a write rebinds without journaling: saved when a transaction opens, put back
    # when it raises
    _rebound: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._undo: list[Callable[[], object]] | None = None  # set inside a transaction
        self._copied: set[tuple[object, object]] = set()
        self._version = 0  # bumped by every commit, never restored: a rollback only invalidates

    @contextmanager
    def transaction(self, *convs: str) -> Iterator[None]:  # noqa: ARG002 (one lock: every writer waits)
        with self._lock:
            if self._undo is not None:
                yield
                return
            self._undo, self._copied = [], set()
            saved = [getattr(self, name) for name in self._rebound]
            try:
                yield
            except BaseException:
                for undo in reversed(self._undo):
                    undo()
                for name, value in zip(self._rebound, saved, strict=True):
                    setattr(self, name, value)
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

    def _replace(self, name: str, value: Any) -> None:
        """Rebind the table `name` to `value`; a rollback rebinds the old one (left untouched)."""
        old = getattr(self, name)
        if self._undo is not None:
            self._undo.append(lambda: setattr(self, name, old))
        setattr(self, name, value)

    def _drop(self, conv: str, whole: tuple[str, ...], keyed: tuple[tuple[str, int], ...]) -> None:
        """Rebind the tables named in `whole` (keyed by conversation) and in `keyed` (keyed by a
        tuple with the conversation at the given place) without `conv`'s entries."""
        for name in whole:
            table = getattr(self, name)
            self._replace(name, _alike(table, {k: v for k, v in table.items() if k != conv}))
        for name, at in keyed:
            table = getattr(self, name)
            self._replace(name, _alike(table, {k: v for k, v in table.items() if k[at] != conv}))

    def in_transaction(self) -> bool:
        return self._undo is not None

    def change_token(self) -> object:
        return self._version
