"""The event loop's hop to a worker thread for work that blocks (a sync's commit fsyncs).

`run_in_threadpool` (anyio) costs ~110 µs of CPU a hop, a `ThreadPoolExecutor` ~70 µs (a
`concurrent.futures.Future`, its condition and `wrap_future`'s callbacks); this hop sets an
asyncio future from the worker with one `call_soon_threadsafe`, ~35 µs (bench/README.md,
issue 31 §2). Invariant: at most `limit` threads run its work at once, the rest queue in
order; a job whose awaiting task was cancelled still runs to its end (as with anyio), its
result dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_IDLE_S = 10.0  # a thread idle this long ends (as anyio's do): an app dropped leaves none behind

_Job = tuple[Callable[..., Any], tuple[Any, ...], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class Hop:
    """Runs a blocking call in one of at most `limit` daemon threads, started as needed."""

    def __init__(self, limit: int = 40, name: str = "convgraph-hop") -> None:
        self.limit, self.name = limit, name
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = self._idle = 0

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._idle:
                self._idle -= 1  # that thread takes this job
            elif self._threads < self.limit:
                self._threads += 1
                threading.Thread(target=self._work, name=f"{self.name}-{self._threads}", daemon=True).start()
        self._jobs.put((fn, args, loop, future))
        return await future

    def _work(self) -> None:
        while True:
            try:
                fn, args, loop, future = self._jobs.get(timeout=_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # no job has claimed an idle thread meanwhile: this one ends
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the awaiting task, as anyio does
                result, error = None, exc
            with self._lock:
                self._idle += 1
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits for this result
                loop.call_soon_threadsafe(_settle, future, result, error)
            del fn, args, future, result, error  # hold nothing of a finished request while idle


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
