"""A hostile HTTP server on 127.0.0.1 that answers 200 at once, then dribbles its body.

It sends one byte every `interval` seconds, `total` bytes at most, of a body whose declared
length it never reaches, then hangs up. It notes whether the client hung up first, which
is how a test proves that the client gave up rather than the server stopped.
"""

from __future__ import annotations

import select
import socket
import socketserver
import threading
from types import TracebackType


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True


class Dribbler:
    """Serves every request with `content_type`, one byte per `interval` s, until closed."""

    def __init__(self, *, content_type: str, interval: float = 0.5, total: int = 16) -> None:
        self.content_type, self.interval, self.total = content_type, interval, total
        self.requests = 0
        self.hung_up = threading.Event()  # the client closed while bytes were still due
        self._stop = threading.Event()
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                owner._serve(self.request)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _serve(self, conn: socket.socket) -> None:
        _read_request(conn)
        self.requests += 1
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: {self.content_type}\r\n"
                f"Content-Length: {self.total + 1_000_000}\r\n\r\n")
        conn.sendall(head.encode())
        for _ in range(self.total):
            readable, _, _ = select.select([conn], [], [], self.interval)  # the wait also sees a hang-up
            if self._stop.is_set():
                return
            if readable and conn.recv(1) == b"":
                self.hung_up.set()
                return
            try:
                conn.sendall(b"\x01")
            except OSError:
                self.hung_up.set()
                return

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def __enter__(self) -> Dribbler:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def _read_request(conn: socket.socket) -> None:
    """Read one request's head and its Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk
