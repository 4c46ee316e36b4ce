"""The Agents SDK session reads `Runner.run` makes: `ConvgraphSession` against `SQLiteSession`.

Run from the project root:

    .venv/bin/python bench/agents_session.py            # 1,000 and 10,000 items (~3 minutes)
    .venv/bin/python bench/agents_session.py --quick    # 200 and 800 items: a smoke test
    .venv/bin/python bench/agents_session.py --sizes 2000,10000 --reps 15

Both sessions live on files in one temporary directory and are fed the same items: a step is
one `add_items` of what the runner stores for a tool-using turn (the user's message, a
reasoning item, a `function_call`, its `function_call_output` and the assistant's message,
each with ~300 characters of seeded pseudo-random text). At each size N the script times,
side by side and alternating which goes first:

* **after an append** (what the runner does: each run reads, then stores its new items): add
  one step to both, then time `get_items(limit=200)` and `get_items()`;
* **again** (nothing written in between): the same two reads repeated;
* **cold**: the first `get_items()` of a session opened afresh on the same file (the OS page
  cache stays warm), convgraph's replica opened afresh too, in this process;
* **cold, new process**: the same first read (unlimited, and `limit=200`) in a new interpreter
  per read, as an app restarted: opening is not timed, the read is.

Before each pair of timed reads the script runs one no-op `asyncio.to_thread` and
`gc.collect()`. A list that `asyncio.to_thread` returns bare (SQLiteSession's 10k items) is
freed only when the executor runs its next job, on that job's clock (6-10 ms at 10k; a 200 ms
sleep does not help, the no-op job does), and a collection that the garbage of earlier reads
owes lands at random: this way neither lands on one side's clock. (`ConvgraphSession` hands
its items back boxed, so it leaves no such debt.)
Each figure is the min and median of `--reps` calls in ms; the ratio is convgraph's median over
SQLiteSession's. The targets (issue 28 §3): `limit=200` at most 1.0x, unlimited at 10k
at most 1.5x.
Every timed read is also checked: both sessions return equal items.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents import SQLiteSession

from convgraph import Replica
from convgraph.integrations.openai_agents import ConvgraphSession

Item = dict[str, Any]
Read = Callable[[Any], Awaitable[list[Any]]]
WORDS = ["the", "a", "of", "to", "and", "in", "is", "that", "for", "it", "with", "as", "on", "this", "file",
         "code", "function", "test", "error", "result", "call", "tool", "patch", "review", "value", "return",
         "python", "module", "import", "class", "method", "string", "list", "record", "replica", "user",
         "conversation", "assistant", "output", "input", "line", "path", "config", "build", "check", "fix"]


def text(rng: random.Random, chars: int = 300) -> str:
    words: list[str] = []
    while sum(map(len, words)) + len(words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def step(rng: random.Random, i: int) -> list[Item]:
    """The five items a runner stores for one tool-using turn."""
    return [
        {"role": "user", "content": text(rng)},
        {"type": "reasoning", "id": f"rs_{i}", "summary": [{"type": "summary_text", "text": text(rng, 120)}],
         "encrypted_content": f"gAAAA{i:08d}"},
        {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "lookup",
         "arguments": f'{{"q": "{text(rng, 40)}"}}', "status": "completed"},
        {"type": "function_call_output", "call_id": f"call_{i}", "output": text(rng)},
        {"type": "message", "role": "assistant", "id": f"msg_{i}", "status": "completed",
         "content": [{"type": "output_text", "text": text(rng), "annotations": []}]},
    ]


async def timed(session: Any, limit: int | None) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    items = await session.get_items(limit=limit)
    return time.perf_counter() - start, items


class Pair:
    """The two sessions, and the samples of each read, ours then theirs."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.replica = Replica.open(tmp / "replica")
        self.ours = ConvgraphSession.new(self.replica, "bench")
        self.theirs = SQLiteSession("bench", tmp / "agents.sqlite")
        self.samples: dict[str, tuple[list[float], list[float]]] = {}

    async def add(self, items: list[Item]) -> None:
        await self.ours.add_items(items)  # type: ignore[arg-type]
        await self.theirs.add_items(items)  # type: ignore[arg-type]

    async def read(
        self, label: str, limit: int | None, flip: bool, ours: Any = None, theirs: Any = None
    ) -> None:
        ours, theirs = ours or self.ours, theirs or self.theirs
        first, second = (theirs, ours) if flip else (ours, theirs)
        await asyncio.to_thread(lambda: None)  # the executor frees a result returned bare (SQLiteSession's
        gc.collect()  # 10k items) at its next job, and a collection the garbage owes: on neither clock
        (t1, i1), (t2, i2) = await timed(first, limit), await timed(second, limit)
        if i1 != i2:
            sys.exit(f"{label}: the two sessions returned different items")
        mine, other = self.samples.setdefault(label, ([], []))
        mine.append(t2 if flip else t1)
        other.append(t1 if flip else t2)

    def close(self) -> None:
        self.theirs.close()
        self.replica.close()


