"""What a replica keeps folded per conversation: its state and, when rooted, its authority state.

Both are brought up to date incrementally from the store (`Store.since` with a cursor), not
rebuilt per call. Records the replica adds to an authority state itself (its own writes and
ingests) inside a transaction are remembered until that transaction is seen committed, so a
rollback is noticed and the state rebuilt. Invariant: a returned state is the fold of exactly
the records the store holds for that conversation (plus, inside a transaction, those added).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from convgraph.core.cid import CID
from convgraph.core.record import Record, RecordMeta, load_trusted
from convgraph.core.rooted import is_rooted
from convgraph.projections import authority as authority_
from convgraph.projections import state as state_
from convgraph.projections.authority import AuthorityState
from convgraph.projections.state import ConvState
from convgraph.store.base import Store

_T = TypeVar("_T")


class Folds:
    """The folded state and authority state of each conversation read through one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # conv -> (folded state, store cursor, records folded in a transaction not yet seen committed)
        self.views: dict[str, tuple[ConvState, int, list[CID]]] = {}
        # conv -> (authority state, store cursor, records added in a transaction not yet seen committed)
        self.authorities: dict[str, tuple[AuthorityState, int, list[CID]]] = {}
        self.hidden: dict[str, tuple[frozenset[CID], int, ConvState]] = {}

    def state(self, conv: str) -> ConvState:
        """The folded state of `conv`, brought up to date incrementally from the store."""

        def start() -> ConvState:
            snap = self.store.snapshot(conv)
            return state_.restore(snap[1]) if snap else ConvState()

        def fold(folded: ConvState, cid: CID, data: bytes) -> None:
            state_.apply(folded, state_.entry_from_bytes(cid, data))

        return self._caught_up(self.views, conv, start, fold)

    def without(self, conv: str, folded: ConvState, hidden: frozenset[CID]) -> ConvState:
        """`folded` less the records `hidden`, kept until either changes."""
        cached = self.hidden.get(conv)
        if cached is None or cached[0] != hidden or cached[1] != folded.count:
            cached = self.hidden[conv] = (hidden, folded.count, state_.without(folded, hidden))
        return cached[2]

    def authority(self, conv: str) -> AuthorityState | None:
        """The authority state of a rooted `conv`, brought up to date from the store (None: legacy)."""
        if not is_rooted(conv):
            return None

        def fold(state: AuthorityState, cid: CID, data: bytes) -> None:
            if cid not in state.ancestry:  # our own writes and ingests were added already
                authority_.apply(state, load_trusted(data, cid))

        return self._caught_up(self.authorities, conv, lambda: self._authority_from_snapshot(conv), fold)

    def _caught_up(
        self,
        cache: dict[str, tuple[_T, int, list[CID]]],
        conv: str,
        start: Callable[[], _T],
        fold: Callable[[_T, CID, bytes], None],
    ) -> _T:
        """`cache[conv]` with what the store added since its cursor folded in (the store's order
        is a topological one); started again with `start()` when a transaction it saw rolled back."""
        cached = cache.get(conv)
        if cached is not None and self._rolled_back(cached[2]):
            cached = None  # folded inside a transaction that rolled back: start again
        value, cursor, unconfirmed = cached or (start(), 0, [])
        fresh, cursor = self.store.since(cursor, conv)
        for cid, data in fresh:
            fold(value, cid, data)
        # records added straight to the value come back from `since` once committed: count each once
        pending = list(dict.fromkeys([*unconfirmed, *(c for c, _ in fresh)]))
        cache[conv] = (value, cursor, pending if self.store.in_transaction() else [])
        return value

    def _authority_from_snapshot(self, conv: str) -> AuthorityState:
        """The authority state of what a compacted `conv` holds as headers only."""
        snap = self.store.snapshot(conv)
        if snap is None:
            return AuthorityState()
        return authority_from(conv, snap[1], self.store.metas(state_.restore(snap[1]).entries))

    def added(self, conv: str, cids: Iterable[CID]) -> None:
        """`cids` were added to `conv`'s authority state directly, inside a transaction."""
        cached = self.authorities.get(conv)
        if cached is not None and self._rolled_back(cached[2]):
            del self.authorities[conv]  # the next read rebuilds it from what the store holds
        elif cached is not None:
            cached[2].extend(cids)

    def _rolled_back(self, unconfirmed: list[CID]) -> bool:
        """Whether the records a state took in on trust were rolled back. A transaction lands
        whole or not at all, and the list grows in the order they were taken in, checked before
        each addition: so the newest one tells, one look-up, not one per record of the transaction."""
        return bool(unconfirmed) and not self.store.metas(unconfirmed[-1:])

    def caught_up_to(self, convs: Iterable[str], cursor: int) -> None:
        """Every record of these conversations that the store holds up to `cursor` was added to
        their authority states directly, inside the current transaction: no need to read it back.

        Their lists of unconfirmed records are not empty, so a rollback is still noticed.
        """
        for conv in convs:
            cached = self.authorities.get(conv)
            if cached is not None and cached[2]:
                self.authorities[conv] = (cached[0], max(cached[1], cursor), cached[2])

    def confirmed(self, convs: Iterable[str]) -> None:
        """The outermost transaction committed: what it added to these states is stored."""
        if self.store.in_transaction():
            return  # a caller's transaction may still roll back: keep checking
        for conv in convs:
            cached = self.authorities.get(conv)
            if cached is not None:
                cached[2].clear()

    def drop(self, conv: str) -> None:
        """Forget what is folded of `conv`: the next read rebuilds it from the store."""
        self.views.pop(conv, None)
        self.authorities.pop(conv, None)


def authority_from(conv: str, snapshot: bytes, headers: Mapping[CID, RecordMeta]) -> AuthorityState:
    """Each snapshot entry's kind, payload and branch, with its seq and parents from its header."""
    state = AuthorityState()
    entries = sorted(state_.restore(snapshot).entries.values(), key=lambda e: e.order_key)
    for e in entries:  # canonical order is a topological one; `verify` checks the cover
        header = headers.get(e.cid)
        if header is not None:
            authority_.apply(state, Record(conv, e.actor, header.seq, e.hlc, header.parents, e.kind,
                                           e.payload, (), e.branch, b"", b"", e.cid))
    return state
