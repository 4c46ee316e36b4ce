"""What a request can cost the server before it is refused, and what one key can take.

The hostile message of issue 9: sixteen sections of 65,536 SKIP ranges (2 MiB), which took
seconds to decode on the event loop while `/v1/health` waited. A key named nowhere is now
refused before its body is read, a key that may read none of the named conversations at the
first name, and decoding for an admitted key runs in a bounded worker, so health checks
answer throughout. A small message, the everyday case, is answered whole in one worker
thread: the hops between the event loop and the workers cost more than its decoding (the
load regression of issue 9). What is asserted is what happened (which decodes ran, on which
thread, how far), not how long it took: a busy machine changes only the latter.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from starlette.concurrency import run_in_threadpool

from convgraph import Replica, SigningKey
from convgraph.core.keys import actor_text
from convgraph.server import shell, sync_endpoint
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.server.hop import Hop
from convgraph.sync import auth, wire
from convgraph.sync.varint import uvarint
from server.live import LiveServer

WRITER, READER, STRANGER, OTHER = (SigningKey(bytes([i]) * 32) for i in (1, 2, 3, 4))
RANGES = 65_536


def skip_section(conv: str, ranges: int = RANGES) -> bytes:
    """A section of `ranges` SKIP ranges, the cheapest bytes per range the grammar allows."""
    name = conv.encode()
    return uvarint(len(name)) + name + b"\x08" + uvarint(ranges) + b"\x01\x00" + b"\x02\x00" * (ranges - 2) + b"\x00\x00"


def skips(convs: Iterable[str], ranges: int = RANGES) -> bytes:
    names = sorted(convs)
    return bytes((wire.VERSION, 3)) + b"s" * 8 + uvarint(len(names)) + b"".join(skip_section(c, ranges) for c in names)


HOSTILE = skips(f"x{i:02d}" for i in range(16))


@dataclass
class Health:
    """Polls `/v1/health` in a thread for as long as the block runs; every latency is kept."""

    url: str
    latencies: list[float]
    failures: list[BaseException]

    def _run(self, stop: threading.Event) -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                start = time.monotonic()
                try:
                    assert client.get(self.url + "/v1/health").json()["ok"] is True
                except (httpx.HTTPError, AssertionError) as exc:
                    self.failures.append(exc)
                self.latencies.append(time.monotonic() - start)
                time.sleep(0.02)


@pytest.fixture
def polling() -> Callable[[str], Iterator[Health]]:
    import contextlib

    @contextlib.contextmanager
    def poll(url: str) -> Iterator[Health]:
        health, stop = Health(url, [], []), threading.Event()
        thread = threading.Thread(target=health._run, args=(stop,), daemon=True)
        thread.start()
        time.sleep(0.1)
        try:
            yield health
        finally:
            stop.set()
            thread.join(30)

    return poll  # type: ignore[return-value]


class _GatedAccess(Access):
    """Admits as configured, but holds a decode at conversation `gate` until `release` is set."""

    gate = "slow"
    release = threading.Event()
    entered = threading.Event()

    def check_read(self, actor: bytes, convs: Iterable[str]) -> None:
        convs = list(convs)
        if convs == [self.gate]:
            self.entered.set()
            assert self.release.wait(30)
        super().check_read(actor, convs)


def _access(cls: type[Access] = Access) -> Access:
    rules = Access.from_rules([f"{actor_text(WRITER.public)}=*", f"{actor_text(OTHER.public)}=*",
                               f"{actor_text(READER.public)}=c:read"])
    return cls(rules.writers, rules.readers)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    replica = Replica.open(tmp_path / "server")
    with LiveServer(create_app(replica, ServerConfig(access=_access()))) as live:
        yield live.url
    replica.close()


def _post(url: str, key: SigningKey, body: bytes) -> tuple[httpx.Response, float]:
    headers = auth.sign(key, "POST", "/v1/sync", body, now_ms=int(time.time() * 1000), nonce=os.urandom(16).hex())
    start = time.monotonic()
    answer = httpx.post(url + "/v1/sync", content=body, headers=headers, timeout=120)
    return answer, time.monotonic() - start


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int]]:
    """Every server-side `wire.decode`: (ran on the event loop's thread, sections admitted).

    What "cheap" and "health never waits" mean, as facts rather than timings: a refused key
    costs no decode, or one that stops at the first name; no decode runs on the event loop.
    """
    calls: list[tuple[bool, int]] = []
    real = wire.decode

    def recording(body: bytes, *, admit: Callable[[str], None] | None = None, **kw: object) -> object:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        admitted = [0]

        def counting(conv: str) -> None:
            if admit is not None:
                admit(conv)
            admitted[0] += 1

        try:
            return real(body, admit=counting, **kw)  # type: ignore[arg-type]
        finally:
            calls.append((on_loop, admitted[0]))

    monkeypatch.setattr(wire, "decode", recording)
    return calls


@pytest.mark.parametrize("key", [STRANGER, READER], ids=["named-nowhere", "reads-other-conversations"])
def test_a_key_without_access_is_refused_cheaply_and_health_never_waits(
    served: str, polling: Callable[[str], Iterator[Health]], key: SigningKey,
    decodes: list[tuple[bool, int]],
) -> None:
    with polling(served) as health:  # type: ignore[attr-defined]
        answer, _ = _post(served, key, HOSTILE)
    assert answer.status_code == 403, answer.text
    # named nowhere: refused before any decoding; reads others: the decode stops at the first
    # name (0 admitted), off the event loop, so health checks kept being answered throughout
    assert decodes == ([] if key is STRANGER else [(False, 0)])
    assert not health.failures and health.latencies
    # refused at the first name: the old decode-everything-first named all sixteen
    assert "x01" not in answer.json()["reason"]


def test_a_key_named_nowhere_is_refused_before_its_body_is_read(served: str) -> None:
    headers = auth.sign(STRANGER, "POST", "/v1/sync", HOSTILE, now_ms=int(time.time() * 1000), nonce="n" * 16)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    host, port = served.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"POST /v1/sync HTTP/1.1\r\nhost: x\r\ncontent-length: {len(HOSTILE)}\r\n{head}\r\n".encode())
        answer = b""  # not one byte of the body is sent: the whole answer must come anyway
        while b"}" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 403 "), answer[:200]
    assert b"admitted to no conversation" in answer


def test_bytes_past_a_refused_name_are_never_decoded(served: str) -> None:
    """The first section names a conversation the key may not read; the rest is garbage."""
    hostile = bytes((wire.VERSION, 3)) + b"s" * 8 + b"\x02" + skip_section("x00")[:8] + os.urandom(4096)
    answer, _ = _post(served, READER, hostile)
    assert answer.status_code == 403 and "x00" in answer.json()["reason"], answer.text


def test_an_admitted_key_s_big_message_is_decoded_off_the_event_loop(
    served: str, polling: Callable[[str], Iterator[Health]], decodes: list[tuple[bool, int]],
) -> None:
    with polling(served) as health:  # type: ignore[attr-defined]
        answer, _ = _post(served, WRITER, skips(f"w{i}" for i in range(6)))
    assert answer.status_code == 200, answer.text
    assert decodes == [(False, 6)]  # all six sections, in a worker thread, never on the loop
    assert health.latencies and not health.failures


def test_one_key_cannot_hold_more_than_its_share_of_decoders(tmp_path: Path) -> None:
    replica = Replica.open(tmp_path / "server")
    config = ServerConfig(access=_access(_GatedAccess), decoders=1, per_key=1)
    gated = skips(["slow"])
    with LiveServer(create_app(replica, config)) as live:
        results: dict[str, httpx.Response] = {}
        first = threading.Thread(target=lambda: results.setdefault("first", _post(live.url, WRITER, gated)[0]))
        first.start()
        assert _GatedAccess.entered.wait(30)  # the first request holds the only decoder now
        again, _ = _post(live.url, WRITER, skips(["w"]))
        assert again.status_code == 503 and again.json()["error"] == "busy", again.text
        other = threading.Thread(target=lambda: results.setdefault("other", _post(live.url, OTHER, skips(["o"]))[0]))
        other.start()
        other.join(1.0)
        assert other.is_alive()  # another key waits for the decoder; it is not refused
        assert httpx.get(live.url + "/v1/health", timeout=5).status_code == 200
        _GatedAccess.release.set()
        first.join(60)
        other.join(60)
    replica.close()
    assert results["first"].status_code == 200 and results["other"].status_code == 200


def test_a_small_sync_message_takes_one_hop_to_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nonce log, decoding and the answer share one worker: three hops made each exchange of
    bench/load.py cost more server time than the work they moved off the loop."""
    hops: list[str] = []

    async def counted(func: Callable[..., object], *args: object, **kwargs: object) -> object:
        hops.append(getattr(func, "__name__", repr(func)))
        return await run_in_threadpool(func, *args, **kwargs)

    hop = Hop.__call__

    async def counted_hop(self: Hop, func: Callable[..., object], *args: object) -> object:
        hops.append(getattr(func, "__name__", repr(func)))
        return await hop(self, func, *args)

    for module in (shell, sync_endpoint):  # the signature check hops in one, the sync route in the other
        monkeypatch.setattr(module, "run_in_threadpool", counted)
    monkeypatch.setattr(Hop, "__call__", counted_hop)  # the small message's own hop (server/hop.py)
    replica = Replica.open(tmp_path / "server")
    with LiveServer(create_app(replica, ServerConfig(access=_access()))) as live:
        small, big = skips(["w"], ranges=3), skips(["w"])  # 21 bytes; 128 KiB, past `inline_bytes`
        answer, _ = _post(live.url, WRITER, small)
        assert answer.status_code == 200, answer.text
        assert len(hops) == 1, hops
        hops.clear()
        answer, _ = _post(live.url, WRITER, big)  # hashed, then decoded under the decoders' bound
        assert answer.status_code == 200, answer.text
        assert len(hops) == 4 and len(big) > ServerConfig().inline_bytes, hops
        again, _ = _post(live.url, WRITER, small)
        assert again.status_code == 200
        replayed = httpx.post(live.url + "/v1/sync", content=small, headers=again.request.headers, timeout=30)
        assert replayed.status_code == 401 and "already used" in replayed.json()["reason"], replayed.text
    replica.close()


def test_a_small_message_holds_its_key_s_slot_but_never_waits_for_a_decoder(tmp_path: Path) -> None:
    class Gated(_GatedAccess):  # events of its own: the other test's gate is open for good
        release, entered = threading.Event(), threading.Event()

    replica = Replica.open(tmp_path / "server")
    config = ServerConfig(access=_access(Gated), decoders=1, per_key=1)
    with LiveServer(create_app(replica, config)) as live:
        results: dict[str, httpx.Response] = {}
        first = threading.Thread(
            target=lambda: results.setdefault("first", _post(live.url, WRITER, skips(["slow"], ranges=3))[0]))
        first.start()
        try:
            assert Gated.entered.wait(30)  # decoding the first message, in the worker answering it
            again, _ = _post(live.url, WRITER, skips(["w"], ranges=3))
            assert again.status_code == 503 and again.json()["error"] == "busy", again.text
            other, took = _post(live.url, OTHER, skips(["o"], ranges=3))
            assert other.status_code == 200 and took < 10, (other.text, took)
        finally:
            Gated.release.set()
            first.join(60)
    replica.close()
    assert results["first"].status_code == 200
