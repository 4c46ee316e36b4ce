"""Wake-ups for live subscribers: "conversation C may have new records".

A `Hub` lives on the server's event loop. Three things ring it: this instance's own
ingests, PostgreSQL NOTIFY from every instance sharing the database (the store publishes
them at commit), and, for SQLite, a poll of the store's change token (another process
may write the file). A wake-up carries no data: the subscriber reads `Store.since` from
its cursor, so a lost or doubled wake-up costs a query, never a record.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from convgraph.core.cid import CID
from convgraph.errors import MissingExtraError

try:  # the [server] extra: without it, a typed error that says what to install
    from starlette.concurrency import run_in_threadpool
except ModuleNotFoundError as exc:
    raise MissingExtraError("server", "the sync server", module=exc.name) from exc

Since = Callable[[int, str], tuple[list[tuple[CID, bytes]], int]]


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


async def record_events(
    since: Since, hub: Hub, conv: str, cursor: int, *, disconnected: Callable[[], Awaitable[bool]],
    refusal: Callable[[], Awaitable[dict[str, Any] | None]], heartbeat_s: float,
) -> AsyncIterator[bytes]:
    """The server-sent events of `conv` after `cursor` (docs/sync.md): `ready`, then each new
    record as `record` with `{cid, record}` (base64 DAG-CBOR), the cursor as the id of the last
    of a batch, and a comment line each `heartbeat_s` when quiet. Before each batch `refusal()`
    asks whether the reader may still read; a reason ends the stream with `forbidden`."""
    yield f"event: ready\nid: {cursor}\ndata: {json.dumps({'cursor': cursor})}\n\n".encode()
    while not await disconnected():
        found, cursor = await run_in_threadpool(since, cursor, conv)
        if found:
            refused = await refusal()
            if refused is not None:  # a revocation that landed ends the stream before what follows it
                yield f"event: forbidden\ndata: {json.dumps(refused)}\n\n".encode()
                return
        for i, (cid, data) in enumerate(found):
            payload = json.dumps({"cid": str(cid), "record": base64.b64encode(data).decode()})
            ident = f"id: {cursor}\n" if i == len(found) - 1 else ""
            yield f"event: record\n{ident}data: {payload}\n\n".encode()
        if not found:
            await hub.wait(conv, heartbeat_s)
            yield b": keep-alive\n\n"
