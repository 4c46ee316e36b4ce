"""The routes about the server itself: its health, its identity (`/.well-known/convgraph`), a
viewer session for a key, and its cosignature when it is a witness (docs/integrity.md §7.4).

Invariant: health and identity need no signature and touch no store, so they answer whatever
the other routes cost.
"""

from __future__ import annotations

import json

from convgraph.core import suggestions
from convgraph.core.cid import CID
from convgraph.core.hlc import Clock
from convgraph.core.keys import actor_text
from convgraph.errors import ConvgraphError, MissingExtraError, WitnessRefusedError
from convgraph.replica import Replica
from convgraph.server.gate import Gate
from convgraph.server.shell import error
from convgraph.server.witness import Cosigner
from convgraph.sync import pins, wire
from convgraph.viewer import app as viewer_app
from convgraph.viewer.sessions import Sessions

try:  # the [server] extra: without it, a typed error that says what to install
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
except ModuleNotFoundError as exc:
    raise MissingExtraError("server", "the sync server", module=exc.name) from exc


class About:
    """This server's key, its viewer sessions and, when it is a witness, its cosigner."""

    def __init__(self, replica: Replica, gate: Gate, sessions: Sessions, clock: Clock,
                 cosigner: Cosigner | None) -> None:
        self.replica, self.gate, self.sessions = replica, gate, sessions
        self.clock, self.cosigner = clock, cosigner

    async def cosign(self, request: Request, actor: bytes, body: bytes) -> Response:
        """docs/integrity.md §7.4: cosign a checkpoint that extends the last one cosigned."""
        conv = request.path_params["conv"]
        await run_in_threadpool(self.gate.check_read, actor, [conv])
        if self.cosigner is None:
            return error(404, "not_found", f"this server is not a witness ({suggestions.SERVE_WITNESS})")
        try:
            asked = json.loads(body)
            shaped = type(asked) is dict and set(asked) == {"checkpoint"} and type(asked["checkpoint"]) is str
            cid = CID.parse(asked["checkpoint"]) if shaped else None
        except (ValueError, TypeError, ConvgraphError):
            cid = None
        if cid is None:
            return error(400, "malformed", 'the body is {"checkpoint": "<cid text>"}')
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
