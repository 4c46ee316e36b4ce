"""What the HTTP path costs the sync server's event loop a request, piece by piece, in one
thread and without a socket (issue 31 §2, item 3 of bench/README.md's "next steps").

* parser: a guarded uvicorn protocol (`server/listener.py`) fed one keep-alive `POST` of a
  tiny sync's size and its answer written to a fake transport, h11 against httptools;
* stack: `POST /v1/sync` through Starlette's middleware and router against `_App`'s bare
  route (`server/app.py`), the handler a stub that returns a small reply;
* hop: one trip to a worker thread and back, `run_in_threadpool` against `Hop`.

CPU µs a request (`time.process_time`, medians of `--repeat` runs). `sync_exchanges.py` and
`load.py` measure the whole server; this separates what they cannot on a busy machine.

    PYTHONPATH=src python bench/http_path.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

BODY = b"s" * 1000  # a tiny sync's second message is about 1 kB
REQUEST = (b"POST /v1/sync HTTP/1.1\r\nhost: 127.0.0.1:8000\r\naccept: */*\r\naccept-encoding: gzip\r\n"
           b"connection: keep-alive\r\nuser-agent: python-httpx/0.29.0\r\n"
           b"content-type: application/vnd.convgraph.sync\r\nx-convgraph-actor: " + b"a" * 52 +
           b"\r\nx-convgraph-timestamp: 1765000000000\r\nx-convgraph-nonce: " + b"n" * 16 +
           b"\r\nx-convgraph-signature: " + b"f" * 128 + b"\r\ncontent-length: 1000\r\n\r\n" + BODY)


class _Transport(asyncio.Transport):
    def __init__(self, done: Callable[[], None]) -> None:
        super().__init__()
        self.done, self.closing = done, False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if bytes(data).endswith(b"r" * 10):  # the reply's last bytes: this request is answered
            self.done()

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _reply(_: Any, receive: Any, send: Any) -> None:
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"application/vnd.convgraph.sync"), (b"content-length", b"2000")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"r" * 2000})


async def _parser(name: str, n: int) -> float:
    import uvicorn
    from uvicorn.server import ServerState

    from convgraph.server import listener

    cls = listener.guarded_protocol(listener.ConnectionLimits(), name)
    config = uvicorn.Config(_reply, http=cls, log_level="warning", lifespan="off")
    config.load()
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[None] = loop.create_future()
    protocol: Any = cls(config=config, server_state=ServerState(), app_state={}, _loop=loop)  # type: ignore[call-arg]
    protocol.connection_made(_Transport(lambda: answered.set_result(None) if not answered.done() else None))
    start = time.process_time()
    for _ in range(n):
        answered = loop.create_future()
        protocol.data_received(REQUEST)
        await answered
    spent = time.process_time() - start
    protocol.connection_lost(None)
    return spent / n


def _stack_app(bare: bool) -> Callable[[Any, Any, Any], Awaitable[None]]:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from convgraph.server.app import _App

    async def handler(request: Request) -> Response:
        await request.body()
        return Response(b"r" * 2000, media_type="application/vnd.convgraph.sync")

    # the routes `create_app` lists before `/v1/sync`, so the router tries as many patterns
    routes = [Route(path, handler, methods=["GET"])
              for path in ("/v1/health", "/openapi.json", "/.well-known/convgraph", "/v1/findings")]
    routes.append(Route("/v1/sync", handler, methods=["POST"]))
    return _App(handler, routes=routes) if bare else Starlette(routes=routes)


async def _stack(bare: bool, n: int) -> float:
    app = _stack_app(bare)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/v1/sync", "raw_path": b"/v1/sync", "query_string": b"",
             "root_path": "",
             "headers": [(b"content-type", b"application/vnd.convgraph.sync"), (b"content-length", b"1000")],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {}}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(_: dict[str, Any]) -> None:
        pass

    start = time.process_time()
    for _ in range(n):
        await app(dict(scope), receive, send)
    return (time.process_time() - start) / n


async def _hop(kind: str, n: int) -> float:
    from starlette.concurrency import run_in_threadpool

    from convgraph.server.hop import Hop

    hop = Hop()

    def work() -> int:
        return 1

    start = time.process_time()
    for _ in range(n):
        await (run_in_threadpool(work) if kind == "run_in_threadpool" else hop(work))
    return (time.process_time() - start) / n


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("-n", type=int, default=5000, help="requests a run")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    from convgraph.server import listener

    cases: list[tuple[str, Callable[[], Awaitable[float]]]] = [
        *[(f"parser {p}", lambda p=p: _parser(p, args.n)) for p in reversed(listener.PARSERS)],  # type: ignore[misc]
        ("stack Starlette", lambda: _stack(False, args.n)),
        ("stack bare _App", lambda: _stack(True, args.n)),
        ("hop run_in_threadpool", lambda: _hop("run_in_threadpool", args.n)),
        ("hop Hop", lambda: _hop("Hop", args.n)),
    ]
    spent: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(args.repeat):  # interleaved, so a burst of load lands on every case alike
        for name, case in cases:
            spent[name].append(asyncio.run(case()))
    for name, _ in cases:
        print(f"{name:24} {statistics.median(spent[name]) * 1e6:7.1f} µs CPU a request "
              f"(runs {min(spent[name]) * 1e6:.1f}-{max(spent[name]) * 1e6:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
