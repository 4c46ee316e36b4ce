"""The Agents SDK session read the Runner does each run: `get_items(limit=n)` at a long history.

Run from the project root:

    .venv/bin/python bench/session_window.py [N ...]   (default: 1000 4000)

For each N, grows one session to N items (steps of four: user message, function call, its
output, assistant message) on `ConvgraphSession` over an on-disk replica and on the SDK's
own `SQLiteSession` over a file, then times warm `get_items(limit=10)`,
`get_items(limit=100)` (median of 30) and one `pop_item`. Reported: ms per call. The claim
it checks is that the convgraph read is O(n), not O(history): the figures at 1,000 and
4,000 items should be about equal.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agents import SQLiteSession

from convgraph import Replica
from convgraph.integrations.openai_agents import ConvgraphSession


def step(i: int) -> list[Any]:
    return [{"role": "user", "content": f"question {i}"},
            {"type": "function_call", "call_id": f"call_{i}", "name": "lookup", "arguments": f'{{"q": {i}}}'},
            {"type": "function_call_output", "call_id": f"call_{i}", "output": f"result {i}"},
            {"type": "message", "role": "assistant", "id": f"msg_{i}", "status": "completed",
             "content": [{"type": "output_text", "text": f"answer {i}", "annotations": []}]}]


def timed(call: Any, reps: int = 30) -> float:
    asyncio.run(call())  # warm
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        asyncio.run(call())
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def measure(name: str, session: Any, n: int) -> None:
    start = time.perf_counter()
    for i in range(n // 4):
        asyncio.run(session.add_items(step(i)))
    add = (time.perf_counter() - start) / (n // 4) * 1000
    w10 = timed(lambda: session.get_items(limit=10))
    w100 = timed(lambda: session.get_items(limit=100))
    start = time.perf_counter()
    asyncio.run(session.pop_item())
    pop = (time.perf_counter() - start) * 1000
    print(f"{name:<18} N={n:>5}  add_items(4) {add:6.2f} ms  get_items(10) {w10:6.2f} ms  "
          f"get_items(100) {w100:6.2f} ms  pop_item {pop:6.2f} ms", flush=True)


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 4000]
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            replica = Replica.open(Path(tmp) / "replica")
            measure("ConvgraphSession", ConvgraphSession.new(replica), n)
            replica.close()
            measure("SQLiteSession", SQLiteSession("bench", Path(tmp) / "agents.sqlite"), n)


if __name__ == "__main__":
    main()
