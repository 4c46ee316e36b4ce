"""The HTTP transport: a signed client for the sync server (`convgraph serve`).

`HttpRemote.exchange` is a `Remote` for `synchronize`: it posts one message and returns
the reply, within the sync's deadline when given one. Every request is signed with the
client's actor key (`sync/auth.py`); the server's typed refusals come back as the same
typed errors (401 `UnauthenticatedError`, 403 `ForbiddenError`, 400 `ProtocolError`),
anything else outside the protocol as `TransportError`. A 403 in a rooted conversation keeps
what the server cited from its authority projection: the capability lacked and the
revocations in the way, in `ForbiddenError.reason`, `capability` and `blocked_by`; any 403 keeps
the `--allow` rule that would admit the key, in `hint`. Every
answer is read with a bound on its size and a minimum rate (`SlowTransferError`), and
every record that `record`, `heads` and `events` hand back has been verified
(`sync/verify.py`). Invariant: a reply is returned only for a 200 answer of the sync type,
and a record only when it is the valid record its CID names.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from convgraph.artifacts.blocks import split, verify_block
from convgraph.core.cid import CID
from convgraph.core.hlc import Clock, system_clock
from convgraph.core.keys import SigningKey, parse_actor
from convgraph.core.record import DEFAULT_LIMITS as RECORD_LIMITS
from convgraph.core.record import Limits, Record
from convgraph.errors import (
    ArtifactCorruptError,
    ArtifactMissingError,
    ConvgraphError,
    ForbiddenError,
    PeerMisbehavedError,
    ProtocolError,
    SlowTransferError,
    TransportError,
    UnauthenticatedError,
    WitnessRefusedError,
)
from convgraph.sync import auth
from convgraph.sync.deadline import Deadline, Monotonic
from convgraph.sync.messages import DEFAULT_LIMITS, MAX_BLOCK
from convgraph.sync.verify import HeldLookup, check_heads, checked_record

if TYPE_CHECKING:
    import httpx
else:  # imported on first use: `import convgraph` and the local commands never load the HTTP stack
    from convgraph.sync._deferred import Deferred

    httpx = Deferred("httpx")

SYNC_TYPE = "application/vnd.convgraph.sync"
MIN_RATE = 4096  # bytes/s that an answer must keep up, after its first `timeout_s`
Event = tuple[int | None, CID | None, bytes]  # (cursor, record CID, record bytes)


class HttpRemote:
    """A sync server at `base_url`, reached with requests signed by `key`.

    `timeout_s` bounds each wait on the network. An answer's body must also arrive within
    `timeout_s` plus one second per `min_rate` bytes received, timed on `monotonic`.
    """

    def __init__(
        self, base_url: str, key: SigningKey, *, clock: Clock = system_clock, timeout_s: float = 60.0,
        nonce: Callable[[], str] = lambda: secrets.token_hex(16), client: httpx.Client | None = None,
        max_reply: int = DEFAULT_LIMITS.max_message, min_rate: int = MIN_RATE,
        record_limits: Limits = RECORD_LIMITS, monotonic: Monotonic = time.monotonic,
    ) -> None:
        self.max_reply, self.min_rate, self.timeout_s = max_reply, min_rate, timeout_s
        self.record_limits, self.monotonic = record_limits, monotonic
        self.base_url = base_url.rstrip("/")
        self.key, self.clock, self.nonce = key, clock, nonce
        self._client = client or httpx.Client(timeout=timeout_s)
        self._owned = client is None

    def _request(self, method: str, path: str, body: bytes = b"", *, headers: dict[str, str] | None = None,
                 deadline: Deadline | None = None) -> httpx.Response:
        """Send a signed request; the 200 response is left streaming, for a bounded read."""
        doing = f"{method} {self.base_url}{path}"
        if deadline is not None:
            deadline.check(doing)
        request = self._client.build_request(method, self.base_url + path, content=body, headers=headers,
                                             timeout=self._timeout(deadline))
        target = request.url.raw_path.decode("latin-1")
        signed = auth.sign(self.key, method, target, body, now_ms=self.clock(), nonce=self.nonce())
        request.headers.update(signed)
        try:
            response = self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            if deadline is not None:
                deadline.check(doing)
            raise TransportError(f"{doing} failed: {exc}") from exc
        if response.status_code != 200:
            _raise_for(response, self._head(response, deadline))
        return response

    def _timeout(self, deadline: Deadline | None) -> httpx.Timeout:
        """The client's timeouts, none longer than what is left before `deadline`."""
        base = self._client.timeout
        if deadline is None:
            return base
        left = deadline.remaining()
        return httpx.Timeout(connect=_cap(base.connect, left), read=_cap(base.read, left),
                             write=_cap(base.write, left), pool=_cap(base.pool, left))

    def exchange(self, message: bytes, *, deadline: Deadline | None = None) -> bytes:
        """Send one sync message, return the server's reply (at most `max_reply` bytes of it)."""
        headers = {"Content-Type": SYNC_TYPE}
        response = self._request("POST", "/v1/sync", message, headers=headers, deadline=deadline)
        if response.headers.get("content-type", "").split(";")[0] != SYNC_TYPE:
            response.close()
            raise TransportError(f"sync reply of type {response.headers.get('content-type')!r}")
        return self._read(response, self.max_reply, deadline)

    def _paced(self, response: httpx.Response, deadline: Deadline | None) -> Iterator[bytes]:
        """The body's chunks, cut off when they come slower than `min_rate` or past `deadline`."""
        where, size, start = response.request.url, 0, self.monotonic()
        for chunk in response.iter_bytes():
            size += len(chunk)
            yield chunk
            elapsed = self.monotonic() - start
            if elapsed > self.timeout_s + size / self.min_rate:
                raise SlowTransferError(f"the answer from {where} came too slowly", got=size,
                                        elapsed_s=elapsed, min_rate=self.min_rate)
            if deadline is not None:
                deadline.check(f"reading the answer from {where}")

    def _read(self, response: httpx.Response, limit: int, deadline: Deadline | None = None) -> bytes:
        """The whole body, refused past `limit` bytes: a peer that never stops sending is cut off."""
        chunks, size = [], 0
        try:
            for chunk in self._paced(response, deadline):
                size += len(chunk)
                if size > limit:
                    raise ProtocolError(f"answer over {limit} bytes from {response.request.url}")
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            if deadline is not None:
                deadline.check(f"reading the answer from {response.request.url}")
            raise TransportError(f"reading the answer from {response.request.url} failed: {exc}") from exc
        finally:
            response.close()
        return b"".join(chunks)

    def _head(self, response: httpx.Response, deadline: Deadline | None, limit: int = 1 << 16) -> bytes:
        """The first `limit` bytes of a streamed error body: enough for the reason, never more."""
        got = b""
        try:
            for chunk in self._paced(response, deadline):
                got += chunk
                if len(got) >= limit:
                    break
        except httpx.HTTPError:
            pass  # the status alone says what went wrong
        finally:
            response.close()
        return got[:limit]

    def actor(self, *, deadline: Deadline | None = None) -> bytes:
        """The server's actor key, as `/v1/health` announces it (as authentic as the URL is)."""
        raw = self._read(self._request("GET", "/v1/health", deadline=deadline), 1 << 16, deadline)
        try:
            return parse_actor(json.loads(raw)["actor"])
        except (ValueError, KeyError, TypeError, ConvgraphError) as exc:
            raise TransportError(f"{self.base_url}/v1/health names no actor: {raw[:200]!r}") from exc

    def viewer_link(self, *, deadline: Deadline | None = None) -> str:
        """A link into the server's web viewer for this key (its token is a secret: share it with no one)."""
        route = "/v1/viewer/sessions"
        raw = self._read(self._request("POST", route, deadline=deadline), 1 << 16, deadline)
        try:
            path = json.loads(raw)["path"]
        except (ValueError, KeyError, TypeError) as exc:
            raise TransportError(f"{self.base_url}{route} answered no path: {raw[:200]!r}") from exc
        if not isinstance(path, str) or not path.startswith("/view/?token=") or not path.isascii():
            raise TransportError(f"{self.base_url}{route} answered a path of its own: {path!r:.200}")
        return self.base_url + path

    def identity(self, *, deadline: Deadline | None = None) -> bytes:
        """The key the server signs its statements with, as `/.well-known/convgraph` announces it
        (as authentic as the URL is; `sync.pins` remembers it)."""
        path = "/.well-known/convgraph"
        raw = self._read(self._request("GET", path, deadline=deadline), 1 << 16, deadline)
        try:
            key = bytes.fromhex(json.loads(raw)["key"])
        except (ValueError, KeyError, TypeError) as exc:
            raise TransportError(f"{self.base_url}{path} names no key: {raw[:200]!r}") from exc
        if len(key) != 32:
            raise TransportError(f"{self.base_url}{path} names a key of {len(key)} bytes, not 32")
        return key

    def findings(self, conv: str | None = None, *, deadline: Deadline | None = None) -> list[dict[str, Any]]:
        """The server's findings (docs/integrity.md §6), in the conversations this key may read."""
        path = "/v1/findings" + ("?conv=" + urllib.parse.quote(conv, safe="") if conv is not None else "")
        raw = self._read(self._request("GET", path, deadline=deadline), self.max_reply, deadline)
        try:
            found = json.loads(raw)["findings"]
        except (ValueError, KeyError, TypeError) as exc:
            raise TransportError(f"{self.base_url}/v1/findings answered no findings: {raw[:200]!r}") from exc
        if not isinstance(found, list) or not all(isinstance(f, dict) for f in found):
            raise TransportError(f"{self.base_url}/v1/findings answered no list of findings")
        return found

    def cosign(self, conv: str, checkpoint: CID, *, deadline: Deadline | None = None) -> dict[str, Any]:
        """A witness's cosignature of `checkpoint` (docs/integrity.md §7.4), as it answered it
        (unchecked: `witness_client` verifies it); a refusal is `WitnessRefusedError`."""
        path = f"/v1/witness/{_quote(conv)}/cosign"
        body = json.dumps({"checkpoint": str(checkpoint)}).encode()
        response = self._request("POST", path, body, headers={"Content-Type": "application/json"},
                                 deadline=deadline)
        raw = self._read(response, 1 << 16, deadline)
        try:
            answer = json.loads(raw)
            texts = ("cosignature", "name", "key")
            ok = type(answer) is dict and all(type(answer.get(k)) is str for k in texts)
        except ValueError:
            ok = False
        if not ok or type(answer.get("time")) is not int:
            raise TransportError(f"{self.base_url}{path} answered no cosignature: {raw[:200]!r}")
        return dict(answer)

    def record(self, cid: CID) -> bytes:
        """One record's bytes, verified: they hash to `cid` and decode as a valid record."""
        return self._record(cid).data

    def artifact(self, cid: CID, *, max_bytes: int = 64 << 20) -> bytes:
        """An artifact's bytes (`GET /v1/artifacts/{cid}`, at most `max_bytes`), verified: cut
        into blocks they make the artifact `cid` (docs/format.md §17), else `PeerMisbehavedError`."""
        data = self._read(self._request("GET", f"/v1/artifacts/{cid}"), max_bytes)
        made, _ = split(data)
        if made != cid:
            wrong = ArtifactCorruptError("artifact bytes do not match", cid=str(cid))
            raise PeerMisbehavedError(f"the peer's artifact bytes make {made}, not the one asked for",
                                      cid=cid, error=wrong)
        return data

    def artifact_block(self, cid: CID) -> bytes:
        """One block of an artifact (`?block=1`), verified against `cid` (`PeerMisbehavedError`)."""
        data = self._read(self._request("GET", f"/v1/artifacts/{cid}?block=1"), MAX_BLOCK)
        try:
            verify_block(cid, data)
        except ArtifactCorruptError as exc:
            raise PeerMisbehavedError("the peer's block does not hash to its CID", cid=cid,
                                      error=exc) from exc
        return data

    def _record(self, cid: CID, conv: str | None = None) -> Record:
        data = self._read(self._request("GET", f"/v1/records/{cid}"), self.record_limits.max_record_bytes)
        return checked_record(data, cid, conv=conv, limits=self.record_limits)

    def heads(self, conv: str, *, held: HeldLookup | None = None) -> dict[str, Any]:
        """`{conversation, heads, count}` of `conv`, each head fetched and verified.

        Every head must be a valid record of `conv`, and none an ancestor of another as far
        as the heads and the records `held` by the caller show (`PeerMisbehavedError`).
        `count` is the server's claim and is not checked.
        """
        raw = self._read(self._request("GET", f"/v1/conversations/{_quote(conv)}/heads"), self.max_reply)
        body, cids = _heads_body(raw, conv)
        check_heads([self._record(cid, conv) for cid in cids], held)
        return body

    def events(self, conv: str, *, after: int | None = None) -> Iterator[Event]:
        """Server-sent events of `conv`: (cursor, None, b"") once ready, then each new record.

        A record is yielded only once verified: its bytes hash to the CID its event names,
        and it is a valid record of `conv` (`PeerMisbehavedError`). A `forbidden` event (the
        key lost `read` while it listened) raises `ForbiddenError` with the server's reason.
        """
        query = "" if after is None else f"?after={after}"
        response = self._request("GET", f"/v1/conversations/{_quote(conv)}/events{query}")
        line_limit = 4 * self.record_limits.max_record_bytes // 3 + 4096  # a record in base64, in JSON
        try:
            for cursor, cid, data in _parse_events(_lines(response.iter_bytes(), line_limit)):
                if cid is not None:
                    checked_record(data, cid, conv=conv, limits=self.record_limits)
                yield cursor, cid, data
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


