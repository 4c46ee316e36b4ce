"""A real uvicorn server on 127.0.0.1 in a background thread, for the HTTP tests."""

from __future__ import annotations

import threading
import time
from types import TracebackType

import uvicorn
from starlette.applications import Starlette


class LiveServer:
    """Serves `app` on a free port of 127.0.0.1 until closed."""

    def __init__(self, app: Starlette) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
