"""Wake-ups for live subscribers: "conversation C may have new records".

A `Hub` lives on the server's event loop. Three things ring it: this instance's own
ingests, PostgreSQL NOTIFY from every instance sharing the database (the store publishes
them at commit), and, for SQLite, a poll of the store's change token (another process
may write the file). A wake-up carries no data: the subscriber reads `Store.since` from
its cursor, so a lost or doubled wake-up costs a query, never a record.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable


class Hub:
    """Per-conversation wake-ups for the coroutines waiting on the server's loop."""

    def __init__(self) -> None:
        self._waiting: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def ring(self, conv: str | None) -> None:
        """Wake subscribers of `conv` (None: of every conversation); safe from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._ring, conv)
        except RuntimeError:  # the loop is shutting down
            return

    def _ring(self, conv: str | None) -> None:
        targets = self._waiting.values() if conv is None else [self._waiting.get(conv, set())]
        for events in targets:
            for event in events:
                event.set()

    async def wait(self, conv: str, timeout: float) -> None:
        """Return when `conv` is rung or after `timeout` seconds, whichever comes first."""
        event = asyncio.Event()
        self._waiting[conv].add(event)
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._waiting[conv].discard(event)
            if not self._waiting[conv]:
                del self._waiting[conv]

    def subscribed(self) -> bool:
        return bool(self._waiting)


async def poll(hub: Hub, token: Callable[[], object], every_s: float) -> None:
    """Ring every conversation whenever the store's change token moves (SQLite's source)."""
    last = await asyncio.to_thread(token)
    while True:
        await asyncio.sleep(every_s)
        if not hub.subscribed():
            continue
        now = await asyncio.to_thread(token)
        if now != last:
            last = now
            hub.ring(None)
