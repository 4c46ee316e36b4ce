"""The sync server: an ASGI app (Starlette) over one replica's store, SQLite or PostgreSQL.

Every route but `/v1/health` and `/openapi.json` wants a signed request (`auth.py`) from a
key admitted to the conversations concerned (`gate.py`: the authority projection of a rooted
conversation, the configuration for a legacy one): no signature is a 401, a key without
access a 403, each with a JSON reason, and the cheapest refusal comes first (docs/sync.md,
"Order of checks"); a record the key may not read is a 404, as an unknown one is. A body of
at most `inline_bytes` has its signature checked on the event loop, and a sync message that
small is then answered whole in one worker thread, nonce log, decoding and all: for such
messages, each hop between the loop and a worker cost more than the work it moved
(bench/README.md, load.py). Anything bigger is hashed and decoded in worker threads,
decoding at most `decoders` at once, and every question to the authority projection runs in
a worker thread, so `/v1/health` answers whatever a request costs; the nonce log's I/O never
runs on the loop. The sync route runs the stateless `Responder`, so instances sharing one
PostgreSQL database are interchangeable; the events route streams a conversation's new
records as server-sent events, and ends the stream of a key that lost `read` before anything
that follows.
This module assembles the routes, which live by concern: `shell` (bounds, signatures, errors
as HTTP answers), `sync_endpoint`, `reads`, `events` and `identity` (health, the well-known
identity, viewer sessions, the witness's cosignature).
Invariant: a request is refused whole before anything of it is stored, or its records
each go through full validation.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from convgraph.core.hlc import Clock, system_clock
from convgraph.errors import MissingExtraError
from convgraph.replica import Replica
from convgraph.server import openapi
from convgraph.server.access import Access
from convgraph.server.conv_locks import ConvLocks
from convgraph.server.events import Events, relay
from convgraph.server.gate import Gate
from convgraph.server.identity import About
from convgraph.server.nonces import SqliteBatchNonces, grouped
from convgraph.server.reads import Reads
from convgraph.server.shell import Shell
from convgraph.server.sync_endpoint import PartHook, SyncEndpoint
from convgraph.server.witness import Cosigner
from convgraph.store.sqlite import SqliteStore
from convgraph.sync.auth import MemoryNonces, NonceLog, Verifier
from convgraph.sync.live import Hub, poll
from convgraph.viewer import app as viewer_app
from convgraph.viewer.sessions import Sessions

try:  # the [server] extra: without it, a typed error that says what to install
    from starlette.applications import Starlette
    from starlette.convertors import Convertor, register_url_convertor
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send
except ModuleNotFoundError as exc:
    raise MissingExtraError("server", "the sync server", module=exc.name) from exc


@dataclass
class ServerConfig:
    """What the server admits and how much it takes from any one request and any one key."""

    access: Access = field(default_factory=Access)
    window_ms: int = 60_000
    max_body: int = 16 << 20
    body_timeout_s: float = 30.0
    budget: int = 4 << 20
    heartbeat_s: float = 15.0
    poll_s: float = 0.5
    decoders: int = 2  # sync messages over `inline_bytes` decoded at once, each in a worker thread
    per_key: int = 4  # sync requests one key may have in flight
    # a body this small is cheaper to check and decode than a hop to a worker thread is:
    # decoding costs at most ~5 µs a byte (SKIP ranges), so ~80 ms here, in a worker
    inline_bytes: int = 16 << 10
    # records of one pushed section judged and committed per hold of its conversation's writer
    # lock: a reader of that conversation waits at most about one part (bench/hol.py)
    part_records: int = 100


def create_app(
    replica: Replica, config: ServerConfig | None = None, *, clock: Clock = system_clock,
    nonces: NonceLog | None = None, listen: Callable[[], AsyncIterator[str]] | None = None,
    cosigner: Cosigner | None = None, landed: PartHook | None = None,
) -> Starlette:
    """The app; `listen` yields conversation names other instances wrote (PostgreSQL NOTIFY);
    `cosigner` makes it a witness (`/v1/witness/{conv}/cosign`, docs/integrity.md §7.4);
    `landed` is called after each committed part of a pushed section (a test's barrier)."""
    cfg = config or ServerConfig()
    verifier = Verifier(grouped(nonces or _nonce_log(replica)), cfg.window_ms)  # one commit per batch
    # no lock spans conversations: writers take their conversation's lock per part of a push,
    # and access is judged in a facade of its own, folded from committed records only
    hub, locks, sessions = Hub(), ConvLocks(), Sessions(clock)
    gate = Gate(replica.reader(), cfg.access, locks)
    shell = Shell(verifier, gate, clock, max_body=cfg.max_body, body_timeout_s=cfg.body_timeout_s,
                  inline_bytes=cfg.inline_bytes)
    sync = SyncEndpoint(replica, gate, verifier, hub, clock, budget=cfg.budget, inline_bytes=cfg.inline_bytes,
                        decoders=cfg.decoders, per_key=cfg.per_key, part=cfg.part_records, landed=landed)
    reads, events = Reads(replica, gate), Events(replica.store, gate, hub, heartbeat_s=cfg.heartbeat_s)
    about = About(replica, gate, sessions, clock, cosigner)

    async def spec(_: Request) -> Response:
        return JSONResponse(openapi.SPEC)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        hub.bind(asyncio.get_running_loop())
        tasks = [asyncio.create_task(poll(hub, replica.store.change_token, cfg.poll_s))]
        if listen is not None:
            tasks.append(asyncio.create_task(relay(listen, hub)))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    guarded = shell.guarded
    sync_route = shell.signed(sync.sync)
    routes = [
        Route("/v1/health", about.health, methods=["GET"]),
        Route("/openapi.json", spec, methods=["GET"]),
        Route("/.well-known/convgraph", about.identity, methods=["GET"]),
        Route("/v1/findings", guarded(reads.findings), methods=["GET"]),
        Route("/v1/sync", sync_route, methods=["POST"]),  # a POST is answered by `_App` before routing
        Route("/v1/records/{cid}", guarded(reads.record), methods=["GET"]),
        Route("/v1/artifacts/{cid}", guarded(reads.artifact), methods=["GET"]),
        Route("/v1/conversations/{conv:conv}/heads", guarded(reads.heads), methods=["GET"]),
        Route("/v1/conversations/{conv:conv}/events", guarded(events.events), methods=["GET"]),
        Route("/v1/conversations/{conv:conv}/authority", guarded(reads.authority), methods=["GET"]),
        Route("/v1/witness/{conv:conv}/cosign", guarded(about.cosign), methods=["POST"]),
        Route("/v1/viewer/sessions", guarded(about.viewer_session), methods=["POST"]),
        # the viewer's pages fold a facade of their own, one page at a time: that lock is the
        # viewer's alone, never taken by a sync, an access check or a push
        viewer_app.mount(viewer_app.Viewer(replica.reader(), sessions, lambda session: _GateReader(
            gate, session.actor), hub, threading.Lock(), cfg.heartbeat_s)),
    ]
    return _App(sync_route, routes=routes, lifespan=lifespan)


class _App(Starlette):
    """The app, with `POST /v1/sync` answered before Starlette's middleware and router (~12 µs
    of CPU a request saved: bench/http_path.py; a tiny sync's exchange costs ~3 ms).
    Invariant: the answers are the route's own (its handler returns every refusal as a
    response); any other method or path, and every request once a middleware is added
    (`add_middleware`), goes through the stack as before (a 405 names `Allow: POST`); an
    unexpected error is a plain 500 then re-raised, as `ServerErrorMiddleware` does it."""

    def __init__(self, sync: Callable[[Request], Awaitable[Response]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._sync = sync

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["path"] != "/v1/sync" or scope["method"] != "POST"
                or scope.get("root_path") or self.user_middleware):  # a middleware added sees every request
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        try:
            response = await self._sync(Request(scope, receive, send))
        except Exception:
            await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send)
            raise
        await response(scope, receive, send)


def _nonce_log(replica: Replica) -> NonceLog:
    """A durable log where the store can keep one: after a restart, old requests stay refused."""
    store = replica.store
    return SqliteBatchNonces(store) if isinstance(store, SqliteStore) else MemoryNonces()


class _ConvConvertor(Convertor[str]):
    """A conversation name in a path: any text, slashes and line breaks included (records allow them)."""

    regex = r"[\s\S]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("conv", _ConvConvertor())


class _GateReader:
    """A viewer session of a key: it reads what the key may read."""

    def __init__(self, gate: Gate, actor: bytes | None) -> None:
        self.gate, self.actor = gate, actor

    def can_read(self, conv: str) -> bool:
        return self.actor is not None and self.gate.can_read(self.actor, conv)

