"""The sync server's HTTP listener: a socket bound before anything is announced, and
connections that cannot pile up until the process runs out of descriptors.

Requests are parsed by httptools (llhttp, in C) where it is installed, else by h11 (pure
Python, about 0.2 ms more CPU a request: bench/http_path.py); both are guarded alike. uvicorn
closes idle keep-alive connections (`timeout_keep_alive`); h11 bounds a request head
(`h11_max_incomplete_event_size`) and `_GuardedHttpTools` bounds it the same way
(`max_head`). Neither parser closes a connection that never finishes its head, and each
accepted connection holds a descriptor: a crowd of silent or trickling ones reaches the
process's limit, accepting fails with EMFILE, and nobody is served. uvicorn's
`limit_concurrency` does not help: it answers 503 to new requests but keeps every socket
open. `_Guard` adds the two missing bounds: each request head must arrive within
`header_timeout_s` of the moment the server began to wait for it, and at `max_connections`
the connection that has waited longest for its head is closed to make room (a newcomer is
answered 503 when every connection is busy with a request). Invariant: the server holds at
most `max_connections` client sockets, none of them waits for a head longer than
`header_timeout_s`, and none buffers a head of more than `max_head` bytes (plus at most one
read of data pipelined behind a request).
"""

from __future__ import annotations

import asyncio
import resource
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from convgraph.errors import BindError, MissingExtraError

try:  # the [server] extra: without it, a typed error that says what to install
    import h11
    import uvicorn
    from starlette.types import ASGIApp
    from uvicorn.protocols.http.h11_impl import H11Protocol
except ModuleNotFoundError as exc:
    raise MissingExtraError("server", "the sync server", module=exc.name) from exc
try:  # in the [server] extra; where it cannot be installed, the server still runs, on h11
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ModuleNotFoundError:  # pragma: no cover - the pinned environments all have it
    PARSERS: tuple[str, ...] = ("h11",)
else:
    PARSERS = ("httptools", "h11")  # the first is the default

_RESERVE: Final = 128  # descriptors kept for the store, the loop, the log and connections being accepted
_ACCEPT_BATCH: Final = 16  # connections asyncio accepts per wake-up (see `_Server`)
_QUEUE: Final = 2048  # the kernel's queue of connections not yet accepted
_BUSY: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 26\r\n\r\ntoo many open connections\n"
)


def default_max_connections() -> int:
    """The descriptor limit of this process less a reserve for everything else it opens."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 65_536
    return max(16, soft - max(_RESERVE, soft // 8))


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a connection may take to send a request head, and how many may be open."""

    header_timeout_s: float = 5.0
    max_connections: int | None = None  # None: `default_max_connections()`
    keep_alive_s: int = 5
    max_head: int = 16 << 10


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host`:`port` (0: any free port); `BindError` saying why not."""
    if not 0 <= port <= 65_535:  # getaddrinfo would quietly take 99999 modulo 65536
        raise BindError("a port is a number from 0 to 65535", host=host, port=port)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise BindError(str(exc), host=host, port=port) from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(_QUEUE)
    except OSError as exc:
        sock.close()
        raise BindError(exc.strerror or str(exc), host=host, port=port) from exc
    return sock


def url_of(sock: socket.socket) -> str:
    """The `http://` address a bound socket serves, with the port the system chose."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(app: ASGIApp, sock: socket.socket, limits: ConnectionLimits = ConnectionLimits(),
          on_ready: Callable[[], None] | None = None, parser: str | None = None) -> None:
    """Serve `app` on `sock` with uvicorn until interrupted; `on_ready` runs once it accepts."""
    # a thread that waits on I/O (a sync of a small conversation) takes the GIL back from one
    # busy judging a large push after this long at most, each time: 5 ms by default, which
    # a request with a hundred round trips to SQLite paid a hundred times (bench/hol.py)
    sys.setswitchinterval(0.001)
    server(app, limits, on_ready, parser).run(sockets=[sock])


def server(app: ASGIApp, limits: ConnectionLimits = ConnectionLimits(),
           on_ready: Callable[[], None] | None = None, parser: str | None = None) -> uvicorn.Server:
    """The uvicorn server `serve` runs; `run(sockets=[sock])` it, set `should_exit` to stop it.
    `on_ready` runs once the app has started and connections are being accepted, not before;
    `parser` is one of `PARSERS` (default: the first)."""
    config = uvicorn.Config(
        app, http=guarded_protocol(limits, parser), loop="asyncio", lifespan="on", log_level="warning",
        timeout_keep_alive=limits.keep_alive_s, h11_max_incomplete_event_size=limits.max_head,
        backlog=_ACCEPT_BATCH,
    )
    return _Server(config, _QUEUE, on_ready)


