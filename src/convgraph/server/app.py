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
Invariant: a request is refused whole before anything of it is stored, or its records
each go through full validation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from convgraph.core import suggestions
from convgraph.core.cid import CID
from convgraph.core.hlc import Clock, system_clock
from convgraph.core.keys import actor_text
from convgraph.core.rooted import is_rooted
from convgraph.errors import (
    AuthError,
    ConvgraphError,
    ForbiddenError,
    MissingExtraError,
    NotFoundError,
    ProjectionError,
    ProtocolError,
    ServerBusyError,
    StoreBusyError,
    StoreError,
    WitnessRefusedError,
)
from convgraph.replica import Replica
from convgraph.server import artifacts, openapi
from convgraph.server.access import Access
from convgraph.server.gate import Gate
from convgraph.server.witness import Cosigner
from convgraph.store.sqlite import SqliteNonces, SqliteStore
from convgraph.sync import fates, pins, wire
from convgraph.sync.artifact_exchange import BlockOutcome
from convgraph.sync.auth import MemoryNonces, NonceLog, Signed, Verifier
from convgraph.sync.live import Hub, poll, record_events
from convgraph.sync.messages import Base
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.reconcile import Outcome, refusal
from convgraph.sync.responder import Responder
from convgraph.sync.witness_hooks import findings_of, witness_of
from convgraph.viewer import app as viewer_app
from convgraph.viewer.sessions import Sessions

try:  # the [server] extra: without it, a typed error that says what to install
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.convertors import Convertor, register_url_convertor
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ModuleNotFoundError as exc:
    raise MissingExtraError("server", "the sync server", module=exc.name) from exc

RECORD_TYPE = "application/vnd.ipld.dag-cbor"
_CURSOR = re.compile(r"[0-9]{1,19}", re.ASCII)
SYNC_TYPE = "application/vnd.convgraph.sync"


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


class _Peer(ReplicaPeer):
    """The replica seen by one request: it takes records only into the conversations its key
    may push to, asked afresh at each push under the lock the ingest then holds (so a
    revocation that lands first refuses it), and it adopts a base only when the checkpoint is
    signed by the server's own key or by the requesting key in a conversation it may push to."""

    def __init__(self, replica: Replica, gate: Gate, actor: bytes, ring: Callable[[str], None]) -> None:
        super().__init__(replica, adopt_from=lambda conv, signer: signer == replica.actor or (
            signer == actor and gate.push_refusal(actor, conv) is None))
        self.gate, self.actor, self.ring = gate, actor, ring

    def adopt(self, conv: str, base: Base) -> Outcome:
        with self.gate.lock:
            why = self.gate.push_refusal(self.actor, conv)
            if why is not None:
                return refusal(CID.of_record(base.checkpoint).digest, "forbidden", why)
            outcome = super().adopt(conv, base)
        if outcome.accepted:
            self.ring(conv)
        return outcome

    def take_blocks(self, conv: str, blocks: Sequence[tuple[CID, bytes]]) -> BlockOutcome:
        # blocks are pushed under the same condition as records, judged in the same hold
        with self.gate.lock:
            why = self.gate.push_refusal(self.actor, conv)
            if why is None:
                return super().take_blocks(conv, blocks)
        return BlockOutcome(refused=[(cid, "forbidden", why) for cid, _ in blocks])

    def ingest(self, conv: str, records: Sequence[bytes], *, report: bool = True) -> Outcome:
        # one writer per instance; SQLite and the PostgreSQL lock serialise the rest
        with self.gate.lock:
            why = self.gate.push_refusal(self.actor, conv)
            outcome = None if why is not None else super().ingest(conv, records, report=report)
        if outcome is None:
            limit = self.replica.config.limits.max_record_bytes
            refused = fates.refused(records, "forbidden", max_bytes=limit)
            return Outcome(rejected=[(r.digest or None, r.rule, str(why)) for r in refused], report=refused)
        if outcome.accepted:
            self.ring(conv)
        return outcome


def _error(status: int, rule: str, detail: str, reason: str = "") -> JSONResponse:
    headers = {"WWW-Authenticate": 'Convgraph-Signature realm="convgraph"'} if status == 401 else None
    body = {"error": rule, "detail": detail, "reason": reason or detail}
    return JSONResponse(body, status, headers=headers)


def _forbidden_body(exc: ForbiddenError) -> dict[str, Any]:
    """A 403's body; in a rooted conversation it cites the projection: capability, revocations;
    `hint` names the `--allow` rule that would admit the request, when one would."""
    body: dict[str, Any] = {"error": exc.rule, "detail": exc.message, "reason": exc.reason}
    if exc.capability:
        body |= {"conversation": exc.conv, "capability": exc.capability, "blocked_by": list(exc.blocked_by)}
    if exc.hint:
        body["hint"] = exc.hint
    return body


