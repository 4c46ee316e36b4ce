"""How long moving a whole LangGraph `SqliteSaver` thread into `ConvgraphSaver` takes.

Run from the project root:

    .venv/bin/python bench/import_thread.py                 # 100 invokes: 500 checkpoints
    .venv/bin/python bench/import_thread.py --quick         # 4 invokes: a smoke test
    .venv/bin/python bench/import_thread.py --invokes 200 --runs 3 --json out.json

The thread is made by `compaction.py`'s tool-using graph on a `SqliteSaver` file: each invoke
adds four messages of ~300 characters of seeded text and five checkpoints, so 100 invokes are
a 500-checkpoint thread of 400 messages. Then, each timed alone, best of `--runs`:

* **read**: `read_whole_thread`, the source read whole (every checkpoint through
  `SqliteSaver.list`, every write);
* **import**: `import_langgraph_thread` into a new SQLite replica (reading included);
* **again**: the same import run a second time (writes nothing);
* **SqliteSaver copy** (the baseline, side by side): the same tuples written into a fresh
  `SqliteSaver` file with `put` and `put_writes`, parents first: what LangGraph's own saver
  takes to receive the thread it already holds.

Each import is checked: the replica's `list` gives the source's tuples, and the second run
writes no record.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compaction import THREAD, graph, run
from langgraph.checkpoint.sqlite import SqliteSaver

from convgraph import Replica
from convgraph.importers.langgraph_thread import import_langgraph_thread, read_whole_thread
from convgraph.integrations.langgraph import ConvgraphSaver


def _shown(saver: Any) -> list[tuple[Any, ...]]:
    return [(t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
            for t in saver.list(THREAD)]


def _best(runs: int, work: Callable[[int], Any]) -> float:
    times = []
    for i in range(runs):
        start = time.perf_counter()
        work(i)
        times.append(time.perf_counter() - start)
    return min(times)


def _sqlite_copy(source: Path, target: Path) -> None:
    """The thread written into another `SqliteSaver`, parents first, as LangGraph would."""
    tuples, tasks = read_whole_thread(source, "bench")
    with SqliteSaver.from_conn_string(str(target)) as saver:
        for tup in reversed(tuples):  # list gives newest first; this thread has no forks
            conf = tup.config["configurable"]
            versions = tup.checkpoint["channel_versions"]
            saver.put(tup.parent_config or {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}},
                      tup.checkpoint, tup.metadata, versions)
            for task in tasks.get((conf["checkpoint_ns"], conf["checkpoint_id"]), []):
                saver.put_writes(tup.config, task.written(), task.task, task.path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--invokes", type=int, default=100, help="graph invokes (5 checkpoints each)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="4 invokes, one run: a smoke test")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    invokes, runs = (4, 1) if args.quick else (args.invokes, args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "source.sqlite"
        with SqliteSaver.from_conn_string(str(db)) as saver:
            run(graph(saver, args.seed), invokes, args.seed)
            expected = _shown(saver)
        figures: dict[str, Any] = {"invokes": invokes, "checkpoints": len(expected),
                                   "source KiB": db.stat().st_size // 1024, "load before": os.getloadavg()[0]}
        figures["read s"] = _best(runs, lambda _: read_whole_thread(db, "bench"))
        records: list[int] = []

        def imported(i: int) -> None:
            with Replica.open(Path(tmp) / f"home-{i}") as replica:
                report = import_langgraph_thread(replica, db, "bench")
                records.append(report.records)

        figures["import s"] = _best(runs, imported)
        with Replica.open(Path(tmp) / "home-0") as replica:
            assert _shown(ConvgraphSaver(replica)) == expected, "the import reads back otherwise"
            figures["turns"] = sum(1 for r in replica.iter_records(replica.conversations()[0])
                                   if r.kind in ("user_message", "agent_message", "tool_result"))

        def again(_: int) -> None:
            with Replica.open(Path(tmp) / "home-0") as replica:
                assert import_langgraph_thread(replica, db, "bench").records == 0, "a second import wrote"

        figures["again s"] = _best(runs, again)
        figures["SqliteSaver copy s"] = _best(runs, lambda i: _sqlite_copy(db, Path(tmp) / f"copy-{i}.db"))
        figures["records"] = records[0]
        figures["load after"] = os.getloadavg()[0]
    base = figures["SqliteSaver copy s"]
    print(f"{invokes} invokes: {figures['checkpoints']} checkpoints, {figures['turns']} turns, "
          f"{figures['records']} records; source {figures['source KiB']:,} KiB; "
          f"load {figures['load before']:.1f} -> {figures['load after']:.1f}; best of {runs}")
    for key in ("read s", "import s", "again s", "SqliteSaver copy s"):
        ratio = figures[key] / base
        print(f"  {key[:-2]:<18} {figures[key] * 1000:>9.0f} ms  ({ratio:.2f}x the SqliteSaver copy)")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
