"""The worker-thread hop: results and errors come back to the awaiting task, and at most
`limit` calls run at once."""

from __future__ import annotations

import asyncio
import threading

import pytest

from convgraph.server.hop import Hop


def test_a_call_returns_its_result_or_raises_its_error_on_the_loop() -> None:
    def fail() -> None:
        raise KeyError("nope")

    async def main() -> tuple[int, str]:
        hop = Hop(limit=2)
        result = await hop(lambda a, b: a + b, 2, 3)
        with pytest.raises(KeyError, match="nope"):
            await hop(fail)
        return result, await hop(threading.current_thread)

    result, thread = asyncio.run(main())
    assert result == 5
    assert thread.name.startswith("convgraph-hop") and thread is not threading.main_thread()


def test_at_most_limit_calls_run_at_once_and_the_rest_wait_their_turn() -> None:
    running, most, lock = 0, 0, threading.Lock()
    release = threading.Event()

    def held(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(10)
        with lock:
            running -= 1
        return i

    async def main() -> list[int]:
        hop = Hop(limit=3)
        calls = [asyncio.ensure_future(hop(held, i)) for i in range(10)]
        for _ in range(1000):  # until three have started (the other seven queue)
            if running == 3:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # room for a fourth to start, were the bound broken
        release.set()
        return list(await asyncio.gather(*calls))

    assert asyncio.run(main()) == list(range(10))
    assert most == 3
