"""Cold start of a LangGraph thread: the first `graph.get_state(config)` in a fresh process, on
`SqliteSaver` and on convgraph's `ConvgraphSaver`, side by side (issue 28 §5).

Run from the project root:

    .venv/bin/python bench/langgraph_cold.py                   # 500 and 5,000 steps, 7 samples each
    .venv/bin/python bench/langgraph_cold.py --quick           # 40 steps, 2 samples: a smoke test
    .venv/bin/python bench/langgraph_cold.py --profile 5000    # also cProfile convgraph's cold read

The thread is `bench/resume.py --only saver`'s: `StateGraph(MessagesState)` whose one node
appends a fixed assistant message (no LLM); a step is one `invoke` with the step's user message
(`--chars` long, 100 by default, with fixed ids), so 2 messages and 3 checkpoints a step.
Fixtures are built once into `--cache` (default bench/out/langgraph-cold/) and reused.

`ConvgraphSaver`'s thread is what a real run leaves: every step invoked, every record kept.
`SqliteSaver` keeps the whole message list in every checkpoint, so its file grows with
steps² (8 GB at 2,000 steps of 1 KB messages) and so does the time to build it (a step at
1,000 messages already costs 120 ms there); its cold read is one `SELECT ... ORDER BY
checkpoint_id DESC LIMIT 1` and that row's writes, whatever came before. So its file holds
only the thread's latest checkpoint and its pending writes, `put` from the convgraph thread's
latest tuple (same values, versions and metadata): what a `SqliteSaver` thread whose
superseded checkpoints were deleted holds, and what its cold read reads in any case.

Each sample is a fresh `python` process per saver (order alternating): it imports LangGraph and
the saver (timed apart: `import`), opens the store and compiles the graph (`open`), then times
the first `get_state` (`get_state`). Both states' values are hashed and must be equal. Figures:
medians over the samples, in ms; the ratio is convgraph over SqliteSaver.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, WORDS, environment

OUT = ROOT / "bench" / "out" / "langgraph-cold"
THREAD = "cold-thread"
SAVERS = ("SqliteSaver", "ConvgraphSaver")
REPLY = "Noted; carrying on."


def _graph(saver: Any) -> Any:
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=REPLY, id=f"a{len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def _text(step: int, chars: int) -> str:
    rng = random.Random(step)
    words: list[str] = [f"step {step}:"]
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:chars]


def build(fixture: Path, steps: int, chars: int) -> dict[str, Any]:
    """Run `steps` steps on both savers into `fixture` (kept: a finished one is reused)."""
    done = fixture / "built.json"
    if done.exists():
        return dict(json.loads(done.read_text()))
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver

    from convgraph import Replica
    from convgraph.integrations.langgraph import ConvgraphSaver

    fixture.mkdir(parents=True, exist_ok=True)
    for stale in ("sqlite.db", "sqlite.db-wal", "sqlite.db-shm"):
        (fixture / stale).unlink(missing_ok=True)
    replica_home = fixture / "replica"
    if replica_home.exists():
        import shutil

        shutil.rmtree(replica_home)
    replica = Replica.open(replica_home)
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    config: Any = {"configurable": {"thread_id": THREAD}}
    started = time.perf_counter()
    for step in range(steps):
        graph.invoke({"messages": [HumanMessage(content=_text(step, chars), id=f"h{step}")]}, config=config)
        if step % 500 == 499:
            print(f"  built {step + 1}/{steps} steps in {time.perf_counter() - started:.0f} s", flush=True)
    built_s = time.perf_counter() - started
    latest = saver.get_tuple(config)
    records = sum(1 for _ in replica.store.iter_all())
    replica.close()
    if latest is None:
        raise SystemExit(f"the built thread at {fixture} has no checkpoint")
    with sqlite3.connect(fixture / "sqlite.db", check_same_thread=False) as conn:
        lite = SqliteSaver(conn)
        parent = latest.parent_config or config
        versions = dict(latest.checkpoint["channel_versions"])
        stored = lite.put(parent, latest.checkpoint, latest.metadata, versions)
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task, channel, value in latest.pending_writes or ():
            by_task.setdefault(task, []).append((channel, value))
        for task, writes in by_task.items():
            lite.put_writes(stored, writes, task)
    sizes = {"SqliteSaver": _size(fixture, "sqlite.db*"), "ConvgraphSaver": _size(replica_home, "*")}
    info = {"steps": steps, "chars": chars, "records": records, "build_s": round(built_s, 1), "bytes": sizes}
    done.write_text(json.dumps(info))
    return info


def _size(root: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in root.glob(pattern) if p.is_file())


# ------------------------------------------------------------ the fresh process


def child(saver: str, fixture: Path, profile: Path | None) -> None:
    """One cold read, as a fresh process does it; prints its timings and the state's digest."""
    t0 = time.perf_counter()
    from langgraph.graph import StateGraph  # noqa: F401 (timed: what any graph's process imports)

    if saver == "ConvgraphSaver":
        from convgraph import Replica
        from convgraph.integrations.langgraph import ConvgraphSaver
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver
    t1 = time.perf_counter()
    if saver == "ConvgraphSaver":
        graph = _graph(ConvgraphSaver(Replica.open(fixture / "replica")))
    else:
        graph = _graph(SqliteSaver(sqlite3.connect(fixture / "sqlite.db", check_same_thread=False)))
    config = {"configurable": {"thread_id": THREAD}}
    t2 = time.perf_counter()
    if profile is not None:
        import cProfile

        with cProfile.Profile() as prof:
            state = graph.get_state(config)
        prof.dump_stats(profile)
    else:
        state = graph.get_state(config)
    t3 = time.perf_counter()
    values = state.values
    digest = hashlib.sha256(repr(sorted(values.items())).encode()).hexdigest()
    print(json.dumps({"import_ms": (t1 - t0) * 1e3, "open_ms": (t2 - t1) * 1e3,
                      "get_state_ms": (t3 - t2) * 1e3, "messages": len(values.get("messages", ())),
                      "next": list(state.next), "digest": digest}))


