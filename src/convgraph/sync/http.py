"""The HTTP transport: a signed client for the sync server (`convgraph serve`).

`HttpRemote.exchange` is a `Transport` for `synchronize`: it posts one message and returns
the reply. Every request is signed with the client's actor key (`server/auth.py`); the
server's typed refusals come back as the same typed errors (401 `UnauthenticatedError`,
403 `ForbiddenError`, 400 `ProtocolError`), anything else outside the protocol as
`TransportError`. Invariant: a reply is returned only for a 200 answer of the sync type.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from convgraph.core.cid import CID
from convgraph.core.hlc import Clock, system_clock
from convgraph.core.keys import SigningKey
from convgraph.errors import ForbiddenError, ProtocolError, TransportError, UnauthenticatedError
from convgraph.server import auth
from convgraph.sync.wire import DEFAULT_LIMITS

SYNC_TYPE = "application/vnd.convgraph.sync"
_MAX_RECORD = (1 << 20) + (1 << 16)  # the largest record a replica accepts by default, and room
_MAX_EVENT_LINE = 4 * _MAX_RECORD // 3 + 4096  # one record, base64, with its JSON around it
Event = tuple[int | None, CID | None, bytes]  # (cursor, record CID, record bytes)


class HttpRemote:
    """A sync server at `base_url`, reached with requests signed by `key`."""

    def __init__(
        self, base_url: str, key: SigningKey, *, clock: Clock = system_clock, timeout_s: float = 60.0,
        nonce: Callable[[], str] = lambda: secrets.token_hex(16), client: httpx.Client | None = None,
        max_reply: int = DEFAULT_LIMITS.max_message,
    ) -> None:
        self.max_reply = max_reply
        self.base_url = base_url.rstrip("/")
        self.key, self.clock, self.nonce = key, clock, nonce
        self._client = client or httpx.Client(timeout=timeout_s)
        self._owned = client is None

    def _request(self, method: str, path: str, body: bytes = b"", *,
                 headers: dict[str, str] | None = None) -> httpx.Response:
        """Send a signed request; the 200 response is left streaming, for a bounded read."""
        request = self._client.build_request(method, self.base_url + path, content=body, headers=headers)
        target = request.url.raw_path.decode("latin-1")
        signed = auth.sign(self.key, method, target, body, now_ms=self.clock(), nonce=self.nonce())
        request.headers.update(signed)
        try:
            response = self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise TransportError(f"{method} {self.base_url}{path} failed: {exc}") from exc
        if response.status_code != 200:
            _raise_for(response, _head(response))
        return response

    def exchange(self, message: bytes) -> bytes:
        """Send one sync message, return the server's reply (at most `max_reply` bytes of it)."""
        headers = {"Content-Type": SYNC_TYPE}
        response = self._request("POST", "/v1/sync", message, headers=headers)
        if response.headers.get("content-type", "").split(";")[0] != SYNC_TYPE:
            response.close()
            raise TransportError(f"sync reply of type {response.headers.get('content-type')!r}")
        return self._read(response, self.max_reply)

    def _read(self, response: httpx.Response, limit: int) -> bytes:
        """The whole body, refused past `limit` bytes: a peer that never stops sending is cut off."""
        chunks, size = [], 0
        try:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ProtocolError(f"answer over {limit} bytes from {response.request.url}")
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise TransportError(f"reading the answer from {response.request.url} failed: {exc}") from exc
        finally:
            response.close()
        return b"".join(chunks)

    def record(self, cid: CID) -> bytes:
        """One record's bytes (`ConvgraphError` subclasses on 4xx; the CID is not checked here)."""
        return self._read(self._request("GET", f"/v1/records/{cid}"), _MAX_RECORD)

    def heads(self, conv: str) -> dict[str, Any]:
        raw = self._read(self._request("GET", f"/v1/conversations/{_quote(conv)}/heads"), self.max_reply)
        try:
            body: dict[str, Any] = json.loads(raw)
        except ValueError as exc:
            raise TransportError(f"heads of {conv!r}: not JSON") from exc
        return body

    def events(self, conv: str, *, after: int | None = None) -> Iterator[Event]:
        """Server-sent events of `conv`: (cursor, None, b"") once ready, then each new record."""
        query = "" if after is None else f"?after={after}"
        response = self._request("GET", f"/v1/conversations/{_quote(conv)}/events{query}")
        try:
            yield from _parse_events(_lines(response.iter_bytes(), _MAX_EVENT_LINE))
        except httpx.HTTPError as exc:
            raise TransportError(f"the event stream of {conv!r} broke off: {exc}") from exc
        finally:
            response.close()

    def close(self) -> None:
        if self._owned:
            self._client.close()

    def __enter__(self) -> HttpRemote:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _lines(chunks: Iterator[bytes], limit: int) -> Iterator[str]:
    """Lines of an event stream, each at most `limit` bytes: a server cannot make us buffer more."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line.removesuffix(b"\r").decode("utf-8", errors="replace")
        if len(pending) > limit:
            raise ProtocolError(f"an event stream line over {limit} bytes")
    if pending:
        yield pending.decode("utf-8", errors="replace")


def _quote(conv: str) -> str:
    return httpx.URL("/" + conv).raw_path.decode("latin-1")[1:].replace("/", "%2F")


def _parse_events(lines: Iterator[str]) -> Iterator[Event]:
    event, ident, data = "message", None, list[str]()
    for line in lines:
        if line == "":
            if data and event == "ready":
                yield int(json.loads("".join(data))["cursor"]), None, b""
            elif data and event == "record":
                body = json.loads("".join(data))
                cursor = int(ident) if ident else None
                yield cursor, CID.parse(body["cid"]), base64.b64decode(body["record"])
            event, ident, data = "message", None, []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "id":
                ident = value
            elif name == "data":
                data.append(value)


def _head(response: httpx.Response, limit: int = 1 << 16) -> bytes:
    """The first `limit` bytes of a streamed error body: enough for the reason, never more."""
    got = b""
    try:
        for chunk in response.iter_bytes():
            got += chunk
            if len(got) >= limit:
                break
    except httpx.HTTPError:
        pass
    finally:
        response.close()
    return got[:limit]


def _raise_for(response: httpx.Response, raw: bytes) -> None:
    try:
        body = json.loads(raw)
        detail, reason = str(body.get("detail", "")), str(body.get("reason", ""))
    except (ValueError, AttributeError):
        detail, reason = raw[:200].decode(errors="replace"), ""
    status = response.status_code
    where = f"{response.request.method} {response.request.url}"
    why = f": {reason}" if reason and reason != detail else ""
    if status == 401:
        raise UnauthenticatedError(f"{where}: 401 {detail}{why}", reason=reason)
    if status == 403:
        raise ForbiddenError(f"{where}: 403 {detail}{why}", reason=reason)
    if status in (400, 413):
        raise ProtocolError(f"{where}: {status} {detail}")
    raise TransportError(f"{where}: HTTP {status} {detail}")