Handler = Callable[[Request, bytes, bytes], Awaitable[Response]]  # (request, verified actor, body)
SignedHandler = Callable[[Request, Signed, bytes], Awaitable[Response]]  # its nonce not yet recorded


class _InFlight:
    """Sync requests in flight per key: one key cannot take every decoder and worker thread."""

    def __init__(self, limit: int) -> None:
        self.limit, self.counts = limit, dict[bytes, int]()
        self._lock = threading.Lock()  # held from the event loop and from worker threads

    @contextlib.contextmanager
    def hold(self, actor: bytes) -> Iterator[None]:
        with self._lock:
            held = self.counts.get(actor, 0)
            if held >= self.limit:
                raise ServerBusyError("too many requests from this key", limit=self.limit,
                                      reason=f"key {actor_text(actor)} has {held} sync requests in flight")
            self.counts[actor] = held + 1
        try:
            yield
        finally:
            with self._lock:
                self.counts[actor] -= 1
                if not self.counts[actor]:
                    del self.counts[actor]


class _Server:
    """The routes' shared state: the replica, who may do what, and the live hub."""

    def __init__(self, replica: Replica, cfg: ServerConfig, clock: Clock, nonces: NonceLog,
                 cosigner: Cosigner | None = None) -> None:
        self.replica, self.cfg, self.clock, self.cosigner = replica, cfg, clock, cosigner
        self.verifier = Verifier(nonces, cfg.window_ms)
        # re-entrant: a push is judged (gate) and ingested (peer) in one hold of it
        self.hub, self.lock, self.keys = Hub(), threading.RLock(), ReplicaPeer(replica)
        self.gate = Gate(replica, cfg.access, self.lock)
        self.witness = witness_of(replica)
        self.decoders, self.in_flight = asyncio.Semaphore(cfg.decoders), _InFlight(cfg.per_key)
        self.sessions = Sessions(clock)

    async def _body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.cfg.max_body:
            raise _TooLargeError
        chunks, size = [], 0
        async with asyncio.timeout(self.cfg.body_timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.cfg.max_body:
                    raise _TooLargeError
                chunks.append(chunk)
        return b"".join(chunks)

    async def _signed(self, request: Request) -> tuple[Signed, bytes]:
        """The checked signature and the body, cheapest refusal first (docs/sync.md, order of
        checks); the nonce is left for the handler to record."""
        headers = {k.lower(): v for k, v in request.headers.items()}
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
        if len(body) <= self.cfg.inline_bytes:  # hashing this little and one signature: tens of µs
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
            except _TooLargeError:
                return _error(413, "size", f"request body over {self.cfg.max_body} bytes")
            except TimeoutError:
                return _error(408, "timeout", f"request body not received within {self.cfg.body_timeout_s} s")
            except ForbiddenError as exc:
                return JSONResponse(_forbidden_body(exc), 403)
            except AuthError as exc:
                return _error(exc.status, exc.rule, exc.message, exc.reason)
            except ProtocolError as exc:  # `reason`: one of the names docs/sync.md lists
                return _error(400, exc.rule, str(exc), exc.reason)
            except StoreBusyError as exc:
                return _error(503, "busy", str(exc))
            except StoreError as exc:
                return _error(500, "store", str(exc))
            except ConvgraphError as exc:
                return _error(400, exc.rule, str(exc))

        return run

    async def sync(self, _: Request, signed: Signed, body: bytes) -> Response:
        if len(body) <= self.cfg.inline_bytes:
            reply = await run_in_threadpool(self._answer_whole, signed, body)
        else:
            actor = await run_in_threadpool(self.verifier.record, signed)
            with self.in_flight.hold(actor):
                async with self.decoders:
                    message = await run_in_threadpool(wire.decode, body, admit=self._admit(actor))
                reply = await run_in_threadpool(self._answer, actor, message)
        return Response(reply, media_type=SYNC_TYPE)

    def _answer_whole(self, signed: Signed, body: bytes) -> bytes:
        """A small message from nonce to reply in one worker thread, checks in the same order."""
        actor = self.verifier.record(signed)
        with self.in_flight.hold(actor):
            return self._answer(actor, wire.decode(body, admit=self._admit(actor)))

    def _admit(self, actor: bytes) -> Callable[[str], None]:
        def admit(conv: str) -> None:  # each section's name, before its body is decoded
            self.gate.check_read(actor, [conv])

        return admit

    def _answer(self, actor: bytes, message: wire.Message) -> bytes:
        peer = _Peer(self.replica, self.gate, actor, self.hub.ring)
        peer.share_cache(self.keys)
        responder = Responder(peer, key=self.replica.key, clock=self.clock, witness=self.witness,
                              budget=self.cfg.budget)
        return responder.answer(message, initiator=actor)

    async def record(self, request: Request, actor: bytes, _: bytes) -> Response:
        try:
            cid = CID.parse(request.path_params["cid"])
        except ConvgraphError as exc:
            return _error(400, "cid", str(exc))
        metas = await run_in_threadpool(self.replica.store.metas, [cid])
        if cid not in metas or not await run_in_threadpool(self.gate.can_read, actor, metas[cid].conv):
            # one answer for both: a 403 would tell a key which records exist where it may not read
            return _error(404, "not_found", f"no record {cid} that this key may read")
        data = await run_in_threadpool(self.replica.store.get, cid)
        if data is None:
            return _error(410, "compacted", f"record {cid} was compacted away; only its header is kept")
        return Response(data, media_type=RECORD_TYPE, headers={"Cache-Control": "immutable"})

    async def artifact(self, request: Request, actor: bytes, _: bytes) -> Response:
        """docs/sync.md, *Artifacts over HTTP*: unknown and forbidden are one 404."""
        try:
            cid = CID.parse(request.path_params["cid"])
        except ConvgraphError as exc:
            return _error(400, "cid", str(exc))
        one = request.query_params.get("block")
        if one not in (None, "0", "1"):
            return _error(400, "malformed", "block is 0 or 1")
        store = self.replica.store
        hidden = _error(404, "not_found", f"no artifact {cid} that this key may read")
        if not await run_in_threadpool(artifacts.readable, store, cid,
                                       lambda conv: self.gate.can_read(actor, conv)):
            return hidden
        headers = {"Cache-Control": "immutable"}
        if one == "1":
            data = await run_in_threadpool(artifacts.block, store, cid)
            if data is None:
                return hidden
            return Response(data, media_type=artifacts.media_type(cid), headers=headers)
        found = await run_in_threadpool(artifacts.whole, store, cid)
        if found is None:
            return hidden
        size, pieces = found

        async def stream() -> AsyncIterator[bytes]:
            while (piece := await run_in_threadpool(next, pieces, None)) is not None:
                yield piece  # a block that fails its check ends the stream short of Content-Length

        headers["Content-Length"] = str(size)
        return StreamingResponse(stream(), media_type=artifacts.ARTIFACT_TYPE, headers=headers)

    async def heads(self, request: Request, actor: bytes, _: bytes) -> Response:
        conv = request.path_params["conv"]
        await run_in_threadpool(self.gate.check_read, actor, [conv])
        found = await run_in_threadpool(self.replica.store.heads, conv)
        count = await run_in_threadpool(self.replica.store.count, conv)
        return JSONResponse({"conversation": conv, "heads": [str(c) for c in found], "count": count})

    async def events(self, request: Request, actor: bytes, _: bytes) -> Response:
        conv = request.path_params["conv"]
        await run_in_threadpool(self.gate.check_read, actor, [conv])
        after = request.query_params.get("after")
        if after is None:
            after = request.headers.get("last-event-id")
        if after is not None and not _CURSOR.fullmatch(after):
            return _error(400, "cursor", f"cursor {after!r} is not a non-negative integer")
        start = int(after) if after is not None else await run_in_threadpool(self.replica.store.cursor)
        return StreamingResponse(self._stream(request, actor, conv, start), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    def _stream(self, request: Request, actor: bytes, conv: str, cursor: int) -> AsyncIterator[bytes]:
        async def refusal() -> dict[str, Any] | None:
            if not is_rooted(conv):
                return None
            try:
                await run_in_threadpool(self.gate.check_read, actor, [conv])
            except ForbiddenError as exc:
                return _forbidden_body(exc)
            return None

        return record_events(self.replica.store.since, self.hub, conv, cursor,
                             disconnected=request.is_disconnected, refusal=refusal,
                             heartbeat_s=self.cfg.heartbeat_s)

    async def authority(self, request: Request, actor: bytes, _: bytes) -> Response:
        conv = request.path_params["conv"]
        try:
            body = await run_in_threadpool(self.gate.projection, actor, conv)
        except NotFoundError as exc:
            return _error(404, "not_found", str(exc))
        except ProjectionError as exc:
            return _error(404, "legacy", str(exc))
        return JSONResponse(body)

    async def findings(self, request: Request, actor: bytes, _: bytes) -> Response:
        conv = request.query_params.get("conv")
        if conv is not None:
            await run_in_threadpool(self.gate.check_read, actor, [conv])
        found = await run_in_threadpool(findings_of, self.replica, conv)
        if conv is None:  # only those in conversations this key may read; the rest are not its to know
            convs = {f.conv for f in found}
            readable = {c: await run_in_threadpool(self.gate.can_read, actor, c) for c in convs}
            found = [f for f in found if readable[f.conv]]
        return JSONResponse({"findings": [f.to_json() for f in found]})

    async def cosign(self, request: Request, actor: bytes, body: bytes) -> Response:
        """docs/integrity.md §7.4: cosign a checkpoint that extends the last one cosigned."""
        conv = request.path_params["conv"]
        await run_in_threadpool(self.gate.check_read, actor, [conv])
        if self.cosigner is None:
            return _error(404, "not_found", f"this server is not a witness ({suggestions.SERVE_WITNESS})")
        try:
            asked = json.loads(body)
            shaped = type(asked) is dict and set(asked) == {"checkpoint"} and type(asked["checkpoint"]) is str
            cid = CID.parse(asked["checkpoint"]) if shaped else None
        except (ValueError, TypeError, ConvgraphError):
            cid = None
        if cid is None:
            return _error(400, "malformed", 'the body is {"checkpoint": "<cid text>"}')
        try:
            return JSONResponse(await run_in_threadpool(self.cosigner.cosign, conv, cid))
        except WitnessRefusedError as exc:
            return JSONResponse({"error": "witness", "reason": exc.reason, "detail": exc.message}, 409)

    async def viewer_session(self, _: Request, actor: bytes, __: bytes) -> Response:
        """A link into the web viewer for this key: it sees what the key may read (viewer/app.py)."""
        token = self.sessions.issue(actor)
        return JSONResponse({"path": f"{viewer_app.BASE}/?token={token}",
                             "expires_ms": self.clock() + self.sessions.ttl_ms})

    async def identity(self, _: Request) -> Response:
        key = self.replica.actor
        body = {"key": key.hex(), "fingerprint": pins.fingerprint(key), "actor": actor_text(key)}
        return JSONResponse(body)

    async def health(self, _: Request) -> Response:
        return JSONResponse({"ok": True, "actor": actor_text(self.replica.actor), "protocol": wire.VERSION})


def create_app(
    replica: Replica, config: ServerConfig | None = None, *, clock: Clock = system_clock,
    nonces: NonceLog | None = None, listen: Callable[[], AsyncIterator[str]] | None = None,
    cosigner: Cosigner | None = None,
) -> Starlette:
    """The app; `listen` yields conversation names other instances wrote (PostgreSQL NOTIFY);
    `cosigner` makes it a witness (`/v1/witness/{conv}/cosign`, docs/integrity.md §7.4)."""
    server = _Server(replica, config or ServerConfig(), clock, nonces or _nonce_log(replica), cosigner)

    async def spec(_: Request) -> Response:
        return JSONResponse(openapi.SPEC)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        server.hub.bind(asyncio.get_running_loop())
        tasks = [asyncio.create_task(poll(server.hub, replica.store.change_token, server.cfg.poll_s))]
        if listen is not None:
            tasks.append(asyncio.create_task(_relay(listen, server.hub)))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    routes = [
        Route("/v1/health", server.health, methods=["GET"]),
        Route("/openapi.json", spec, methods=["GET"]),
        Route("/.well-known/convgraph", server.identity, methods=["GET"]),
        Route("/v1/findings", server.guarded(server.findings), methods=["GET"]),
        Route("/v1/sync", server.signed(server.sync), methods=["POST"]),
        Route("/v1/records/{cid}", server.guarded(server.record), methods=["GET"]),
        Route("/v1/artifacts/{cid}", server.guarded(server.artifact), methods=["GET"]),
        Route("/v1/conversations/{conv:conv}/heads", server.guarded(server.heads), methods=["GET"]),
        Route("/v1/conversations/{conv:conv}/events", server.guarded(server.events), methods=["GET"]),
        Route("/v1/conversations/{conv:conv}/authority", server.guarded(server.authority), methods=["GET"]),
        Route("/v1/witness/{conv:conv}/cosign", server.guarded(server.cosign), methods=["POST"]),
        Route("/v1/viewer/sessions", server.guarded(server.viewer_session), methods=["POST"]),
        viewer_app.mount(viewer_app.Viewer(
            replica, server.sessions, lambda session: _GateReader(server.gate, session.actor), server.hub,
            server.lock, server.cfg.heartbeat_s)),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _nonce_log(replica: Replica) -> NonceLog:
    """A durable log where the store can keep one: after a restart, old requests stay refused."""
    store = replica.store
    return SqliteNonces(store) if isinstance(store, SqliteStore) else MemoryNonces()


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


class _TooLargeError(Exception):
    pass


async def _relay(listen: Callable[[], AsyncIterator[str]], hub: Hub) -> None:
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