def sample(saver: str, fixture: Path, profile: Path | None = None) -> dict[str, Any]:
    src = str(ROOT / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (src, os.environ.get("PYTHONPATH"))))}
    args = [sys.executable, str(Path(__file__).resolve()), "--child", saver, str(fixture)]
    if profile is not None:
        args += ["--profile-out", str(profile)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure(fixture: Path, samples: int) -> dict[str, Any]:
    """`samples` cold reads of each saver, alternating which goes first; states checked equal."""
    got: dict[str, list[dict[str, Any]]] = {s: [] for s in SAVERS}
    for i in range(samples):
        for saver in SAVERS if i % 2 == 0 else tuple(reversed(SAVERS)):
            got[saver].append(sample(saver, fixture))
    digests = {s["digest"] for runs in got.values() for s in runs}
    if len(digests) != 1:
        raise SystemExit(f"the two savers' states differ at {fixture}: {sorted(digests)}")
    out: dict[str, Any] = {"messages": got["SqliteSaver"][0]["messages"]}
    for saver, runs in got.items():
        out[saver] = {k: statistics.median(r[k] for r in runs)
                      for k in ("import_ms", "open_ms", "get_state_ms")}
        out[saver]["get_state_min_ms"] = min(r["get_state_ms"] for r in runs)
    lite, conv = out["SqliteSaver"], out["ConvgraphSaver"]
    out["ratio_get_state"] = conv["get_state_ms"] / lite["get_state_ms"]
    both = {s: out[s]["open_ms"] + out[s]["get_state_ms"] for s in SAVERS}
    out["ratio_open_get_state"] = both["ConvgraphSaver"] / both["SqliteSaver"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, help="steps per thread (default 500 5000)")
    parser.add_argument("--quick", action="store_true", help="40 steps, 2 samples")
    parser.add_argument("--samples", type=int, default=7, help="fresh processes per saver and size")
    parser.add_argument("--chars", type=int, default=100, help="characters of each user message")
    parser.add_argument("--cache", type=Path, default=OUT, help="where fixtures are built and kept")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--profile", type=int, default=None, help="cProfile convgraph's read at this size")
    parser.add_argument("--child", nargs=2, metavar=("SAVER", "FIXTURE"), help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], Path(args.child[1]), args.profile_out)
        return 0
    sizes = args.sizes or ([40] if args.quick else [500, 5000])
    samples = 2 if args.quick else args.samples
    env = environment(("langgraph", "langgraph-checkpoint-sqlite", "langchain-core"))
    figures: dict[str, Any] = {"environment": env, "chars": args.chars, "samples": samples, "sizes": {}}
    print(f"load average at start: {env['loadavg_start']}")
    for steps in sizes:
        fixture = args.cache / f"steps-{steps}-chars-{args.chars}"
        info = build(fixture, steps, args.chars)
        if args.profile == steps:
            out = fixture / "convgraph.prof"
            sample("ConvgraphSaver", fixture, out)
            import pstats

            pstats.Stats(str(out)).sort_stats("cumulative").print_stats(30)
        row = {**info, **measure(fixture, samples)}
        figures["sizes"][str(steps)] = row
        lite, conv = row["SqliteSaver"], row["ConvgraphSaver"]
        print(f"{steps:>6} steps, {row['messages']} messages, {row['records']} convgraph records:")
        for name, r in (("SqliteSaver", lite), ("ConvgraphSaver", conv)):
            print(f"  {name:<15} import {r['import_ms']:7.0f}  open {r['open_ms']:6.1f}  "
                  f"get_state {r['get_state_ms']:8.1f} (min {r['get_state_min_ms']:.1f}) ms")
        print(f"  ratio get_state {row['ratio_get_state']:.2f}x, "
              f"open + get_state {row['ratio_open_get_state']:.2f}x")
    figures["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at end: {figures['loadavg_end']}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
