"""`GET /v1/conversations/{conv}/events`: a conversation's new records as server-sent events.

Invariant: the stream of a key that lost `read` in a rooted conversation ends with a `forbidden`
event (the 403's body) before anything that follows the revocation.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from convgraph.core.rooted import is_rooted
from convgraph.errors import ForbiddenError, MissingExtraError
from convgraph.server.gate import Gate
from convgraph.server.shell import error, forbidden_body
from convgraph.store.base import Store
from convgraph.sync.live import Hub, record_events

try:  # the [server] extra: without it, a typed error that says what to install
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
except ModuleNotFoundError as exc:
    raise MissingExtraError("server", "the sync server", module=exc.name) from exc

_CURSOR = re.compile(r"[0-9]{1,19}", re.ASCII)


class Events:
    """The events route over one store; `hub` rings when a conversation may have new records."""

    def __init__(self, store: Store, gate: Gate, hub: Hub, *, heartbeat_s: float) -> None:
        self.store, self.gate, self.hub, self.heartbeat_s = store, gate, hub, heartbeat_s

    async def events(self, request: Request, actor: bytes, _: bytes) -> Response:
        conv = request.path_params["conv"]
        await run_in_threadpool(self.gate.check_read, actor, [conv])
        after = request.query_params.get("after")
        if after is None:
            after = request.headers.get("last-event-id")
        if after is not None and not _CURSOR.fullmatch(after):
            return error(400, "cursor", f"cursor {after!r} is not a non-negative integer")
        start = int(after) if after is not None else await run_in_threadpool(self.store.cursor, conv)
        return StreamingResponse(self._stream(request, actor, conv, start), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    def _stream(self, request: Request, actor: bytes, conv: str, cursor: int) -> AsyncIterator[bytes]:
        async def refusal() -> dict[str, Any] | None:
            if not is_rooted(conv):
                return None
            try:
                await run_in_threadpool(self.gate.check_read, actor, [conv])
            except ForbiddenError as exc:
                return forbidden_body(exc)
            return None

        return record_events(self.store.since, self.hub, conv, cursor,
                             disconnected=request.is_disconnected, refusal=refusal,
                             heartbeat_s=self.heartbeat_s)


async def relay(listen: Callable[[], AsyncIterator[str]], hub: Hub) -> None:
    """Forward NOTIFYs to the hub, reconnecting after a failure (a subscriber polls meanwhile)."""
    while True:
        try:
            async for conv in listen():
                hub.ring(conv)
        except asyncio.CancelledError:
            raise
        except Exception:  # a dropped listener connection must not take the server down
            hub.ring(None)
            await asyncio.sleep(1.0)
