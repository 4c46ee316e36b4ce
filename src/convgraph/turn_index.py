"""The replica's side of the turn index (docs/conversation.md §8): windows and transcripts
read from it, the hidden set kept beside it, and its check and repair against the records.

`TurnIndex.resume_window` / `transcript` answer from the index in O(window) rows, or return
None when the fold must answer instead (a rooted conversation without a current hidden set,
a window needing a compacted record). `keep_hidden` stores a rooted conversation's hidden set
inside the transaction that stored its records. Invariant: whatever they return equals what
the fold of the same records gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Final, TypeVar

from convgraph.core.cid import CID
from convgraph.core.rooted import is_rooted
from convgraph.errors import CompactedError
from convgraph.projections import authority as authority_
from convgraph.projections import window
from convgraph.projections.authority import AuthorityState
from convgraph.projections.index_rows import OrderKey
from convgraph.projections.state import Entry
from convgraph.projections.transcript import Window
from convgraph.projections.turn import Turn
from convgraph.store.base import Store

_T = TypeVar("_T")
CACHE_SIZE: Final = 8192  # decoded entries kept between calls (a warm window decodes nothing)


class _Bounded(dict[CID, tuple[Entry, Turn | None]]):
    """A cache that starts afresh when full: memory stays bounded, the window stays warm."""

    def __setitem__(self, key: CID, value: tuple[Entry, Turn | None]) -> None:
        if len(self) >= CACHE_SIZE and key not in self:
            self.clear()
        super().__setitem__(key, value)


class TurnIndex:
    """Reads of one store's turn index, with decoded records cached by CID (they never change)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.cache = _Bounded()

    def resume_window(
        self, conv: str, *, branch: str | None = None, last: int | None = None
    ) -> Window | None:
        """`transcript.resume_window` of `conv` from the index; None: fold instead."""
        return self._answer(conv, partial(window.resume_window, branch=branch, last=last, cache=self.cache))

    def transcript(
        self, conv: str, *, branch: str | None = None, last: int | None = None
    ) -> list[Turn] | None:
        """`transcript.transcript` of `conv` from the index; None: fold instead."""
        return self._answer(conv, partial(window.transcript, branch=branch, last=last, cache=self.cache))

    def _answer(self, conv: str, read: Callable[[window.Reads], _T]) -> _T | None:
        with self.store.reading():  # every page and look-up of one answer sees one state
            reads = self.reads(conv)
            if reads is None:
                return None
            try:
                return read(reads)
            except CompactedError:
                return None

    def reads(self, conv: str) -> window.Reads | None:
        """How a window reads `conv`; None for a rooted conversation without a current hidden set."""
        rooted = is_rooted(conv)
        hidden = self.store.hidden(conv) if rooted else frozenset()
        if hidden is None:
            return None
        s = self.store
        return window.Reads(partial(s.line, conv), partial(s.targets, conv), partial(s.branch_rows, conv),
                            partial(held, s, conv), hidden, any_retractor=rooted)


def held(store: Store, conv: str, cids: Sequence[CID]) -> Mapping[CID, tuple[OrderKey, bytes]]:
    """Those of `cids` that `conv` holds, with their order key and bytes (empty: compacted)."""
    metas = {c: m for c, m in store.metas(cids).items() if m.conv == conv}
    data = store.get_many(metas) if metas else {}
    return {c: ((m.hlc.wall_ms, m.hlc.counter, m.actor, bytes(c)), data.get(c, b""))
            for c, m in metas.items()}


def keep_hidden(store: Store, convs: Iterable[tuple[str, AuthorityState | None]]) -> None:
    """Store each rooted conversation's hidden set from its authority state, which must hold
    every record the store holds of it (call inside the transaction that stored them)."""
    for conv, state in convs:
        if state is not None:
            store.set_hidden(conv, authority_.hidden(state))
