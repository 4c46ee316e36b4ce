"""What sync reads about a conversation, kept per store behind the conversation's change token.

A sync section asks for the conversation's key set (sorted keys and prefix sums), its heads
and whether its records name any artifact. Read whole, the key set costs O(history) at
every message; here it is read whole once per process and then grown by `Store.keys_since`
each time `Store.conv_token` moves, so an idle sync costs one token read. One `ConvCache`
serves every session over one store object (`of(store)`): every request of a server
process, every `ReplicaPeer` a bench or a client makes. A conversation whose heads vanish
was forgotten (`Store.forget` drops all of it): its entry starts over.

A state read inside a transaction is kept only when the caller says the transaction committed
(`landing`), as the sync route does for a message it lands in one.

Invariant: a state handed out for token `t` holds every key, head and artifact name the
store held when `t` was read, and nothing the store did not hold then or since: the token
is read before the data, and the set only grows until the conversation is forgotten.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from convgraph.core.cid import CID
from convgraph.store.base import Store
from convgraph.sync.keyset import Key, KeySet

__all__ = ["ConvCache", "ConvState", "of"]


@dataclass
class ConvState:
    """One conversation as of `token`: its key set, heads, the `keys_since` cursor to grow it
    from, and whether its records name artifacts (None until asked)."""

    token: object
    keys: KeySet
    heads: tuple[CID, ...]
    cursor: int
    artifacts: bool | None = None


class ConvCache:
    """Per-conversation sync state of one store, shared by every thread; bounded in
    conversations and in keys held (least recently used first out)."""

    def __init__(self, store: Store, *, max_convs: int = 4096, max_keys: int = 4_000_000) -> None:
        self.store, self.max_convs, self.max_keys = store, max_convs, max_keys
        self._states: OrderedDict[str, ConvState] = OrderedDict()
        self._held = 0  # keys across `_states`
        self._lock = threading.Lock()
        self._refreshing: dict[str, threading.Lock] = {}
        self._local = threading.local()  # `landing`'s states, per thread
        self.reads = {"hit": 0, "grown": 0, "full": 0}  # how states were made: for tests and benches

    def state(self, conv: str) -> ConvState:
        """`conv` as of now (at least): from the cache when its token has not moved."""
        store = self.store
        token = store.conv_token(conv)
        # asked after the token: on SQLite, whose one connection serialises threads, the read
        # waited for another thread's transaction to end; one still open is this thread's,
        # whose writes may yet roll back: grow a copy from what is cached, keep nothing
        hit = self._get(conv)
        if store.in_transaction():
            if hit is not None and hit.token == token:
                return hit
            state = self._read(conv, token, hit)
            landing = getattr(self._local, "landing", None)
            if landing is not None:  # kept if the transaction commits (`landing`)
                landing[conv] = state
            return state
        if hit is not None and hit.token == token:
            self.reads["hit"] += 1
            return hit
        with self._refresh_lock(conv):  # one refresh per conversation at a time: the rest reuse it
            hit = self._get(conv)
            if hit is not None and hit.token == token:
                return hit
            state = self._read(conv, token, hit)  # `token` was read before: the data is no older
            self._put(conv, state)
        return state

    @contextlib.contextmanager
    def landing(self) -> Iterator[None]:
        """Around a transaction of this thread: the states read inside it are kept once it
        has committed (the block ended without raising), dropped if it rolled back."""
        self._local.landing = kept = dict[str, ConvState]()
        try:
            yield
        finally:
            self._local.landing = None
        for conv, state in kept.items():  # committed: each is the store's state as of its token
            self._put(conv, state)

    def keys(self, conv: str) -> KeySet:
        return self.state(conv).keys

    def heads(self, conv: str) -> list[CID]:
        return list(self.state(conv).heads)

    def has_artifacts(self, conv: str) -> bool:
        """Whether any record of `conv` names an artifact (`Store.artifact_refs`)."""
        return self.names_artifacts(conv, self.state(conv))

    def names_artifacts(self, conv: str, state: ConvState) -> bool:
        """Whether any record of `conv` names an artifact, as of `state` or later."""
        if state.artifacts is None:
            state.artifacts = bool(self.store.artifact_refs(conv))
        return state.artifacts

    def drop(self, conv: str) -> None:
        """Forget what is cached of `conv`: the next read starts over."""
        with self._lock:
            gone = self._states.pop(conv, None)
            if gone is not None:
                self._held -= len(gone.keys)

    def _read(self, conv: str, token: object, hit: ConvState | None) -> ConvState:
        store = self.store
        heads = tuple(store.heads(conv))  # before the keys: the keys then cover every head
        if not heads:  # none held, or forgotten since: nothing to grow from
            return ConvState(token, KeySet([]), (), 0, False)
        if hit is None or not hit.heads:
            fresh, cursor = store.keys_since(conv, 0)
            self.reads["full"] += 1
            return ConvState(token, _sorted_set(fresh), heads, cursor)
        fresh, cursor = store.keys_since(conv, hit.cursor)
        self.reads["grown"] += 1
        # no new record: the artifact names are those already known; and a conversation that
        # named one still does (were it not so, True only costs the look-ups it would skip)
        return ConvState(token, hit.keys.adding(fresh, share=True), heads, cursor,
                         hit.artifacts if not fresh or hit.artifacts else None)

    def _get(self, conv: str) -> ConvState | None:
        with self._lock:
            hit = self._states.get(conv)
            if hit is not None:
                self._states.move_to_end(conv)
            return hit

    def _put(self, conv: str, state: ConvState) -> None:
        with self._lock:
            old = self._states.pop(conv, None)
            self._held += len(state.keys) - (len(old.keys) if old is not None else 0)
            self._states[conv] = state
            while len(self._states) > 1 and (len(self._states) > self.max_convs
                                             or self._held > self.max_keys):
                _, out = self._states.popitem(last=False)
                self._held -= len(out.keys)

    def _refresh_lock(self, conv: str) -> threading.Lock:
        with self._lock:
            lock = self._refreshing.get(conv)
            if lock is None:
                if len(self._refreshing) > 4 * self.max_convs:  # idle locks are cheap to make again
                    self._refreshing = {c: lk for c, lk in self._refreshing.items() if lk.locked()}
                lock = self._refreshing[conv] = threading.Lock()
            return lock


def _sorted_set(keys: list[Key]) -> KeySet:
    """A key set of `keys` (as the store returns them: in its index's order, nearly sorted, so
    sorting them first is about linear; a set would scramble them and cost a full sort)."""
    keys.sort()
    return KeySet([k for i, k in enumerate(keys) if not i or k != keys[i - 1]])


_CACHES: weakref.WeakKeyDictionary[Store, ConvCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def of(store: Store) -> ConvCache:
    """The one cache of `store` in this process (made at the first call, gone with the store)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(store)
        if cache is None:
            cache = _CACHES[store] = ConvCache(store)
        return cache
