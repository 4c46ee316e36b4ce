"""The read routes: a record, an artifact, a conversation's heads, its authority projection,
the integrity findings; each for a verified key, in the conversations it may read.

Invariant: what a key may not read answers exactly as what does not exist does (a 404), so a
refusal never tells a key which records or artifacts exist where it may not read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from convgraph.core.cid import CID
from convgraph.errors import ConvgraphError, MissingExtraError, NotFoundError, ProjectionError
from convgraph.replica import Replica
from convgraph.server import artifacts
from convgraph.server.gate import Gate
from convgraph.server.shell import error
from convgraph.sync.witness_hooks import findings_of

try:  # the [server] extra: without it, a typed error that says what to install
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
except ModuleNotFoundError as exc:
    raise MissingExtraError("server", "the sync server", module=exc.name) from exc

RECORD_TYPE = "application/vnd.ipld.dag-cbor"


class Reads:
    """The read routes over one replica, each asking `gate` what the requesting key may read."""

    def __init__(self, replica: Replica, gate: Gate) -> None:
        self.replica, self.gate = replica, gate

    async def record(self, request: Request, actor: bytes, _: bytes) -> Response:
        try:
            cid = CID.parse(request.path_params["cid"])
        except ConvgraphError as exc:
            return error(400, "cid", str(exc))
        metas = await run_in_threadpool(self.replica.store.metas, [cid])
        if cid not in metas or not await run_in_threadpool(self.gate.can_read, actor, metas[cid].conv):
            # one answer for both: a 403 would tell a key which records exist where it may not read
            return error(404, "not_found", f"no record {cid} that this key may read")
        data = await run_in_threadpool(self.replica.store.get, cid)
        if data is None:
            return error(410, "compacted", f"record {cid} was compacted away; only its header is kept")
        return Response(data, media_type=RECORD_TYPE, headers={"Cache-Control": "immutable"})

    async def artifact(self, request: Request, actor: bytes, _: bytes) -> Response:
        """docs/sync.md, *Artifacts over HTTP*: unknown and forbidden are one 404."""
        try:
            cid = CID.parse(request.path_params["cid"])
        except ConvgraphError as exc:
            return error(400, "cid", str(exc))
        one = request.query_params.get("block")
        if one not in (None, "0", "1"):
            return error(400, "malformed", "block is 0 or 1")
        store = self.replica.store
        hidden = error(404, "not_found", f"no artifact {cid} that this key may read")
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

    async def authority(self, request: Request, actor: bytes, _: bytes) -> Response:
        conv = request.path_params["conv"]
        try:
            body = await run_in_threadpool(self.gate.projection, actor, conv)
        except NotFoundError as exc:
            return error(404, "not_found", str(exc))
        except ProjectionError as exc:
            return error(404, "legacy", str(exc))
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

