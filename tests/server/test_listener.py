"""The HTTP listener: connections that never finish a request head cannot starve the server.

The flood test runs `convgraph serve` in its own process under `ulimit -n 1024` and opens
1,100 connections to it, half of them silent and half trickling a request head one byte at
a time. Health checks on fresh connections must keep answering, the server must close the
silent connections itself, and it must never run out of descriptors.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from convgraph.errors import BindError
from convgraph.server import listener
from server.process import ServeProcess

FLOOD = 1100
HEADER_TIMEOUT_S = 2.0


def test_bind_refuses_a_port_out_of_range_and_a_taken_one() -> None:
    with pytest.raises(BindError, match="0 to 65535") as caught:
        listener.bind("127.0.0.1", 99999)
    assert (caught.value.host, caught.value.port) == ("127.0.0.1", 99999)
    with listener.bind("127.0.0.1", 0) as taken:
        port = taken.getsockname()[1]
        assert listener.url_of(taken) == f"http://127.0.0.1:{port}"
        with pytest.raises(BindError, match="in use"):
            listener.bind("127.0.0.1", port)
    with pytest.raises(BindError):
        listener.bind("no-such-host.invalid", 0)


def _raise_own_limit(wanted: int) -> None:
    """The flood's client side holds 1,100 sockets too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the server has closed it by now (asked without waiting: that was done before)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except BlockingIOError:
        return False


@pytest.mark.slow
def test_a_flood_of_silent_and_trickling_connections_cannot_starve_health_checks(tmp_path: Path) -> None:
    _raise_own_limit(4 * FLOOD)
    head = b"GET /v1/health HTTP/1.1\r\nhost: x\r\nx-padding: " + b"p" * 200
    with ServeProcess(tmp_path / "server", "--header-timeout", str(HEADER_TIMEOUT_S), nofile=1024) as server:
        host, port = server.url.removeprefix("http://").split(":")
        latencies: list[float] = []
        failures: list[BaseException] = []
        stop = threading.Event()

        def health() -> None:
            with httpx.Client(timeout=10, limits=httpx.Limits(max_keepalive_connections=0)) as client:
                while not stop.is_set():
                    start = time.monotonic()
                    try:
                        assert client.get(server.url + "/v1/health").json()["ok"] is True
                    except (httpx.HTTPError, AssertionError) as exc:
                        failures.append(exc)
                    latencies.append(time.monotonic() - start)
                    time.sleep(0.05)

        opened: list[socket.socket] = []
        silent: list[socket.socket] = []
        trickling: list[tuple[socket.socket, int]] = []
        checker = threading.Thread(target=health, daemon=True)
        checker.start()
        try:
            for i in range(FLOOD):
                sock = socket.create_connection((host, int(port)), timeout=10)
                opened.append(sock)
                if i % 2:
                    silent.append(sock)
                else:
                    trickling.append((sock, 0))
            deadline = time.monotonic() + 2.5 * HEADER_TIMEOUT_S
            while time.monotonic() < deadline:  # one byte per open trickler every ~0.2 s
                still: list[tuple[socket.socket, int]] = []
                for sock, sent in trickling:
                    with contextlib.suppress(OSError):  # closed by the server: good
                        sock.send(head[sent % len(head) : sent % len(head) + 1])
                        still.append((sock, sent + 1))
                trickling = still
                time.sleep(0.2)
            open_silent = [s for s in silent if not _closed_by_peer(s)]
        finally:
            stop.set()
            checker.join(30)
            for sock in opened:
                sock.close()
        assert not failures, failures[:3]
        assert len(latencies) >= 10 and max(latencies) < 1.0, f"{len(latencies)} checks, slowest {max(latencies):.2f} s"
        assert not open_silent, f"{len(open_silent)} of {len(silent)} silent connections still open"
        assert not trickling, f"{len(trickling)} trickling connections still open"
        assert httpx.get(server.url + "/v1/health", timeout=5).json()["ok"] is True
    assert "Too many open files" not in server.log and "EMFILE" not in server.log, server.log[-2000:]
