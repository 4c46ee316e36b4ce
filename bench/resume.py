"""Append, store size and resume benchmark: convgraph against LangGraph and the OpenAI Agents SDK.

Run from the project root:

    .venv/bin/python bench/resume.py [--quick] [--json bench/results-resume.json]

    --quick               N = 50, 250 side by side, convgraph alone to 5,000 (~2 minutes)
    --json PATH           also write the raw figures (per-milestone, per-call, run curves)
    --langgraph-max N     stop LangGraph at the largest side-by-side N <= this
    --langgraph-exit      also run LangGraph with `invoke(..., durability="exit")`
    --only PEER           run only langgraph / agents / convgraph (repeatable)
    --long N,N,...        the long convgraph run's milestones (default: the size's own)

Budget. The full run is dominated by LangGraph, whose cost per step grows linearly
with the conversation (each step writes three checkpoints holding every message so far),
so its total is quadratic: on the 2-core box this was written on (with other work
running), 250 steps took ~25 s, 181 ms a step at the end and 333 MiB of store;
extrapolating, 2,000 steps would take ~25-35 minutes and ~20 GiB of scratch disk (put
it elsewhere with `--tmp`). The progress bar shows LangGraph's current ms/step; the
"Runs" table prints each run's measured wall time. Everything else takes ~5 minutes.

Every peer is fed the same synthetic agent conversation, generated from one seed: step
`k` is a user message, an assistant message with one tool call (`lookup`, input
`{"q": ...}`, id `call_k`) and that call's tool result, each ~1 KB of pseudo-random text
(900-1100 characters). Each peer grows one conversation to its largest N in a fresh
child process (multiprocessing spawn, so imports and memory don't mix); peers run one
after the other. At each milestone N the child pauses (outside any timing), checkpoints
the WAL (`PRAGMA wal_checkpoint(TRUNCATE)` from a separate connection), adds up the
sizes of the database, -wal and -shm files, and times warm "resume" calls: 5 warm-ups,
then at least 50 timed calls (median, p95, min; plus the first call before the
warm-ups), and a "cold" resume: open the store afresh in the same process (the OS page
cache stays warm, so this is a process restart, not a cold disk) and make the first
call, median of up to 3 tries. For convgraph, each milestone also starts a **fresh
process** (`python -c`, nothing imported but convgraph) that opens the replica and makes
the first `resume(last=200)`: it reports the import time apart, open + first resume, and
that process's peak RSS (VmHWM), median of 3 (peak: the largest). Per-step append time is
shown twice: the mean over the last 10% of steps before the milestone (what a step costs
*at* that length) and the mean over all steps (what the whole conversation cost).

The peers, each driven as its users drive it:

* **LangGraph `SqliteSaver`**: `StateGraph(MessagesState)` with one node, compiled with
  the saver on a file. A step is one `graph.invoke({"messages": [HumanMessage]},
  config={"configurable": {"thread_id": ...}})` whose node returns the step's `AIMessage`
  (with `tool_calls`) and `ToolMessage`; default durability. Resume is
  `convert_to_openai_messages(graph.get_state(config).values["messages"][-200:])`.
* **OpenAI Agents SDK `SQLiteSession`** on a file: a step is one `await
  session.add_items([...])` of the four items the SDK's runner stores for such a turn
  (user input, assistant `message`, `function_call`, `function_call_output`, built with
  the SDK's own helpers and `openai` types). Resume is `await session.get_items(limit=200)`
  (already the Responses API input format); `limit=267` covers the same 200 messages.
* **convgraph**: `Replica.open(dir)`; a step is one `write_many` of the three drafts
  (`user_message`, `agent_message` with `tool_calls`, `tool_result`). Variants: one
  `write` per message (3 transactions a step) and `write_many` under `synchronous=FULL`
  (the SQLite default both peers run with). Resume is `convgraph.resume(replica, conv,
  provider="anthropic", last=200)` and `provider="openai"`. A longer run (100,000 steps)
  checks that append cost and bytes per step stay flat and that resume stays fast.
* **LangGraph checkpointers side by side** (`--only saver`): one small graph,
  `StateGraph(MessagesState)` whose one node appends a fixed assistant message (no LLM),
  compiled once with `SqliteSaver` and once with convgraph's `ConvgraphSaver` (on a replica's
  SQLite file); a step is one `invoke` with the step's user message (2 messages a step).
  Resume is `graph.get_state(config).values["messages"][-200:]` (no format conversion).

The run imports convgraph from a copy of src/ taken when it starts (see `--no-snapshot`),
so concurrent edits cannot change the code under test halfway through.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import multiprocessing as mp
import os
import queue
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    WORDS,
    environment,
    machine_busy_s,
    ok_mark,
    on_snapshot,
    own_cpu_s,
    status_kib,
    tree_digest,
)
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

_DISTS = (
    "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "langchain-core",
    "openai-agents", "openai", "cbrrr", "pynacl",
)
SEED = 20261202
CONV = "bench-resume"
LAST = 200  # messages a resume hands to the provider
SAME_WINDOW_ITEMS = 267  # Agents SDK items holding the last 200 messages (4 items = 3 messages a step)


@dataclass(frozen=True)
class Sizes:
    """Milestones (steps) of each run, and how many warm resume calls each milestone times."""

    side: tuple[int, ...]  # all three peers, side by side
    ours: tuple[int, ...]  # convgraph alone, the long run
    calls: int  # timed resume calls per milestone (>= 50)
    slow_calls: int  # the same for LangGraph, whose resume is slow


FULL_SIZES = Sizes(side=(250, 1000, 2000), ours=(250, 1000, 2000, 10_000, 100_000), calls=200, slow_calls=50)
QUICK_SIZES = Sizes(side=(50, 250), ours=(50, 250, 1000, 5000), calls=100, slow_calls=50)
# checks that every peer runs (tests/bench/test_smoke.py), in seconds: its figures mean nothing
SMOKE_SIZES = Sizes(side=(10,), ours=(10, 30), calls=5, slow_calls=5)


# --------------------------------------------------------------------------- the conversation


@dataclass(frozen=True)
class Step:
    k: int
    user: str
    assistant: str
    query: str
    result: str

    @property
    def call_id(self) -> str:
        return f"call_{self.k}"


def _text(rng: random.Random, low: int = 900, high: int = 1100) -> str:
    target = rng.randint(low, high)
    text = " ".join(rng.choices(WORDS, k=high // 3))
    return text[:target].rstrip() + "."


def steps(count: int, seed: int = SEED) -> Any:
    """The conversation's first `count` steps; the same for every peer."""
    rng = random.Random(seed)
    for k in range(count):
        yield Step(k, _text(rng), _text(rng), " ".join(rng.choices(WORDS, k=6)), _text(rng))


