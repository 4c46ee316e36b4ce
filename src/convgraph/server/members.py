"""The keys a sync server knows through rooted conversations: each one's owner and grantees.

It answers the cheap check made before a request's body is read (docs/sync.md, order of
checks): a key that owns, or was granted anything in, a rooted conversation the store holds
gets past it, and the authority projection then says what it may do. The index is a superset
of the members on purpose: a revoked key stays in it, so that its refusal can cite the
revocation rather than say the key is unknown. It is refreshed from the store, not from this
process's writes, whenever the store's change token has moved since the last refresh, so a
grant stored through another instance over the same database counts as soon as it commits.
Invariant: after `knows` returns, every owner and grantee of a committed genesis or grant that
the store held when the call began is in the index.
"""

from __future__ import annotations

import threading
from typing import Final

from convgraph.core.record import load_trusted
from convgraph.core.rooted import is_rooted
from convgraph.store.base import Store

_PAGE: Final = 1000
_NEVER: Final = object()  # a change token no store hands out: the first call always reads


class MemberIndex:
    """Owners and grantees of the rooted conversations `store` holds, read incrementally."""

    def __init__(self, store: Store, *, page: int = _PAGE) -> None:
        self._store, self._page = store, page
        self._keys: frozenset[bytes] = frozenset()  # replaced whole: readers need no lock
        self._cursor = 0
        self._token: object = _NEVER
        self._lock = threading.Lock()  # one refresh at a time; each reads only what is new

    def known(self, actor: bytes) -> bool:
        """Whether `actor` was in the index at its last refresh (memory only: no I/O)."""
        return actor in self._keys

    def knows(self, actor: bytes) -> bool:
        """Whether `actor` owns or was granted anything in a rooted conversation held now.

        Reads the store only when `actor` is not known yet and the store changed since the
        last refresh: one change-token read, and the records that arrived since.
        """
        if actor in self._keys:
            return True
        with self._lock:
            token = self._store.change_token()  # before the read: a commit after it moves it again
            if token != self._token:
                self._keys = self._keys | self._read_new()
                self._token = token
        return actor in self._keys

    def _read_new(self) -> set[bytes]:
        found: set[bytes] = set()
        while True:
            page, cursor = self._store.arrivals(self._cursor, self._page)
            if cursor == self._cursor:
                return found
            self._cursor = cursor
            for conv, cid, data in page:
                if not is_rooted(conv):
                    continue
                record = load_trusted(data, cid)
                if record.kind == "genesis":
                    found.add(record.actor)
                elif record.kind == "grant":
                    found.add(record.payload["grantee"])
