"""Finding threads: `ConvgraphSaver.list(None, filter=…)` and `threads(…)` answered from the thread
index, side by side with the scan of every conversation they replace (issue 28 §7).

Run from the project root:

    .venv/bin/python bench/thread_search.py                # 10,000 threads (built once: minutes), 7 runs
    .venv/bin/python bench/thread_search.py --quick        # 300 threads, 3 runs: a smoke test
    .venv/bin/python bench/thread_search.py --json bench/results-thread-search.json

The replica is built once and kept under `--cache` (default bench/out/thread-search-N/): N
threads of two checkpoints each (LangGraph's `input` at step -1 and `loop` at step 0, one user
message as a turn), whose metadata carries `source`, `step`, `parents`, `run_id` (one per
thread) and the user keys `user` (one of N/10) and `topic` (one of 8): four records a thread.
Each query is timed on a saver that has answered once already (warm: the index caught up, the
matching threads folded) and, for the first call, on a fresh saver of a reopened replica
(cold: the index read from its file). "scan" is the code this replaced (every conversation's
first record and fold, every checkpoint's metadata): the same saver with `_all_threads` and
`_listed` as they were. Every answer is checked equal between the two. Figures: min and
median over the runs, in ms.
"""

from __future__ import annotations

import argparse
import builtins
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT

from convgraph import Replica
from convgraph.integrations.langgraph import ConvgraphSaver

TOPICS = ("billing", "code", "travel", "health", "music", "sport", "news", "food")
PER_TRANSACTION = 250


def build(home: Path, threads: int) -> None:
    """`threads` threads of two checkpoints each, written through the saver."""
    with Replica.open(home) as replica:
        saver = ConvgraphSaver(replica)
        for start in range(0, threads, PER_TRANSACTION):
            with replica.transaction():
                for i in range(start, min(start + PER_TRANSACTION, threads)):
                    _thread(saver, i, threads)