# --------------------------------------------------------------------------- measuring

def time_resume(call: Callable[[], tuple[int, Any]], calls: int) -> dict[str, Any]:
    """First call, then 5 warm-ups, then `calls` timed calls; `call` times itself (ns)."""
    first_ns, out = call()
    for _ in range(5):
        call()
    walls = sorted(call()[0] / 1e6 for _ in range(calls))
    return {
        "first_ms": first_ns / 1e6, "median_ms": statistics.median(walls),
        "p95_ms": walls[int(0.95 * (len(walls) - 1))], "min_ms": walls[0], "calls": calls,
        "returned": len(out),
    }  # fmt: skip


def cold_resume(make: Callable[[], Any], samples: int = 3, budget_s: float = 2.0) -> dict[str, Any]:
    """Open the peer afresh on the same files and make its first resume call; up to `samples` times.

    The OS page cache is warm: this is a process restart, not a cold disk. Stops after one
    sample if that one took longer than `budget_s`.
    """
    walls: list[float] = []
    calls: list[float] = []
    for _ in range(samples):
        t = time.perf_counter_ns()
        peer = make()
        ns, _out = next(iter(peer.resumes.values()))()
        walls.append((time.perf_counter_ns() - t) / 1e6)
        calls.append(ns / 1e6)
        peer.close()
        if walls[-1] > budget_s * 1000:
            break
    return {"open_and_first_ms": statistics.median(walls), "first_call_ms": statistics.median(calls),
            "samples": len(walls)}  # fmt: skip


_COLD_CHILD = r"""
import json, sys, time
started = time.perf_counter()
import convgraph
from convgraph import Config, Replica
imported = time.perf_counter()
replica = Replica.open(sys.argv[1], synchronous=sys.argv[3], config=Config(legacy_writes=True))
opened = time.perf_counter()
out = convgraph.resume(replica, sys.argv[2], provider="anthropic", last=int(sys.argv[4]))
done = time.perf_counter()
replica.close()
with open("/proc/self/status", encoding="ascii") as f:
    hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
print(json.dumps({"import_ms": (imported - started) * 1e3, "open_ms": (opened - imported) * 1e3,
                  "first_ms": (done - opened) * 1e3, "open_and_first_ms": (done - imported) * 1e3,
                  "hwm_kib": hwm, "returned": len(out)}))
"""


def cold_process(home: Path, synchronous: str, samples: int = 3) -> dict[str, Any]:
    """A fresh process (same interpreter, same convgraph) opens `home` and makes its first
    `resume(last=LAST)`; medians of `samples`, and the largest peak RSS."""
    runs = []
    for _ in range(samples):
        proc = subprocess.run(
            [sys.executable, "-c", _COLD_CHILD, str(home), CONV, synchronous, str(LAST)],
            capture_output=True, text=True, check=True, timeout=600,
        )
        runs.append(json.loads(proc.stdout))
    out: dict[str, Any] = {k: statistics.median(r[k] for r in runs)
                           for k in ("import_ms", "open_ms", "first_ms", "open_and_first_ms")}
    peak = max(r["hwm_kib"] for r in runs)
    return {**out, "hwm_kib": peak, "returned": runs[0]["returned"], "samples": samples}


def timed(fn: Callable[[], Any]) -> Callable[[], tuple[int, Any]]:
    def call() -> tuple[int, Any]:
        t = time.perf_counter_ns()
        out = fn()
        return time.perf_counter_ns() - t, out

    return call


