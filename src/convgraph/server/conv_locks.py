"""The server's locks, one pair per conversation, made on demand: no lock spans conversations.

`writing(conv)` serialises the writers of one conversation in this process: a part of a push,
an adoption, blocks taken for it; it is held per part, never across a whole push. `reading(conv)`
serialises the readers of one conversation's folded access state among themselves (catching it
up mutates it) and is never taken by a writer, so a reader waits for other readers only; what
it reads is the last committed state (`Replica.reader`). The registry's own lock is held only
to find or make an entry. A small sync message that pushes to several conversations holds
their writer locks together, for its one transaction (server/sync_endpoint.py). Invariant: a
thread that holds the locks of two conversations took them in name order, and took every
writer lock before any reader lock or store transaction, so no two threads wait on each other;
an entry lives while a thread holds or waits for it (then it is dropped, so the registry holds
only the conversations in use).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class _Entry:
    __slots__ = ("read", "users", "write")

    def __init__(self) -> None:
        self.write, self.read, self.users = threading.Lock(), threading.Lock(), 0


class ConvLocks:
    """A writer lock and a reader lock per conversation, kept while in use."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._guard = threading.Lock()  # held to find, make or drop an entry: never while waiting

    @contextlib.contextmanager
    def writing(self, conv: str) -> Iterator[None]:
        """Hold `conv`'s writer lock: no other writer of `conv` in this process meanwhile."""
        with self._use(conv) as entry, entry.write:
            yield

    @contextlib.contextmanager
    def reading(self, conv: str) -> Iterator[None]:
        """Hold `conv`'s reader lock: no other reader of `conv`'s folded access state meanwhile."""
        with self._use(conv) as entry, entry.read:
            yield

    def held(self) -> int:
        """How many conversations have an entry now (a thread holds or waits for its lock)."""
        with self._guard:
            return len(self._entries)

    @contextlib.contextmanager
    def _use(self, conv: str) -> Iterator[_Entry]:
        with self._guard:
            entry = self._entries.get(conv)
            if entry is None:
                entry = self._entries[conv] = _Entry()
            entry.users += 1
        try:
            yield entry
        finally:
            with self._guard:
                entry.users -= 1
                if not entry.users:
                    del self._entries[conv]