def _thread(saver: ConvgraphSaver, i: int, threads: int) -> None:
    users = max(1, threads // 10)
    meta = {"run_id": f"run-{i}", "user": f"user-{i % users}", "topic": TOPICS[i % len(TOPICS)],
            "parents": {}}
    config: Any = {"configurable": {"thread_id": f"t-{i}", "checkpoint_ns": ""}}
    parent = None
    for step, source in ((-1, "input"), (0, "loop")):
        ck = empty_checkpoint()
        ck["id"] = str(uuid6(clock_seq=step + 1))
        ck["channel_values"] = {"messages": [HumanMessage(f"hello {i}", id=f"m-{i}")]}
        ck["channel_versions"] = {"messages": 1}
        if parent is not None:
            config["configurable"]["checkpoint_id"] = parent
        versions: Any = {"messages": 1} if parent is None else {}
        saver.put(config, ck, {**meta, "source": source, "step": step}, versions)  # type: ignore[typeddict-item]
        parent = ck["id"]


class ScanSaver(ConvgraphSaver):
    """The saver as it was before the thread index: every listing scans every conversation."""

    def __init__(self, replica: Replica) -> None:
        super().__init__(replica)
        self._scanned: dict[str, str | None] = {}

    def _all_threads(self) -> list[tuple[str, str]]:
        for conv in self.replica.conversations():
            if conv not in self._scanned:
                first = self.replica.first(conv)
                meta = first.payload.get("meta") if first is not None and first.kind == "genesis" else None
                mark = meta.get("langgraph") if type(meta) is dict else None
                found = mark.get("thread_id") if type(mark) is dict else None
                self._scanned[conv] = found if type(found) is str else None
        return sorted((t, c) for c, t in self._scanned.items() if t is not None)

    def _listed(
        self, config: Any, wanted: dict[str, Any], before: Any, limit: int | None,  # noqa: ARG002 (never given)
    ) -> Iterator[CheckpointTuple]:
        conf = (config or {}).get("configurable", {})
        threads = self._all_threads()
        left = limit
        for thread_id, conv in threads:
            thread = self._thread(conv)
            for ck in thread.listed(conf.get("checkpoint_ns")):
                metadata = self._meta(ck)
                if any(metadata.get(k) != v for k, v in wanted.items()):
                    continue
                if left is not None:
                    if left <= 0:
                        return
                    left -= 1
                yield self._tuple(thread, thread_id, ck)

    def threads(
        self, *, owner: bytes | None = None, title: str | None = None,  # noqa: ARG002 (only title is asked)
        filter: dict[str, Any] | None = None,  # noqa: ARG002
    ) -> Any:
        """Only `title`, as a scan answers it: every thread's genesis read and compared."""
        out = []
        for thread_id, conv in self._all_threads():
            first = self.replica.first(conv)
            if first is not None and (title is None or first.payload.get("title") == title):
                out.append(thread_id)
        return out


def queries(threads: int) -> dict[str, Callable[[ConvgraphSaver], Any]]:
    """The measured calls, each returning something comparable between the two savers."""
    middle = threads // 2
    users = max(1, threads // 10)

    def listed(**kw: Any) -> Callable[[ConvgraphSaver], Any]:
        return lambda s: [(t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_id"])
                          for t in s.list(None, **kw)]

    return {
        "list filter user (10 threads)": listed(filter={"user": f"user-{middle % users}"}),
        "list filter run_id, limit 1": listed(filter={"run_id": f"run-{middle}"}, limit=1),
        "list filter source+step+topic, limit 10": listed(
            filter={"source": "loop", "step": 0, "topic": "music"}, limit=10),
        "thread by title": lambda s: [i if type(i) is str else i.thread_id
                                      for i in s.threads(title=f"LangGraph thread t-{middle}")],
    }


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = call()
    return (time.perf_counter() - t) * 1000, out


def measure(home: Path, threads: int, runs: int) -> dict[str, Any]:
    """Each query on each saver: cold (its first call on a reopened replica), then warm."""
    figures: dict[str, Any] = {}
    for name, query in queries(threads).items():
        row: dict[str, list[float]] = {"index cold": [], "index warm": [], "scan cold": [], "scan warm": []}
        answers = set()
        for _ in range(runs):
            for kind, make in (("index", ConvgraphSaver), ("scan", ScanSaver)):
                with Replica.open(home) as replica:
                    saver = make(replica)
                    for when in ("cold", "warm"):
                        ms, out = timed(lambda: query(saver))  # noqa: B023 (called at once)
                        row[f"{kind} {when}"].append(ms)
                        answers.add(repr(out))
        if len(answers) != 1:
            raise SystemExit(f"{name}: the index and the scan answered differently: {answers}")
        figures[name] = {k: {"min": round(min(v), 3), "median": round(statistics.median(v), 3)}
                         for k, v in row.items()}
        print(f"{name} (min/median ms): " + "  ".join(
            f"{k} {v['min']:.2f}/{v['median']:.2f}" for k, v in figures[name].items()), flush=True)
    return figures


def main(argv: builtins.list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="300 threads, 3 runs: a smoke test")
    p.add_argument("--cache", type=Path, default=ROOT / "bench" / "out", help="where built replicas are kept")
    p.add_argument("--json", type=Path, help="write the figures here")
    args = p.parse_args(argv)
    threads, runs = (300, min(3, args.runs)) if args.quick else (args.threads, args.runs)
    where = args.cache / f"thread-search-{threads}"
    home, done = where / "home", where / "built"
    if not done.exists():
        t = time.perf_counter()
        where.mkdir(parents=True, exist_ok=True)
        build(home, threads)
        done.write_text(f"{threads}\n")
        print(f"built {threads:,} threads in {time.perf_counter() - t:.0f} s under {where}", flush=True)
    figures = {"threads": threads, "runs": runs, "queries": measure(home, threads, runs)}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
