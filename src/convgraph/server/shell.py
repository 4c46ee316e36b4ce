"""The shell every signed route runs in: the body within bounds, the signature checked, typed
errors turned into HTTP answers (docs/sync.md, "Order of checks").

Invariant: the cheapest refusal comes first, and a handler acts only after the request's
signature is checked; `guarded` handlers only after its nonce is recorded too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from convgraph.core.hlc import Clock
from convgraph.errors import (
    AuthError,
    ConvgraphError,
    ForbiddenError,
    MissingExtraError,
    ProtocolError,
    StoreBusyError,
    StoreError,
)
from convgraph.server.gate import Gate
from convgraph.sync.auth import Signed, Verifier

try:  # the [server] extra: without it, a typed error that says what to install
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
except ModuleNotFoundError as exc:
    raise MissingExtraError("server", "the sync server", module=exc.name) from exc

Handler = Callable[[Request, bytes, bytes], Awaitable[Response]]  # (request, verified actor, body)
SignedHandler = Callable[[Request, Signed, bytes], Awaitable[Response]]  # its nonce not yet recorded


class TooLargeError(Exception):
    """A body over `max_body`, declared or streamed: a 413."""


def error(status: int, rule: str, detail: str, reason: str = "") -> JSONResponse:
    headers = {"WWW-Authenticate": 'Convgraph-Signature realm="convgraph"'} if status == 401 else None
    body = {"error": rule, "detail": detail, "reason": reason or detail}
    return JSONResponse(body, status, headers=headers)


def forbidden_body(exc: ForbiddenError) -> dict[str, Any]:
    """A 403's body; in a rooted conversation it cites the projection: capability, revocations;
    `hint` names the `--allow` rule that would admit the request, when one would."""
    body: dict[str, Any] = {"error": exc.rule, "detail": exc.message, "reason": exc.reason}
    if exc.capability:
        body |= {"conversation": exc.conv, "capability": exc.capability, "blocked_by": list(exc.blocked_by)}
    if exc.hint:
        body["hint"] = exc.hint
    return body


class Shell:
    """Wraps handlers in the checks every signed request meets, with the server's bounds."""

    def __init__(self, verifier: Verifier, gate: Gate, clock: Clock, *, max_body: int,
                 body_timeout_s: float, inline_bytes: int) -> None:
        self.verifier, self.gate, self.clock = verifier, gate, clock
        self.max_body, self.body_timeout_s, self.inline_bytes = max_body, body_timeout_s, inline_bytes

    async def _body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise TooLargeError
        chunks, size = [], 0
        async with asyncio.timeout(self.body_timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body:
                    raise TooLargeError
                chunks.append(chunk)
        return b"".join(chunks)

    async def _signed(self, request: Request) -> tuple[Signed, bytes]:
        """The checked signature and the body, cheapest refusal first (docs/sync.md, order of
        checks); the nonce is left for the handler to record."""
        # ASGI hands header names lower-cased; decoded as Starlette's `Headers` decodes them
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.scope["headers"]}
        # before the body: a key named nowhere costs nothing (the claim is unverified, but a
        # refusal reveals no secret, and a forger of an admitted key still meets the signature);
        # only a key the configuration and the member index both miss makes the index look at
        # the store, off the event loop, and only when the store has changed since it last did
        claimed = self.verifier.claimed(headers)
        if not self.gate.named(claimed):
            await run_in_threadpool(self.gate.check_named, claimed)
        body = await self._body(request)
        raw, query = request.scope.get("raw_path") or request.url.path.encode(), request.scope["query_string"]
        target = raw.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        if len(body) <= self.inline_bytes:  # hashing this little and one signature: tens of µs
            return self.verifier.check(request.method, target, body, headers, now_ms=self.clock()), body
        signed = await run_in_threadpool(
            self.verifier.check, request.method, target, body, headers, now_ms=self.clock()
        )
        return signed, body

    def guarded(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """`signed(handler)` for a handler that acts only once the nonce is recorded."""

        async def recorded(request: Request, signed: Signed, body: bytes) -> Response:
            actor = await run_in_threadpool(self.verifier.record, signed)  # the nonce log's I/O
            return await handler(request, actor, body)

        return self.signed(recorded)

    def signed(self, handler: SignedHandler) -> Callable[[Request], Awaitable[Response]]:
        """Check the signature within bounds, run `handler` (which must record the nonce before
        it acts), turn typed errors into HTTP answers."""

        async def run(request: Request) -> Response:
            try:
                return await handler(request, *await self._signed(request))
            except TooLargeError:
                return error(413, "size", f"request body over {self.max_body} bytes")
            except TimeoutError:
                return error(408, "timeout", f"request body not received within {self.body_timeout_s} s")
            except ForbiddenError as exc:
                return JSONResponse(forbidden_body(exc), 403)
            except AuthError as exc:
                return error(exc.status, exc.rule, exc.message, exc.reason)
            except ProtocolError as exc:  # `reason`: one of the names docs/sync.md lists
                return error(400, exc.rule, str(exc), exc.reason)
            except StoreBusyError as exc:
                return error(503, "busy", str(exc))
            except StoreError as exc:
                return error(500, "store", str(exc))
            except ConvgraphError as exc:
                return error(400, exc.rule, str(exc))

        return run
