"""Answers of `Replica.resume` and `Replica.resume_window`, kept while the store stays as it was,
and a main-line window moved on by the turns appended since, instead of read again.

A resume is a pure function of what the store holds (records, turn index rows, hidden
sets), and `Store.change_token()` moves whenever any of that changes, from this connection
or another. So an answer computed after the token was read is still right while the
token reads the same: the token is read first, and a commit landing meanwhile only makes
the entry unreachable. Nothing is kept from inside an open transaction, which may roll
back without moving the token. Each call gets its own lists and maps, so a caller that
appends to the messages, or marks one for prompt caching, changes no later answer;
rendered messages are kept from the second time they are asked for under one token.

When the token moved, a main-line window is extended rather than read again if everything
that arrived since is turns of this conversation appended after the line's last entry:
no other record arrived in between (arrival ids are consecutive), each is a turn kind on
no branch, ordered after the line's last key, no retraction or supersession names it, and
(rooted) the hidden set is the one the window was read with. A window is the shortest tail
of the visible turns that opens on a user turn with text and holds `last`, so the new one
is `window_of` over the old one and the new turns. Anything else reads the index again.
Reads on either path count only when the token reads the same before and after them.
Moving on trusts the turn index to be the function of the records it must be (`verify`
checks it); `forget`, which `Replica.repair_index` calls, drops every kept window.
Invariant: every answer equals the uncached one, byte for byte.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.core.rooted import is_rooted
from convgraph.errors import ConvgraphError
from convgraph.projections.index_rows import MAIN
from convgraph.projections.resume import Cleaned, to_provider
from convgraph.projections.state import Entry, OrderKey, entry_from_bytes
from convgraph.projections.transcript import Window, window_of
from convgraph.projections.turn import TURN_KINDS, Turn
from convgraph.projections.window import Cache, cached_turn
from convgraph.store.base import Store

LIMIT: Final = 16
"""Answers kept (least recently used first out): a few conversations, providers and windows."""
MAX_TURNS: Final = 4096
"""A window longer than this is not kept: memory stays bounded by windows, not history."""
MAX_NEW: Final = 64
"""More new records than this and the window is read again."""

WindowOf = Callable[[str, "str | None", "int | None"], Window]
"""`(conv, branch, last)` → the window, computed afresh."""


@dataclass(frozen=True)
class _Base:
    """A main-line window, and what the store held when it was read."""

    cursor: int  # `Store.cursor()`: every record that arrived later is newer
    top: OrderKey | None  # the main line's last key (a merge, a hidden turn …)
    hidden: frozenset[CID] | None  # a rooted conversation's hidden set (None: legacy)
    window: Window


class ResumeCache:
    """Windows and rendered messages by `(conv, branch, last[, provider])`, for one token."""

    def __init__(
        self, store: Store, window_of: WindowOf, *, decoded: Cache | None = None, limit: int = LIMIT
    ) -> None:
        self.store = store
        self.limit = limit
        self._window_of = window_of
        self._decoded: Cache = {} if decoded is None else decoded  # the index's: turns made here land there
        self._cleaned: Cleaned = {}  # each turn's cleaned message: a moved window cleans only its new turns
        self._lock = threading.Lock()
        # one assignment swaps token and entries together: a reader sees an old pair or a new one
        self._held: tuple[object, OrderedDict[Hashable, Any]] = (_NOTHING, OrderedDict())
        self._bases: OrderedDict[tuple[str, int | None], _Base] = OrderedDict()

    def window(self, conv: str, *, branch: str | None, last: int | None) -> Window:
        """`window_of(conv, branch, last)`, from the cache when the store has not changed."""
        token, entries = self._entries()
        found = self._window(token, entries, conv, branch, last)
        return Window(list(found.turns), found.widened)

    def resume(
        self, conv: str, provider: str, *, branch: str | None, last: int | None
    ) -> list[dict[str, Any]]:
        """`to_provider(window.turns, provider)`, from the cache when the store has not changed."""
        token, entries = self._entries()
        key = ("resume", conv, branch, last, provider)
        found = self._get(entries, key)
        if found is not None and found is not _ONCE:
            return [_fresh(m) for m in found]
        turns = self._window(token, entries, conv, branch, last).turns
        out = to_provider(turns, provider, memo=self._cleaned)
        # kept (a copy: `out` is the caller's) once asked twice for one state: an agent loop,
        # whose every resume follows a write, never pays for the copy
        self._put(entries, key, _ONCE if found is None else [_fresh(m) for m in out], len(turns))
        return out

    def forget(self) -> None:
        """Drop every answer and base (the index was rebuilt: rows no record change moved)."""
        with self._lock:
            self._held = (_NOTHING, OrderedDict())
            self._bases.clear()

    def _entries(self) -> tuple[object, OrderedDict[Hashable, Any] | None]:
        """The token and the entries valid now (None: inside a transaction, keep nothing)."""
        if self.store.in_transaction():
            return _NOTHING, None
        token = self.store.change_token()
        held, entries = self._held
        if held != token:
            entries = OrderedDict()
            self._held = (token, entries)
        return token, entries

    def _window(self, token: object, entries: OrderedDict[Hashable, Any] | None, conv: str,
                branch: str | None, last: int | None) -> Window:
        key = ("window", conv, branch, last)
        found = self._get(entries, key)
        if found is None:
            if entries is None or branch is not None:
                found = self._window_of(conv, branch, last)
            else:
                found = self._moved(token, conv, last) or self._read(token, conv, last)
            self._put(entries, key, found, len(found.turns))
        assert isinstance(found, Window)
        return found

    def _read(self, token: object, conv: str, last: int | None) -> Window:
        """The main-line window read afresh, kept as a base when nothing changed meanwhile."""
        store = self.store
        cursor = store.cursor(conv)
        top = store.line(conv, MAIN, None, 1)
        hidden = store.hidden(conv) if is_rooted(conv) else None
        window = self._window_of(conv, None, last)
        if (hidden is not None or not is_rooted(conv)) and len(window.turns) <= MAX_TURNS \
                and store.change_token() == token:
            self._keep((conv, last), _Base(cursor, top[0].key if top else None, hidden, window))
        return window

    def _moved(self, token: object, conv: str, last: int | None) -> Window | None:
        """The kept window of `conv` moved on by the turns appended since (None: read it again)."""
        with self._lock:
            base = self._bases.get((conv, last))
        if base is None:
            return None
        store = self.store
        if store.cursor(conv) - base.cursor > MAX_NEW:
            return None  # more arrived than a move is worth (and `since` would read it all)
        arrived, cursor = store.since(base.cursor, conv)
        if not arrived or len(arrived) > MAX_NEW or cursor - base.cursor != len(arrived):
            return None  # nothing of ours (the token moved for another reason), or not ours alone
        try:
            new = sorted((entry_from_bytes(cid, data) for cid, data in arrived), key=lambda e: e.order_key)
        except ConvgraphError:
            return None
        if any(e.kind not in TURN_KINDS or e.branch is not None for e in new):
            return None
        if base.top is not None and new[0].order_key <= base.top:
            return None  # a late record lands inside the line
        cids = [e.cid for e in new]
        if store.targets(conv, cids):
            return None  # retracted or superseded already (the retraction arrived first)
        if base.hidden is not None:
            hidden = store.hidden(conv)
            if hidden != base.hidden or any(c in base.hidden for c in cids):
                return None
        window = window_of(reversed([*base.window.turns, *map(self._turn, new)]), last)
        if store.change_token() != token:
            return None
        self._keep((conv, last), _Base(cursor, new[-1].order_key, base.hidden, window))
        return window

    def _turn(self, entry: Entry) -> Turn:
        """The turn `entry` makes, shared with the turn index's cache (a later read finds it)."""
        return cached_turn(self._decoded, entry)

    def _keep(self, key: tuple[str, int | None], base: _Base) -> None:
        if len(base.window.turns) > MAX_TURNS:
            return
        with self._lock:
            self._bases[key] = base
            self._bases.move_to_end(key)
            while len(self._bases) > self.limit:
                self._bases.popitem(last=False)

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
_ONCE: Final = object()  # an answer given once for this token, not kept


def _fresh(value: Any) -> Any:
    """`value` with every list and map copied (strings, bytes and numbers are immutable)."""
    kind = type(value)
    if kind is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if kind is list:
        return [_fresh(v) for v in value]
    return value