def checkpoint_and_size(db: Path) -> dict[str, Any]:
    """Move the WAL into the database (from a separate connection), then size db + -wal + -shm."""
    con = sqlite3.connect(f"file:{db}?mode=rw", uri=True, timeout=30)
    try:
        busy, log, moved = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        con.close()
    files = {p.name: p.stat().st_size for p in db.parent.glob(db.name + "*")}
    return {"bytes": sum(files.values()), "files": files, "checkpoint": [busy, log, moved]}


# --------------------------------------------------------------------------- the peers (child side)


class LangGraphPeer:
    """`StateGraph(MessagesState)` + `SqliteSaver`; one `invoke` a step, as its users run it."""

    name = "LangGraph SqliteSaver"
    slow = True

    def __init__(self, home: Path, variant: str) -> None:
        from langchain_core.messages import (
            AIMessage,
            HumanMessage,
            ToolMessage,
            convert_to_openai_messages,
        )
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, MessagesState, StateGraph

        self.db = home / "langgraph.sqlite"
        self.durability: Any = "exit" if "durability=exit" in variant else None  # None: the default, "async"
        self.conn = sqlite3.connect(self.db, check_same_thread=False)
        self.HumanMessage = HumanMessage
        self.current: Step | None = None

        def agent(_state: MessagesState) -> dict[str, Any]:
            step = self.current
            assert step is not None
            call = {"id": step.call_id, "name": "lookup", "args": {"q": step.query}}
            return {"messages": [
                AIMessage(content=step.assistant, tool_calls=[call]),
                ToolMessage(content=step.result, tool_call_id=step.call_id),
            ]}  # fmt: skip

        builder = StateGraph(MessagesState)
        builder.add_node("agent", agent)
        builder.add_edge(START, "agent")
        builder.add_edge("agent", END)
        self.graph = builder.compile(checkpointer=SqliteSaver(self.conn))
        self.config: Any = {"configurable": {"thread_id": CONV}}

        def resume() -> list[dict[str, Any]]:
            messages = self.graph.get_state(self.config).values["messages"][-LAST:]
            return convert_to_openai_messages(messages)  # type: ignore[no-any-return]

        self.resumes = {"get_state + convert": timed(resume)}

    def info(self) -> dict[str, Any]:
        row = self.conn.execute("PRAGMA synchronous").fetchone()
        counts = {
            t: self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("checkpoints", "writes")
        }
        return {"synchronous": {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[row[0]], "rows": counts}

    def prepare(self, step: Step) -> Any:
        return step, {"messages": [self.HumanMessage(content=step.user)]}

    def append(self, prepared: Any) -> int:
        self.current, graph_input = prepared
        t = time.perf_counter_ns()
        self.graph.invoke(graph_input, config=self.config, durability=self.durability)
        return time.perf_counter_ns() - t

    def close(self) -> None:
        self.conn.close()


class AgentsPeer:
    """OpenAI Agents SDK `SQLiteSession` on a file; one `add_items` of a turn's items a step."""

    name = "OpenAI Agents SQLiteSession"
    slow = False

    def __init__(self, home: Path, _variant: str) -> None:
        from agents import ItemHelpers, SQLiteSession
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )

        self.db = home / "agents.sqlite"
        self.session = SQLiteSession(CONV, self.db)
        self.loop = asyncio.new_event_loop()
        self.helpers = ItemHelpers
        self.types = (ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText)

        async def get(limit: int) -> tuple[int, Any]:
            t = time.perf_counter_ns()
            items = await self.session.get_items(limit=limit)
            return time.perf_counter_ns() - t, items

        self.resumes = {
            f"get_items({LAST})": lambda: self.loop.run_until_complete(get(LAST)),
            f"get_items({SAME_WINDOW_ITEMS}) ≈200 msgs": lambda: self.loop.run_until_complete(
                get(SAME_WINDOW_ITEMS)
            ),
        }

    def info(self) -> dict[str, Any]:
        con = sqlite3.connect(self.db)
        try:
            sync = con.execute("PRAGMA synchronous").fetchone()[0]
        finally:
            con.close()
        return {"synchronous": {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[sync] + " (connection default)"}

    def prepare(self, step: Step) -> list[Any]:
        """The items the runner saves for this turn, as `to_input_item` dumps them."""
        call_t, message_t, text_t = self.types
        message = message_t(
            id=f"msg_{step.k}", role="assistant", status="completed", type="message",
            content=[text_t(annotations=[], text=step.assistant, type="output_text")],
        )  # fmt: skip
        call = call_t(
            id=f"fc_{step.k}", call_id=step.call_id, name="lookup", type="function_call", status="completed",
            arguments=json.dumps({"q": step.query}),
        )  # fmt: skip
        return [
            *self.helpers.input_to_new_input_list(step.user),
            message.model_dump(exclude_unset=True),
            call.model_dump(exclude_unset=True),
            self.helpers.tool_call_output_item(call, step.result),
        ]

    def append(self, prepared: Any) -> int:
        async def add() -> int:
            t = time.perf_counter_ns()
            await self.session.add_items(prepared)
            return time.perf_counter_ns() - t

        return self.loop.run_until_complete(add())

    def close(self) -> None:
        self.session.close()
        self.loop.close()


class ConvgraphPeer:
    """convgraph `Replica`: one `write_many` of the step's drafts (or one `write` per message)."""

    name = "convgraph"
    slow = False

    def __init__(self, home: Path, variant: str) -> None:
        import convgraph
        from convgraph import Config, Draft, Replica

        self.variant = variant
        self.synchronous = "FULL" if "FULL" in variant else "NORMAL"
        self.steps, self.marks = 0, []
        # a legacy conversation: the version-1 write path the recorded figures measure
        self.replica = Replica.open(home / "replica", synchronous=self.synchronous,
                                    config=Config(legacy_writes=True))
        self.db = home / "replica" / "replica.sqlite"
        self.Draft = Draft
        self.each = variant.startswith("write ")
        replica = self.replica
        resume = getattr(convgraph, "resume", None)
        self.fallback = resume is None
        if resume is None:
            self.resumes = {
                "records(last=600) [no resume: fallback]": timed(lambda: replica.records(CONV, last=600)),
                "records(last=200) [fallback]": timed(lambda: replica.records(CONV, last=LAST)),
            }
        else:
            self.resumes = {
                f"resume {p}": timed(lambda p=p: resume(replica, CONV, provider=p, last=LAST))
                for p in ("anthropic", "openai")
            }

    def info(self) -> dict[str, Any]:
        return {"synchronous": self.synchronous, "resume_fallback": self.fallback}

    def cold_process(self) -> dict[str, Any]:
        return cold_process(self.db.parent, self.synchronous)

    def prepare(self, step: Step) -> list[Any]:
        call = {"id": step.call_id, "name": "lookup", "input": {"q": step.query}}
        return [
            self.Draft("user_message", {"conversation_id": CONV, "role": "user", "content": step.user}),
            self.Draft("agent_message", {
                "conversation_id": CONV, "role": "assistant", "content": step.assistant, "tool_calls": [call],
            }),
            self.Draft("tool_result", {
                "conversation_id": CONV, "role": "tool", "tool_use_id": step.call_id, "content": step.result,
            }),
        ]  # fmt: skip

    def append(self, prepared: Any) -> int:
        r = self.replica
        if self.each:
            t = time.perf_counter_ns()
            for d in prepared:
                r.write(CONV, d.kind, d.payload)
            return time.perf_counter_ns() - t
        t = time.perf_counter_ns()
        out = r.write_many(CONV, prepared)
        elapsed = time.perf_counter_ns() - t
        self.steps += 1
        if self.steps % 100 == 1:  # a few positions in the history, for late records to name
            self.marks.append((out[0].cid, out[0].hlc))
        return elapsed

    def late_ingest(self, count: int = 100) -> dict[str, Any]:
        """Another device's records, concurrent with the middle of the history, arriving now one
        per ingest: each lands mid-line in canonical order (ms per record, median and p95)."""
        from convgraph import SigningKey
        from convgraph.core.hlc import Hlc
        from convgraph.core.record import sign_record

        cid, hlc = self.marks[len(self.marks) // 2]
        key, parents, made = SigningKey.generate(), [cid], []
        for i in range(1, count + 1):
            payload = {"conversation_id": CONV, "role": "user", "content": f"late {i}"}
            stamp = Hlc(hlc.wall_ms, hlc.counter + i)  # after its parents, long before the heads
            record = sign_record(key, conv=CONV, seq=i, hlc=stamp, parents=parents, kind="user_message",
                                 payload=payload)
            made.append(record)
            parents = [record.cid]
        walls = []
        for record in made:
            t = time.perf_counter_ns()
            report = self.replica.ingest([record.data])
            walls.append((time.perf_counter_ns() - t) / 1e6)
            if report.accepted != [record.cid]:
                raise RuntimeError(f"a late record was not accepted: {report}")
        walls.sort()
        return {"median_ms": statistics.median(walls), "p95_ms": walls[int(0.95 * (len(walls) - 1))],
                "records": count}

    def close(self) -> None:
        self.replica.close()


class SaverPeer:
    """One small LangGraph graph on either checkpointer: `StateGraph(MessagesState)` whose one
    node appends a fixed assistant message (no LLM); a step is one `invoke` with the step's
    user message, so 2 messages a step. Variant `SqliteSaver` or `ConvgraphSaver` (on a
    replica's SQLite file): the same graph and input, only the checkpointer differs."""

    slow = True

    def __init__(self, home: Path, variant: str) -> None:
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.graph import END, START, MessagesState, StateGraph

        self.HumanMessage = HumanMessage
        self.variant = variant
        self.name = f"LangGraph graph on {variant}"
        self.conn: sqlite3.Connection | None = None
        self.replica: Any = None
        if variant == "ConvgraphSaver":
            from convgraph import Replica
            from convgraph.integrations.langgraph import ConvgraphSaver

            self.replica = Replica.open(home / "replica")
            self.db = home / "replica" / "replica.sqlite"
            saver: Any = ConvgraphSaver(self.replica)
        else:
            from langgraph.checkpoint.sqlite import SqliteSaver

            self.db = home / "langgraph.sqlite"
            self.conn = sqlite3.connect(self.db, check_same_thread=False)
            saver = SqliteSaver(self.conn)

        def reply(_state: MessagesState) -> dict[str, Any]:
            return {"messages": [AIMessage(content="Noted; carrying on.")]}

        builder = StateGraph(MessagesState)
        builder.add_node("reply", reply)
        builder.add_edge(START, "reply")
        builder.add_edge("reply", END)
        self.graph = builder.compile(checkpointer=saver)
        self.config: Any = {"configurable": {"thread_id": CONV}}
        self.resumes = {
            "get_state, last 200": timed(lambda: self.graph.get_state(self.config).values["messages"][-LAST:])
        }

    def info(self) -> dict[str, Any]:
        if self.replica is not None:
            return {"records": sum(1 for _ in self.replica.store.iter_all())}
        assert self.conn is not None
        tables = ("checkpoints", "writes")
        return {t: self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}

    def prepare(self, step: Step) -> Any:
        return {"messages": [self.HumanMessage(content=step.user)]}

    def append(self, prepared: Any) -> int:
        t = time.perf_counter_ns()
        self.graph.invoke(prepared, config=self.config)
        return time.perf_counter_ns() - t

    def close(self) -> None:
        if self.replica is not None:
            self.replica.close()
        if self.conn is not None:
            self.conn.close()


PEERS: dict[str, Any] = {
    "langgraph": LangGraphPeer, "agents": AgentsPeer, "convgraph": ConvgraphPeer, "saver": SaverPeer,
}


def summarize(times_ns: Sequence[int], n: int) -> dict[str, float]:
    tail = times_ns[n - max(1, n // 10) : n]
    return {
        "append_last10_mean_ms": statistics.fmean(tail) / 1e6,
        "append_last10_median_ms": statistics.median(tail) / 1e6,
        "append_mean_ms": statistics.fmean(times_ns[:n]) / 1e6,
        "append_total_s": sum(times_ns[:n]) / 1e9,
    }


def curve(times_ns: Sequence[int], buckets: int = 50) -> list[list[float]]:
    """(steps done, mean ms/step over the bucket) for `buckets` equal slices of the run."""
    n = len(times_ns)
    width = max(1, n // buckets)
    return [
        [min(lo + width, n), statistics.fmean(times_ns[lo : lo + width]) / 1e6] for lo in range(0, n, width)
    ]


def worker(peer: str, variant: str, milestones: Sequence[int], home: str, calls: int, report: Any) -> None:
    """Grow one conversation to `milestones[-1]` steps, measuring at each milestone."""
    try:
        where = Path(home)
        where.mkdir(parents=True, exist_ok=True)
        p = PEERS[peer](where, variant)
        total = milestones[-1]
        every = max(1, total // 400)
        times: list[int] = []
        results: list[dict[str, Any]] = []
        started = time.perf_counter()
        for step in steps(total):
            times.append(p.append(p.prepare(step)))
            done = step.k + 1
            if done % every == 0:
                report.put(("progress", done, times[-1] / 1e6))
            if done in milestones:
                report.put(("note", done, "sizing and timing resume"))
                at: dict[str, Any] = {"n": done, **summarize(times, done), **checkpoint_and_size(p.db)}
                at["bytes_per_step"] = at["bytes"] / done
                at["resume"] = {name: time_resume(call, calls) for name, call in p.resumes.items()}
                report.put(("note", done, "reopening for a cold resume"))
                at["cold"] = cold_resume(lambda: PEERS[peer](where, variant))
                if hasattr(p, "cold_process"):
                    report.put(("note", done, "a fresh process for a cold resume"))
                    at["cold_process"] = p.cold_process()
                if getattr(p, "marks", None) and "long run" in variant:
                    report.put(("note", done, "late concurrent records"))
                    at["late_ingest"] = p.late_ingest()
                results.append(at)
        wall = time.perf_counter() - started
        info = p.info()
        p.close()
        report.put(("result", {
            "peer": peer, "name": p.name, "variant": variant, "milestones": results, "info": info,
            "wall_s": wall, "curve": curve(times), "hwm_kib": status_kib("VmHWM"),
        }))  # fmt: skip
    except BaseException:
        report.put(("error", traceback.format_exc()))
        raise


# --------------------------------------------------------------------------- orchestration (parent side)


@dataclass
class Run:
    peer: str
    variant: str
    milestones: tuple[int, ...]
    calls: int
    label: str
    result: dict[str, Any] = field(default_factory=dict)


def run_child(progress: Progress, run: Run, home: Path) -> None:
    """One run in a fresh spawned process; the parent only relays progress."""
    ctx = mp.get_context("spawn")
    report = ctx.Queue()
    total = run.milestones[-1]
    task = progress.add_task(f"{run.label} → {total:,} steps", total=total)
    busy, cpu = machine_busy_s(), own_cpu_s()
    start = time.perf_counter()
    proc = ctx.Process(
        target=worker, args=(run.peer, run.variant, run.milestones, str(home), run.calls, report)
    )
    proc.start()
    while not run.result:
        try:
            msg = report.get(timeout=1.0)
        except queue.Empty:
            if not proc.is_alive():
                raise RuntimeError(f"{run.label}: worker died (exit {proc.exitcode})") from None
            continue
        what = msg[0]
        if what == "progress":
            progress.update(
                task, completed=msg[1], description=f"{run.label} → {total:,} [{msg[2]:.2f} ms/step]"
            )
        elif what == "note":
            progress.update(task, completed=msg[1], description=f"{run.label} → {total:,} [{msg[2]}]")
        elif what == "result":
            run.result.update(msg[1])
        else:
            raise RuntimeError(f"{run.label}: worker failed:\n{msg[1]}")
    proc.join()
    wall = time.perf_counter() - start
    cpu = own_cpu_s() - cpu
    progress.update(task, completed=total, description=f"{run.label} → {total:,} steps")
    run.result["child_wall_s"] = wall
    run.result["others"] = max(0.0, (machine_busy_s() - busy - cpu) / wall)
    shutil.rmtree(home, ignore_errors=True)


def plan(sizes: Sizes, langgraph_max: int | None, langgraph_exit: bool = False) -> list[Run]:
    side = sizes.side
    lg = tuple(n for n in side if langgraph_max is None or n <= langgraph_max) or side[:1]
    c, slow = sizes.calls, sizes.slow_calls
    return [
        Run("langgraph", "invoke per step", lg, slow, "LangGraph SqliteSaver, invoke/step"),
        *(
            [Run("langgraph", "invoke per step, durability=exit", lg, slow, "LangGraph invoke/step, exit")]
            if langgraph_exit
            else []
        ),
        Run("agents", "add_items per step", side, c, "Agents SQLiteSession, add_items/step"),
        Run("convgraph", "write_many per step", side, c, "convgraph write_many/step"),
        Run("convgraph", "write per message", side, c, "convgraph write x3/step"),
        Run("convgraph", "write_many per step, synchronous=FULL", side, c, "convgraph write_many/step, FULL"),
        Run("convgraph", "write_many per step (long run)", sizes.ours, c, "convgraph write_many/step, long"),
        Run("saver", "SqliteSaver", side, slow, "LangGraph graph on SqliteSaver, invoke/step (2 msgs)"),
        Run("saver", "ConvgraphSaver", side, slow, "LangGraph graph on ConvgraphSaver, invoke/step (2 msgs)"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    return on_snapshot(__file__, run, argv)


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="reduced sizes, for smoke-testing")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs, in seconds")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--tmp", type=Path, help="parent directory for the scratch stores (default: $TMPDIR)")
    parser.add_argument(
        "--no-snapshot", action="store_true", help="import src/ live instead of from a copy taken at start"
    )
    parser.add_argument(
        "--langgraph-max",
        type=int,
        help="stop LangGraph at the last side-by-side N not above this (default: all)",
    )
    parser.add_argument(
        "--langgraph-exit",
        action="store_true",
        help="also run LangGraph with invoke(durability='exit'): one checkpoint per invoke instead of three",
    )
    parser.add_argument(
        "--only",
        choices=sorted(PEERS),
        action="append",
        help="run only this peer (repeatable; for debugging)",
    )
    parser.add_argument(
        "--long",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        help="milestones of the long convgraph run, comma-separated (e.g. 1000,10000,100000)",
    )
    args = parser.parse_args(argv)
    sizes = SMOKE_SIZES if args.smoke else QUICK_SIZES if args.quick else FULL_SIZES
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.long:
        sizes = Sizes(sizes.side, tuple(sorted(args.long)), sizes.calls, sizes.slow_calls)
    console = Console(width=None if sys.stdout.isatty() else 180)
    env = environment(_DISTS)
    spec = importlib.util.find_spec("convgraph")
    where = Path(spec.origin).parent if spec and spec.origin else None
    env["convgraph_imported_from"] = str(where)
    env["convgraph_src_sha256"] = tree_digest(where) if where else "?"
    console.print(f"[bold]convgraph resume benchmark[/] ({mode}): {env}")
    console.print(f"sizes: {sizes}")
    runs = [
        r
        for r in plan(sizes, args.langgraph_max, args.langgraph_exit)
        if not args.only or r.peer in args.only
    ]
    tmp = Path(tempfile.mkdtemp(prefix="convgraph-bench-resume-", dir=args.tmp))
    started = time.perf_counter()
    try:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console) as progress:
            for i, r in enumerate(runs):
                run_child(progress, r, tmp / f"run-{i}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - started
    env["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    verdicts = render(console, runs, sizes)
    console.print(
        f"total time {elapsed:.0f} s; load average at start {env['loadavg_start']}, "
        f"at end {env['loadavg_end']}"
    )
    if args.json:
        doc = {
            "env": env, "quick": args.quick, "sizes": asdict(sizes), "elapsed_s": elapsed,
            "runs": [{"label": r.label, **r.result} for r in runs], "targets": verdicts,
        }  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


# --------------------------------------------------------------------------- report


def _find(runs: Sequence[Run], peer: str, variant: str) -> dict[str, Any] | None:
    for r in runs:
        if r.peer == peer and r.variant == variant and r.result:
            return r.result
    return None


def _at(result: dict[str, Any] | None, n: int) -> dict[str, Any] | None:
    if result is None:
        return None
    return next((m for m in result["milestones"] if m["n"] == n), None)


def _first_resume(m: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name = next(iter(m["resume"]))
    return name, m["resume"][name]


def render(console: Console, runs: Sequence[Run], sizes: Sizes) -> list[dict[str, Any]]:
    table = Table(title="Growing one conversation: append per step, store size, resume (ms)")
    heads = ("run", "N steps", "ms/step last 10%", "ms/step mean", "store MiB", "KiB/step", "resume call",
             "first", "warm median", "p95", "cold", "got")  # fmt: skip
    for col in heads:
        table.add_column(col, justify="left" if col in ("run", "resume call") else "right")
    for r in runs:
        res = r.result
        if not res:
            continue
        for j, m in enumerate(res["milestones"]):
            for i, (name, t) in enumerate(m["resume"].items()):
                lead = i == 0
                table.add_row(
                    r.label if lead and j == 0 else "", f"{m['n']:,}" if lead else "",
                    f"{m['append_last10_mean_ms']:.3f}" if lead else "",
                    f"{m['append_mean_ms']:.3f}" if lead else "",
                    f"{m['bytes'] / 2**20:,.1f}" if lead else "",
                    f"{m['bytes_per_step'] / 1024:,.2f}" if lead else "",
                    name, f"{t['first_ms']:.3f}", f"{t['median_ms']:.3f}", f"{t['p95_ms']:.3f}",
                    f"{m['cold']['open_and_first_ms']:.1f}" if lead else "", str(t["returned"]),
                    end_section=i == len(m["resume"]) - 1 and j == len(res["milestones"]) - 1,
                )  # fmt: skip
    console.print(table)
    console.print(
        "ms/step = one step (3 messages) over the last 10% of steps before N / over all N steps. "
        "store = db + -wal + -shm after PRAGMA wal_checkpoint(TRUNCATE). "
        "first = first resume call of the writing process; warm = median of timed calls after 5 warm-ups; "
        "cold = open the store afresh in the same process (warm OS cache) + first call, median of <= 3. "
        "got = dicts returned."
    )
    info = Table(title="Runs")
    for col in ("run", "wall s", "others", "peak RSS MiB", "details"):
        info.add_column(col)
    for r in runs:
        if r.result:
            res = r.result
            info.add_row(
                r.label, f"{res['child_wall_s']:.1f}", f"{res['others']:.2f}", f"{res['hwm_kib'] / 1024:.0f}",
                json.dumps(res["info"]),
            )  # fmt: skip
    console.print(info)
    console.print("others = cores busy with other processes on average during the run (from /proc/stat).")
    render_cold_processes(console, runs)

    verdicts = targets(runs, sizes)
    summary = Table(title="Targets")
    for col in ("target", "measured", ""):
        summary.add_column(col)
    for v in verdicts:
        summary.add_row(v["target"], v["value"], ok_mark(v["met"]))
    console.print(summary)
    return verdicts


def render_cold_processes(console: Console, runs: Sequence[Run]) -> None:
    table = Table(title="A fresh process: open the replica, first resume(last=200) (ms, median of 3)")
    for col in ("run", "N steps", "import", "open", "first resume", "open + first", "peak RSS MiB", "got"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for r in runs:
        shown = [m for m in r.result.get("milestones", []) if "cold_process" in m]
        for j, m in enumerate(shown):
            c = m["cold_process"]
            table.add_row(
                r.label if j == 0 else "", f"{m['n']:,}", f"{c['import_ms']:.0f}", f"{c['open_ms']:.1f}",
                f"{c['first_ms']:.1f}", f"{c['open_and_first_ms']:.1f}", f"{c['hwm_kib'] / 1024:.0f}",
                str(c["returned"]), end_section=j == len(shown) - 1,
            )  # fmt: skip
    console.print(table)
    console.print("import = `import convgraph` in that process, not in open + first; peak RSS = its VmHWM.")
    late = Table(title="Late concurrent records: another device's, concurrent with the middle of the history,"
                       " one per ingest (ms per record)")
    for col in ("run", "N steps", "median", "p95", "records"):
        late.add_column(col, justify="left" if col == "run" else "right")
    for r in runs:
        for m in r.result.get("milestones", []):
            if "late_ingest" in m:
                x = m["late_ingest"]
                late.add_row(r.label, f"{m['n']:,}", f"{x['median_ms']:.3f}", f"{x['p95_ms']:.3f}",
                             str(x["records"]))
    console.print(late)


def _cold_targets(long: dict[str, Any]) -> list[dict[str, Any]]:
    colds = [m for m in long["milestones"] if "cold_process" in m]
    if not colds:
        return []
    top, base = colds[-1], next((m for m in colds if m["n"] == 1000), None)
    c = top["cold_process"]
    out = [{
        "target": f"cold: fresh process, open + first resume(last=200) at {top['n']:,} steps < 50 ms",
        "value": f"{c['open_and_first_ms']:.1f} ms (open {c['open_ms']:.1f}, resume {c['first_ms']:.1f})",
        "met": c["open_and_first_ms"] < 50,
    }, {
        "target": f"peak RSS of that process at {top['n']:,} steps < 100 MiB",
        "value": f"{c['hwm_kib'] / 1024:.0f} MiB",
        "met": c["hwm_kib"] < 100 * 1024,
    }]  # fmt: skip
    lates = [m for m in long["milestones"] if "late_ingest" in m]
    if len(lates) > 1:
        first, last = lates[0]["late_ingest"], lates[-1]["late_ingest"]
        ratio = last["median_ms"] / first["median_ms"]
        out.append({
            "target": f"late concurrent record ingested at {lates[-1]['n']:,} steps within 1.5x of at "
                      f"{lates[0]['n']:,} (O(log n), not O(n))",
            "value": f"{last['median_ms']:.3f} vs {first['median_ms']:.3f} ms = {ratio:.2f}x",
            "met": ratio <= 1.5,
        })  # fmt: skip
    if base is not None and base is not top:
        ratio = c["open_and_first_ms"] / base["cold_process"]["open_and_first_ms"]
        out.append({
            "target": f"cold at {top['n']:,} within 1.5x of cold at 1,000",
            "value": f"{c['open_and_first_ms']:.1f} vs {base['cold_process']['open_and_first_ms']:.1f} ms"
                     f" = {ratio:.2f}x",
            "met": ratio <= 1.5,
        })  # fmt: skip
    return out


def _warm_vs_agents(runs: Sequence[Run], long: dict[str, Any]) -> list[dict[str, Any]]:
    agents = _find(runs, "agents", "add_items per step")
    if agents is None:
        return []
    top, theirs = long["milestones"][-1], agents["milestones"][-1]
    name, t = _first_resume(top)
    other = theirs["resume"][f"get_items({LAST})"]
    ratio = t["median_ms"] / other["median_ms"]
    return [{
        "target": f"convgraph {name} (last=200) at {top['n']:,} steps, warm, <= 1.0x Agents "
                  f"get_items({LAST}) at {theirs['n']:,}",
        "value": f"{t['median_ms']:.3f} vs {other['median_ms']:.3f} ms = {ratio:.2f}x",
        "met": ratio <= 1.0,
    }]  # fmt: skip


def targets(runs: Sequence[Run], sizes: Sizes) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    long = _find(runs, "convgraph", "write_many per step (long run)")
    if long is not None:
        out += _cold_targets(long) + _warm_vs_agents(runs, long)
    base_n = 250
    if long is not None and _at(long, base_n) is not None:
        base, top = _at(long, base_n), long["milestones"][-1]
        assert base is not None
        ratio = top["append_last10_mean_ms"] / base["append_last10_mean_ms"]
        out.append({
            "target": f"convgraph append per step flat: at {top['n']:,} within 1.5x of at {base_n}",
            "value": (
                f"{top['append_last10_mean_ms']:.3f} vs {base['append_last10_mean_ms']:.3f} ms = {ratio:.2f}x"
                f" (medians {top['append_last10_median_ms']:.3f} vs {base['append_last10_median_ms']:.3f})"
            ),
            "met": ratio <= 1.5,
        })  # fmt: skip
        ratio = top["bytes_per_step"] / base["bytes_per_step"]
        out.append({
            "target": f"convgraph bytes per step flat: at {top['n']:,} within 1.25x of at {base_n}",
            "value": (
                f"{top['bytes_per_step'] / 1024:.2f} vs {base['bytes_per_step'] / 1024:.2f} KiB"
                f" = {ratio:.2f}x"
            ),
            "met": ratio <= 1.25,
        })  # fmt: skip
        name, t = _first_resume(top)
        out.append({
            "target": f"convgraph {name} (last=200) at {top['n']:,} steps: warm median < 3 ms",
            "value": f"{t['median_ms']:.3f} ms (p95 {t['p95_ms']:.3f})",
            "met": t["median_ms"] < 3.0,
        })  # fmt: skip
    ours = _find(runs, "convgraph", "write_many per step")
    lg = _find(runs, "langgraph", "invoke per step")
    if ours is not None and lg is not None:
        n = min(sizes.side[-1], lg["milestones"][-1]["n"])
        a, b = _at(ours, n), _at(lg, n)
        if a is not None and b is not None:
            name, t = _first_resume(a)
            _, u = _first_resume(b)
            speedup = u["median_ms"] / t["median_ms"]
            out.append({
                "target": f"convgraph {name} (last=200) >= 20x faster than LangGraph get_state at N={n:,}",
                "value": f"{t['median_ms']:.3f} vs {u['median_ms']:.1f} ms = {speedup:,.0f}x",
                "met": speedup >= 20,
            })  # fmt: skip
    return out


if __name__ == "__main__":
    sys.exit(main())