class _Server(uvicorn.Server):
    """uvicorn's server, with the kernel's accept queue long again once asyncio has set it short,
    and a hook for the moment it serves.

    asyncio takes `backlog` both as the listen queue and as how many connections it accepts
    per wake-up, before any of them reaches `connection_made`; a long batch would open
    descriptors past the connection cap. So the batch is short and the queue set back long,
    where a burst of connections waits without costing this process a descriptor. A bound
    socket already completes TCP handshakes, but nothing answers until the app's lifespan has
    started and asyncio accepts: only then is `on_ready` called, so an announcement made there
    is a true readiness signal (a client waiting for it never races a loaded machine's start).
    """

    def __init__(self, config: uvicorn.Config, queue: int, on_ready: Callable[[], None] | None) -> None:
        super().__init__(config)
        self._queue = queue
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        for sock in sockets or ():
            sock.listen(self._queue)
        if self.started and not self.should_exit and self._on_ready is not None:
            self._on_ready()


def guarded_protocol(limits: ConnectionLimits, parser: str | None = None) -> type[asyncio.Protocol]:
    """A protocol class for one server, parsing with `parser` (default: the first of `PARSERS`):
    its connections share one queue of waiting heads."""
    parser = parser or PARSERS[0]
    if parser not in PARSERS:
        raise ValueError(f"no HTTP parser {parser!r} here: one of {', '.join(PARSERS)}")
    attrs = {
        "header_timeout_s": limits.header_timeout_s,
        "max_connections": limits.max_connections or default_max_connections(),
        "max_head": limits.max_head,
        "waiting": {},
    }
    base = _GuardedH11 if parser == "h11" else _GuardedHttpTools
    return type(f"Guarded{parser.capitalize()}", (base,), attrs)


class _Guard(asyncio.Protocol):
    """The bounds both parsers' protocols share; `_idle` says whether the connection waits for a head."""

    header_timeout_s: ClassVar[float]
    max_connections: ClassVar[int]
    max_head: ClassVar[int]
    waiting: ClassVar[dict[_Guard, None]]  # connections waiting for a head, longest first
    connections: set[Any]
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def _idle(self) -> bool:
        raise NotImplementedError

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            longest = next(iter(self.waiting), None)
            if longest is None:  # every other connection is in a request: this one must wait its turn
                self.transport.write(_BUSY)
                self.transport.close()
                return
            longest._expire()
        self._await_head()

    def _track(self) -> None:
        """Wait for a head exactly while the parser waits for one: a new connection, or between requests."""
        idle = self._idle() and not self.transport.is_closing()
        if idle and self not in self.waiting:
            self._await_head()  # the next head has its own deadline, counted from now
        elif not idle:
            self._stop_waiting()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._stop_waiting()
        self.waiting[self] = None
        self._deadline = self.loop.call_later(self.header_timeout_s, self._expire)

    def _stop_waiting(self) -> None:
        self.waiting.pop(self, None)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._stop_waiting()
        self.transport.close()


class _GuardedH11(_Guard, H11Protocol):
    def _idle(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._track()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._track()


class _HeadTooLargeError(Exception):
    """Raised in a parser callback: llhttp stops, uvicorn answers 400 and closes (as with h11)."""


if "httptools" in PARSERS:

    class _GuardedHttpTools(_Guard, HttpToolsProtocol):
        """llhttp keeps no bound on a head: a header line is gathered in Python until it ends.
        So the bytes of a head still open after each read are counted, and a complete head is
        measured before its request starts."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._heads = 0  # heads completed on this connection
            self._head_open = True  # between a request's end (or the connection's start) and the next head
            self._head_bytes = 0  # bytes of the open head received so far

        def _idle(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def data_received(self, data: bytes) -> None:
            began, heads = self._head_open, self._heads
            super().data_received(data)
            if self.transport.is_closing():
                self._stop_waiting()
                return
            if self._head_open:
                # a head that began within this read counts from the next one: it is at most one read
                self._head_bytes = self._head_bytes + len(data) if began and heads == self._heads else 0
                if self._head_bytes > self.max_head:
                    self.send_400_response("Invalid HTTP request received.")
                    self._stop_waiting()
                    return
            self._track()

        def on_headers_complete(self) -> None:
            self._head_open, self._head_bytes = False, 0
            self._heads += 1
            size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
            if size > self.max_head:
                raise _HeadTooLargeError(size)
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._head_open = True
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._track()
