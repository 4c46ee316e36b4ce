"""Warm `resume(last=200)` against OpenAI Agents `SQLiteSession.get_items(200)`, in one process.

Builds the conversation of `bench/resume.py` (same seed and steps: a user turn, an assistant
turn with one tool call, its result, ~1 KB of text each) in a convgraph replica of `--steps`
steps and in an Agents session of 250 steps (its `get_items` reads the last rows only, so
its size does not matter), then times, in alternating rounds so that both see the same load:

* `get_items(200)`: the peer, no conversion;
* `resume` anthropic / openai, warm and unchanged: the store has not changed since the last call;
* `resume` anthropic / openai, uncached: the window read from the index, repaired and rendered
  (what every call cost before the answers were cached);
* `resume` anthropic after one step: one step is written (not timed), then one resume is timed,
  so its window moved by three turns (the agent-loop case: every resume follows a write).

Usage: .venv/bin/python bench/resume_warm.py [--steps 10000] [--rounds 5] [--calls 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import resume as bench  # bench/resume.py: the same conversation and peers

from convgraph.projections.resume import to_provider


def _median_ms(fn: Callable[[], Any], calls: int) -> float:
    walls = []
    for _ in range(calls):
        t = time.perf_counter_ns()
        fn()
        walls.append((time.perf_counter_ns() - t) / 1e6)
    return statistics.median(walls)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "c").mkdir()
        (home / "a").mkdir()
        ours = bench.ConvgraphPeer(home / "c", "write_many")
        theirs = bench.AgentsPeer(home / "a", "")
        t = time.perf_counter()
        gen = bench.steps(args.steps + args.rounds * args.calls + 10)
        for k in range(args.steps):
            step = next(gen)
            ours.append(ours.prepare(step))
            if k < 250:
                theirs.append(theirs.prepare(step))
        built_s = time.perf_counter() - t
        r, conv, last = ours.replica, bench.CONV, bench.LAST

        async def get() -> Any:
            return await theirs.session.get_items(limit=last)

        def resume(p: str) -> Callable[[], Any]:
            return lambda: r.resume(conv, p, last=last)

        def uncached(p: str) -> Callable[[], Any]:
            return lambda: to_provider(r._window(conv, None, last).turns, p)

        for p in ("anthropic", "openai"):  # the cached answer is the uncached one, byte for byte
            if repr(r.resume(conv, p, last=last)) != repr(uncached(p)()):
                raise AssertionError(f"cached {p} resume differs from the uncached one")
        figures: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for name, fn in (("get_items(200)", lambda: theirs.loop.run_until_complete(get())),
                             ("resume anthropic, unchanged", resume("anthropic")),
                             ("resume openai, unchanged", resume("openai")),
                             ("resume anthropic, uncached", uncached("anthropic")),
                             ("resume openai, uncached", uncached("openai"))):
                for _ in range(5):
                    fn()
                figures.setdefault(name, []).append(_median_ms(fn, args.calls))
            moved = []
            for _ in range(args.calls):
                ours.append(ours.prepare(next(gen)))
                t0 = time.perf_counter_ns()
                r.resume(conv, "anthropic", last=last)
                moved.append((time.perf_counter_ns() - t0) / 1e6)
            figures.setdefault("resume anthropic, after one step", []).append(statistics.median(moved))
        ours.close()
        theirs.close()
    peer = statistics.median(figures["get_items(200)"])
    print(f"steps {args.steps:,} (built in {built_s:.0f} s), {args.rounds} rounds x {args.calls} calls, "
          f"load {load_start:.2f} -> {os.getloadavg()[0]:.2f}")
    rows = []
    for name, per_round in figures.items():
        med = statistics.median(per_round)
        rows.append({"call": name, "median_ms": med, "rounds_ms": per_round, "vs_get_items": med / peer})
        print(f"  {name:34} {med:7.3f} ms  {med / peer:5.2f}x get_items   rounds "
              + " ".join(f"{x:.3f}" for x in per_round))
    if args.json:
        args.json.write_text(json.dumps({"steps": args.steps, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