def _cap(timeout: float | None, left: float) -> float:
    return left if timeout is None else min(timeout, left)


def _heads_body(raw: bytes, conv: str) -> tuple[dict[str, Any], list[CID]]:
    """The heads answer and its CIDs, when it has the documented shape (else `TransportError`)."""
    try:
        body = json.loads(raw)
        cids = [CID.parse(text) for text in body["heads"]]
        shaped = type(body["count"]) is int and body["count"] >= len(cids) == len(set(cids))
    except (ValueError, KeyError, TypeError, ConvgraphError) as exc:
        raise TransportError(f"heads of {conv!r}: not a heads answer") from exc
    if not shaped:
        raise TransportError(f"heads of {conv!r}: duplicate heads, or a count below their number")
    if body.get("conversation") != conv:
        got = body.get("conversation")
        raise PeerMisbehavedError(f"asked for the heads of {conv!r}, got those of {got!r}")
    return body, cids


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
            if data and event in ("ready", "record", "forbidden"):
                yield _event(event, ident, "".join(data))
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


def _event(event: str, ident: str | None, data: str) -> Event:
    """One `ready` or `record` event, parsed; a malformed one is a `TransportError`, and a
    `forbidden` one (the last of its stream) a `ForbiddenError`."""
    if event == "forbidden":
        try:
            body = json.loads(data)
        except ValueError:
            body = None
        said = body if isinstance(body, dict) else {}
        why = f"{said.get('detail', '')}: {said.get('reason', '')}"
        raise _forbidden(f"the event stream ended: 403 {why}", body)
    try:
        body = json.loads(data)
        if event == "ready":
            return int(body["cursor"]), None, b""
        return (int(ident) if ident else None), CID.parse(body["cid"]), base64.b64decode(body["record"])
    except (ValueError, KeyError, TypeError, ConvgraphError) as exc:
        raise TransportError(f"a malformed {event!r} event: {data[:200]!r}") from exc