async def measure(n: int, reps: int, rng: random.Random) -> dict[str, tuple[list[float], list[float]]]:
    with tempfile.TemporaryDirectory() as tmp:
        pair = Pair(Path(tmp))
        i = 0
        while i * 5 < n - 5 * reps:
            await pair.add(step(rng, i))
            i += 1
        for r in range(reps):
            await pair.add(step(rng, i))
            i += 1
            await pair.read("after an append: limit=200", 200, flip=r % 2 == 1)
            await pair.read("after an append: unlimited", None, flip=r % 2 == 0)
        for r in range(reps):
            await pair.read("again: limit=200", 200, flip=r % 2 == 1)
            await pair.read("again: unlimited", None, flip=r % 2 == 0)
        for r in range(max(3, reps // 3)):
            fresh = Replica.open(Path(tmp) / "replica")
            ours = ConvgraphSession(fresh, pair.ours.session_id)
            theirs = SQLiteSession("bench", Path(tmp) / "agents.sqlite")
            await pair.read("cold: unlimited", None, flip=r % 2 == 1, ours=ours, theirs=theirs)
            theirs.close()
            fresh.close()
        conv = pair.ours.session_id
        pair.close()
        for r in range(max(3, reps // 3)):
            for limit, label in ((None, "cold, new process: unlimited"),
                                 (200, "cold, new process: limit=200")):
                sides = ["ours", "theirs"][::-1 if r % 2 else 1]
                found = {side: in_a_new_process(Path(tmp), conv, side, limit) for side in sides}
                if found["ours"][1] != found["theirs"][1]:
                    sys.exit(f"{label}: the two sessions returned different items")
                mine, other = pair.samples.setdefault(label, ([], []))
                mine.append(found["ours"][0])
                other.append(found["theirs"][0])
        return pair.samples


def in_a_new_process(tmp: Path, conv: str, side: str, limit: int | None) -> tuple[float, str]:
    """The first read's seconds, and a digest of its items, in a new interpreter (an app restarted):
    the imports and the opening are not timed, the read is."""
    argv = [sys.executable, __file__, "--child", str(tmp), conv, side, str(limit or 0)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), out[1]


def child(tmp: Path, conv: str, side: str, limit: int) -> None:
    """`in_a_new_process`'s side: open, time one read, print seconds and digest."""
    if side == "ours":
        replica = Replica.open(tmp / "replica")
        session: Any = ConvgraphSession(replica, conv)
    else:
        session = SQLiteSession("bench", tmp / "agents.sqlite")
    seconds, items = asyncio.run(timed(session, limit or None))
    digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()
    print(seconds, digest)
    if side == "ours":
        replica.close()
    else:
        session.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument("--sizes", help="comma-separated item counts (default 1000,10000)")
    parser.add_argument("--reps", type=int, help="timed calls per read (default 15; quick 5)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        tmp, conv, side, limit = args.child
        child(Path(tmp), conv, side, int(limit))
        return 0
    default = [200, 800] if args.quick else [1000, 10000]
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else default
    reps = args.reps or (5 if args.quick else 15)
    print(f"ConvgraphSession vs SQLiteSession, {reps} reps, ms (min / median), ratio of medians", flush=True)
    for n in sizes:
        samples = asyncio.run(measure(n, reps, random.Random(n)))
        print(f"\nN = {n:,} items")
        for label, (mine, other) in samples.items():
            ratio = statistics.median(mine) / statistics.median(other)
            print(f"  {label:<30} convgraph {min(mine) * 1e3:8.2f} / {statistics.median(mine) * 1e3:8.2f}"
                  f"   SQLiteSession {min(other) * 1e3:8.2f} / {statistics.median(other) * 1e3:8.2f}"
                  f"   {ratio:5.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
