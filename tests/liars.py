"""A lying server for tests: ASGI middleware over convgraph's real app that re-signs the
statement of every sync reply with the server's own key, as `lie` rewrites it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from convgraph import SigningKey
from convgraph.integrity.statement import Statement, decode_statement
from convgraph.sync import wire

Lie = Callable[[SigningKey, Statement], bytes]
"""The server's key and the true statement -> the bytes of the statement to send instead."""


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
            data = self._rewrite(bytes(body)) if start["status"] == 200 else bytes(body)
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})

        await self.app(scope, receive, rewrite)

    def _rewrite(self, data: bytes) -> bytes:
        reply = wire.decode(data)
        sections = tuple(
            dataclasses.replace(s, statement=self.lie(self.key, decode_statement(s.statement)))
            if s.statement is not None else s for s in reply.sections)
        return wire.encode(wire.Message(reply.kind, reply.salt, sections))
