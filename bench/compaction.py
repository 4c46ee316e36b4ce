"""What compacting a LangGraph thread frees on disk, and that it still reads back whole.

Run from the project root:

    .venv/bin/python bench/compaction.py            # a 200-step thread (~1 minute)
    .venv/bin/python bench/compaction.py --quick    # 20 steps: a smoke test
    .venv/bin/python bench/compaction.py --steps 500

A step is one `invoke` of a tool-using graph (the user's message, an assistant tool call, the
tool's result, the assistant's answer: four messages of ~300 characters of seeded text, five
LangGraph checkpoints). The thread is written through `ConvgraphSaver` into a replica's SQLite
file, and the file is measured (the replica closed, so the WAL is folded in):

* **written**: as the saver left it;
* **written + VACUUM**: the same file vacuumed (what VACUUM alone gives);
* **compacted**: after `saver.compact(thread)` (`Replica.checkpoint(conv, compact=True)`);
* **compacted + VACUUM**: that file vacuumed: what compaction frees.

SQLite keeps freed pages in the file until VACUUM, so the compacted file only shrinks after
it. The same steps through LangGraph's own `SqliteSaver` (vacuumed) are shown beside. Each
read is checked: after compaction (and vacuum) the thread's state and its history read back
equal to before, and one more step goes on from there.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from convgraph import Replica
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.replica.home import DB_FILE

WORDS = ["the", "a", "of", "to", "and", "in", "is", "that", "for", "it", "with", "as", "on", "this", "file",
         "code", "function", "test", "error", "result", "call", "tool", "patch", "review", "value", "return",
         "python", "module", "import", "class", "method", "string", "list", "record"]
THREAD = {"configurable": {"thread_id": "bench"}}
Graph = CompiledStateGraph[Any, Any, Any, Any]


def text(rng: random.Random, chars: int = 300) -> str:
    words: list[str] = []
    while sum(map(len, words)) + len(words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def graph(saver: BaseCheckpointSaver[Any], seed: int) -> Graph:
    """An agent that calls `lookup` once per user message, then answers; seeded text."""
    rng = random.Random(seed)

    def agent(state: MessagesState) -> dict[str, Any]:
        messages: list[AnyMessage] = state["messages"]
        n = len(messages)
        if isinstance(messages[-1], HumanMessage):
            call = {"id": f"call-{n}", "name": "lookup", "args": {"q": text(rng, 60)}}
            return {"messages": [AIMessage(text(rng), id=f"ai-{n}", tool_calls=[call])]}
        return {"messages": [AIMessage(text(rng), id=f"ai-{n}")]}

    def tools(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {"messages": [ToolMessage(text(rng), tool_call_id=c["id"], id=f"tool-{c['id']}")
                             for c in last.tool_calls]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def run(g: Graph, steps: int, seed: int, start: int = 0) -> None:
    rng = random.Random(seed + 1)
    for i in range(start, start + steps):
        g.invoke({"messages": [HumanMessage(text(rng), id=f"h-{i}")]}, THREAD)


def reads(g: Graph) -> tuple[Any, list[Any]]:
    state = g.get_state(THREAD)
    history = [(s.values, s.config, s.metadata, s.parent_config) for s in g.get_state_history(THREAD)]
    return state.values, history


def vacuum(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("VACUUM")
    db.close()


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def ours(home: Path, steps: int, seed: int) -> dict[str, Any]:
    db = home / DB_FILE
    with Replica.open(home) as replica:
        g = graph(ConvgraphSaver(replica), seed)
        run(g, steps, seed)
        before = reads(g)
    figures: dict[str, Any] = {"messages": len(before[0]["messages"]), "checkpoints": len(before[1]),
                               "written": size(db)}
    copy = home.parent / "vacuumed.sqlite"
    copy.write_bytes(db.read_bytes())
    vacuum(copy)
    figures["written + VACUUM"] = size(copy)
    with Replica.open(home) as replica:
        saver = ConvgraphSaver(replica)
        saver.compact("bench")
        compacted = saver.compacted("bench")
        assert compacted is not None
        figures["compacted records"] = compacted.records
        conv = saver.conversation("bench")
        held = None if conv is None else replica.store.snapshot(conv)
        assert held is not None
        figures["snapshot"] = len(held[1])
        assert reads(graph(saver, seed)) == before, "the compacted thread reads back otherwise"
    figures["compacted"] = size(db)
    vacuum(db)
    figures["compacted + VACUUM"] = size(db)
    with Replica.open(home) as replica:
        g = graph(ConvgraphSaver(replica), seed)
        assert reads(g) == before, "the vacuumed thread reads back otherwise"
        run(g, 1, seed + 7, start=steps)  # and goes on
        assert len(g.get_state(THREAD).values["messages"]) == len(before[0]["messages"]) + 4
        assert replica.verify().ok
    return figures


def theirs(path: Path, steps: int, seed: int) -> int:
    with SqliteSaver.from_conn_string(str(path)) as saver:
        run(graph(saver, seed), steps, seed)
    vacuum(path)
    return size(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="20 steps: a smoke test")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    steps = 20 if args.quick else args.steps
    with tempfile.TemporaryDirectory() as tmp:
        figures = ours(Path(tmp) / "home", steps, args.seed)
        figures["SqliteSaver + VACUUM"] = theirs(Path(tmp) / "sqlitesaver.sqlite", steps, args.seed)
    figures["steps"] = steps
    print(f"{steps} steps: {figures['messages']} messages, {figures['checkpoints']} checkpoints, "
          f"{figures['compacted records']} records compacted")
    for key in ("written", "written + VACUUM", "compacted", "compacted + VACUUM", "snapshot",
                "SqliteSaver + VACUUM"):
        print(f"  {key:<22} {figures[key] / 1024:>10.1f} KiB")
    freed = figures["written + VACUUM"] - figures["compacted + VACUUM"]
    share = freed / figures["written + VACUUM"]
    print(f"  compaction frees {freed / 1024:.1f} KiB ({share:.0%}) after VACUUM")
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
