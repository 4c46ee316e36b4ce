"""Answers of `Replica.resume` and `Replica.resume_window`, kept while the store stays as it was.

A resume is a pure function of what the store holds (records, turn index rows, hidden
sets), and `Store.change_token()` moves whenever any of that changes, from this connection
or another. So an answer computed after the token was read is still right while the
token reads the same: the token is read first, and a commit landing meanwhile only makes
the entry unreachable. Nothing is kept from inside an open transaction, which may roll
back without moving the token. Each call gets its own lists and maps, so a caller that
appends to the messages, or marks one for prompt caching, changes no later answer.
Invariant: every answer equals the uncached one, byte for byte.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Final

from convgraph.projections.resume import Cleaned, to_provider
from convgraph.projections.transcript import Window
from convgraph.store.base import Store

LIMIT: Final = 16
"""Answers kept (least recently used first out): a few conversations, providers and windows."""
MAX_TURNS: Final = 4096
"""A window longer than this is not kept: memory stays bounded by windows, not history."""

WindowOf = Callable[[str, "str | None", "int | None"], Window]
"""`(conv, branch, last)` → the window, computed afresh."""


class ResumeCache:
    """Windows and rendered messages by `(conv, branch, last[, provider])`, for one token."""

    def __init__(self, store: Store, window_of: WindowOf, *, limit: int = LIMIT) -> None:
        self.store = store
        self.limit = limit
        self._window_of = window_of
        self._cleaned: Cleaned = {}  # each turn's cleaned message: a moved window cleans only its new turns
        self._lock = threading.Lock()
        # one assignment swaps token and entries together: a reader sees an old pair or a new one
        self._held: tuple[object, OrderedDict[Hashable, Any]] = (_NOTHING, OrderedDict())

    def window(self, conv: str, *, branch: str | None, last: int | None) -> Window:
        """`window_of(conv, branch, last)`, from the cache when the store has not changed."""
        entries = self._entries()
        found = self._window(entries, conv, branch, last)
        return Window(list(found.turns), found.widened)

    def resume(
        self, conv: str, provider: str, *, branch: str | None, last: int | None
    ) -> list[dict[str, Any]]:
        """`to_provider(window.turns, provider)`, from the cache when the store has not changed."""
        entries = self._entries()
        key = ("resume", conv, branch, last, provider)
        found = self._get(entries, key)
        if found is None:
            turns = self._window(entries, conv, branch, last).turns
            found = to_provider(turns, provider, memo=self._cleaned)
            self._put(entries, key, found, len(turns))
        return [_fresh(m) for m in found]

    def _entries(self) -> OrderedDict[Hashable, Any] | None:
        """The entries valid now (None: inside a transaction, keep nothing)."""
        if self.store.in_transaction():
            return None
        token = self.store.change_token()
        held, entries = self._held
        if held != token:
            entries = OrderedDict()
            self._held = (token, entries)
        return entries

    def _window(self, entries: OrderedDict[Hashable, Any] | None, conv: str, branch: str | None,
                last: int | None) -> Window:
        key = ("window", conv, branch, last)
        found = self._get(entries, key)
        if found is None:
            found = self._window_of(conv, branch, last)
            self._put(entries, key, found, len(found.turns))
        assert isinstance(found, Window)
        return found

    def _get(self, entries: OrderedDict[Hashable, Any] | None, key: Hashable) -> Any:
        if entries is None:
            return None
        with self._lock:
            found = entries.get(key)
            if found is not None:
                entries.move_to_end(key)
            return found

    def _put(self, entries: OrderedDict[Hashable, Any] | None, key: Hashable, value: Any, turns: int) -> None:
        if entries is None or turns > MAX_TURNS:
            return
        with self._lock:
            entries[key] = value
            while len(entries) > self.limit:
                entries.popitem(last=False)


_NOTHING: Final = object()


def _fresh(value: Any) -> Any:
    """`value` with every list and map copied (strings, bytes and numbers are immutable)."""
    kind = type(value)
    if kind is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if kind is list:
        return [_fresh(v) for v in value]
    return value
