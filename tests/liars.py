"""A lying server for tests: the statements of every sync reply re-signed with the server's own
key, as `lie` rewrites them, either as ASGI middleware over convgraph's real app (`Resigning`)
or over the in-process transport (`lying_sync`)."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterable
from typing import Any

from convgraph import Replica, SigningKey
from convgraph.integrity.statement import Statement, decode_statement
from convgraph.sync import wire
from convgraph.sync.initiator import SyncReport, synchronize
from convgraph.sync.peer import ReplicaPeer, trusting
from convgraph.sync.responder import Responder
from convgraph.sync.witness_hooks import witness_of

Lie = Callable[[SigningKey, Statement], bytes]
"""The server's key and the true statement -> the bytes of the statement to send instead."""


def resigned(data: bytes, key: SigningKey, lie: Lie) -> bytes:
    """The encoded reply `data` with each section's statement replaced by what `lie` signs."""
    reply = wire.decode(data)
    sections = tuple(
        dataclasses.replace(s, statement=lie(key, decode_statement(s.statement)))
        if s.statement is not None else s for s in reply.sections)
    return wire.encode(wire.Message(reply.kind, reply.salt, sections))


def lying_sync(local: Replica, remote: Replica, convs: Iterable[str], lie: Lie) -> SyncReport:
    """`sync_replicas(local, remote, convs)` with every statement `remote` replies re-signed by
    `lie`: the same peers, responder and judging as the honest in-process transport."""
    both = trusting([local.actor, remote.actor])
    responder = Responder(ReplicaPeer(remote, adopt_from=both), key=remote.key, clock=remote.clock,
                          witness=witness_of(remote))

    def transport(data: bytes) -> bytes:
        return resigned(responder.receive(data, initiator=local.actor), remote.key, lie)

    return synchronize(ReplicaPeer(local, adopt_from=both), transport, sorted(set(convs)),
                       salts=functools.partial(os.urandom, 8), witness=witness_of(local),
                       peer_key=remote.actor, clock=local.clock)


class Resigning:
    """ASGI middleware over the real server: the statements of each sync reply re-signed."""

    def __init__(self, app: Any, key: SigningKey, lie: Lie) -> None:
        self.app, self.key, self.lie = app, key, lie

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/sync":
            await self.app(scope, receive, send)
            return
        start: dict[str, Any] = {}
        body = bytearray()

        async def rewrite(message: Any) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body"):
                return
            data = resigned(bytes(body), self.key, self.lie) if start["status"] == 200 else bytes(body)
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})

        await self.app(scope, receive, rewrite)
