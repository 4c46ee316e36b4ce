"""How a fresh process reads a long conversation's system prompt: from the turn index, not the fold.

Run from the project root:

    .venv/bin/python bench/system_prompt.py [N]        # N turns (default 10,000)

Writes one rooted conversation of N turns (user / assistant alternating, ~200 bytes each)
with a system prompt set first and replaced once halfway, into a fresh SQLite replica in a
temporary directory; closes it; then, in this same process but through a newly opened
replica (nothing cached), times `Replica.system` (cold, then the median of 50 warm calls),
`Replica.request(conv, "anthropic", last=20)` and, for comparison, the fold that answers
when the index cannot (`Replica.visible` + `projections.system`). Prints one line per figure.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from convgraph import ManualClock, Replica
from convgraph.projections.system import fold_prompts, system_of
from convgraph.projections.transcript import FoldLines


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "r"
        clock = ManualClock()
        with Replica.open(home, clock=clock) as writer:
            conv = writer.create("long")
            writer.set_system(conv, "You are the first prompt.")
            for k in range(n):
                clock.advance(1)
                if k == n // 2:
                    writer.set_system(conv, "You are the prompt that applies.")
                writer.say(conv, "user" if k % 2 == 0 else "assistant", f"turn {k} " + "x" * 190)
        with Replica.open(home, clock=clock) as fresh:
            start = time.perf_counter()
            prompt = fresh.system(conv)
            cold = _ms(start)
            warm = []
            for _ in range(50):
                start = time.perf_counter()
                fresh.system(conv)
                warm.append(_ms(start))
            start = time.perf_counter()
            request = fresh.request(conv, "anthropic", last=20)
            req = _ms(start)
            folded_anything = bool(fresh._folds.views)
            start = time.perf_counter()
            state = fresh.visible(conv)
            by_fold = system_of(FoldLines(state), fold_prompts(state))
            fold = _ms(start)
        assert prompt == by_fold == request["system"] == "You are the prompt that applies."
        print(f"turns {n}: system() cold {cold:.2f} ms, warm median {statistics.median(warm):.3f} ms; "
              f"request(last=20) {req:.2f} ms ({len(request['messages'])} messages); "
              f"folded before the comparison: {folded_anything}; the fold instead: {fold:.0f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