def _forbidden(message: str, body: Any) -> ForbiddenError:
    """The 403 the server answered (`body`, its JSON), with what it cites of a rooted
    conversation's projection: the conversation, the capability lacked, the revocations."""
    fields = body if isinstance(body, dict) else {}
    capability, conv, blocked = fields.get("capability"), fields.get("conversation"), fields.get("blocked_by")
    return ForbiddenError(
        message, reason=str(fields.get("reason", "")), conv=conv if isinstance(conv, str) else None,
        capability=capability if isinstance(capability, str) else "",
        blocked_by=tuple(str(u) for u in blocked) if isinstance(blocked, list) else (),
        hint=str(fields.get("hint", "")),
    )


def _raise_for(response: httpx.Response, raw: bytes) -> None:
    body: Any = None
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
        raise _forbidden(f"{where}: 403 {detail}{why}", body)
    if status == 409 and isinstance(body, dict) and body.get("error") == "witness":
        raise WitnessRefusedError(f"{where}: 409 {detail}", reason=reason or "witness")
    if status == 404 and response.request.url.path.startswith("/v1/artifacts/"):
        # unknown, not held whole, or not readable by this key: the server tells them apart for nobody
        raise ArtifactMissingError(f"{where}: 404 {detail}", cid=response.request.url.path.rsplit("/", 1)[-1])
    if status in (400, 413):  # a 400 sync refusal's `reason` is one docs/sync.md lists
        raise ProtocolError(f"{where}: {status} {detail}", reason=reason or "peer")
    raise TransportError(f"{where}: HTTP {status} {detail}")
