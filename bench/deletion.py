"""What deleting a LangGraph thread frees on disk: `SqliteSaver` and `ConvgraphSaver` side by side.

Run from the project root:

    .venv/bin/python bench/deletion.py             # a 100-step thread (~1 minute)
    .venv/bin/python bench/deletion.py --quick     # 10 steps: a smoke test
    .venv/bin/python bench/deletion.py --steps 300 --out bench/results-deletion.json

A step is one `invoke` of `StateGraph(MessagesState)` with one node that appends an assistant
message to the user's (two messages of ~300 characters of seeded text a step). Each saver
writes one thread into its own SQLite file, which is measured on disk (the file and its WAL,
the WAL folded in by `PRAGMA wal_checkpoint(TRUNCATE)` from a second connection first):

* **built**: after the steps;
* **pruned**: after `prune([thread], strategy="keep_latest")` (`SqliteSaver` has no prune);
* **deleted**: after `delete_thread(thread)`;
* **vacuumed**: after `VACUUM` (`SqliteSaver`'s connection) or `replica.vacuum()`.

`ConvgraphSaver` runs twice: on a store made by this version (`auto_vacuum = INCREMENTAL`, so
`delete_thread` shrinks the file at once) and on one made before it (no auto-vacuum: the space
comes back only with `vacuum()`). Then a replica holding two threads deletes one: the other
must read back as before, the replica verify and the thread index match its records.
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

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from convgraph import Replica
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.replica.home import DB_FILE

WORDS = ["the", "a", "of", "to", "and", "in", "is", "that", "for", "it", "with", "as", "on", "this", "file",
         "code", "function", "test", "error", "result", "call", "tool", "patch", "review", "value", "return"]
Graph = CompiledStateGraph[Any, Any, Any, Any]
STAGES = ("built", "pruned", "deleted", "vacuumed")


def text(rng: random.Random, chars: int = 300) -> str:
    words: list[str] = []
    while sum(map(len, words)) + len(words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def graph(saver: BaseCheckpointSaver[Any], seed: int) -> Graph:
    rng = random.Random(seed)

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(text(rng), id=f"ai-{len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def run(g: Graph, thread: str, steps: int, seed: int) -> None:
    rng = random.Random(seed + 1)
    for i in range(steps):
        g.invoke({"messages": [HumanMessage(text(rng), id=f"h-{i}")]}, config(thread))


def on_disk(db: Path) -> int:
    """The file and its WAL (the shared-memory index holds no data), the WAL folded in first:
    what the data takes, not how far SQLite's automatic checkpoint happens to be."""
    with sqlite3.connect(db) as other:
        other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    other.close()
    wal = Path(f"{db}-wal")
    return db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def theirs(path: Path, steps: int, seed: int) -> dict[str, int | None]:
    figures: dict[str, int | None] = {}
    with SqliteSaver.from_conn_string(str(path)) as saver:
        run(graph(saver, seed), "bench", steps, seed)
        figures["built"] = on_disk(path)
        figures["pruned"] = None  # SqliteSaver.prune is the base class's: NotImplementedError
        saver.delete_thread("bench")
        figures["deleted"] = on_disk(path)
        saver.conn.execute("VACUUM")
        figures["vacuumed"] = on_disk(path)
    return figures


def older_store(home: Path) -> None:
    """A replica whose store has no auto-vacuum, as every store made before this version."""
    Replica.open(home).close()
    with sqlite3.connect(home / DB_FILE) as db:
        db.execute("PRAGMA auto_vacuum = NONE")
        db.execute("VACUUM")
    db.close()


def ours(home: Path, steps: int, seed: int, *, older: bool) -> dict[str, int | None]:
    if older:
        older_store(home)
    db = home / DB_FILE
    figures: dict[str, int | None] = {}
    with Replica.open(home) as replica:
        saver = ConvgraphSaver(replica)
        g = graph(saver, seed)
        run(g, "bench", steps, seed)
        figures["built"] = on_disk(db)
        saver.prune(["bench"], strategy="keep_latest")
        assert len(list(saver.list(config("bench")))) == 1
        figures["pruned"] = on_disk(db)
        saver.delete_thread("bench")
        assert g.get_state(config("bench")).values == {}
        assert replica.conversations() == []
        figures["deleted"] = on_disk(db)
        replica.vacuum()
        figures["vacuumed"] = on_disk(db)
        assert replica.verify().ok
        assert saver.check_index() == []
    return figures


def two_threads(home: Path, steps: int, seed: int) -> dict[str, Any]:
    db = home / DB_FILE
    with Replica.open(home) as replica:
        saver = ConvgraphSaver(replica)
        g = graph(saver, seed)
        run(g, "gone", steps, seed)
        run(g, "kept", steps, seed + 9)
        kept = g.get_state(config("kept")).values
        history = len(list(g.get_state_history(config("kept"))))
        before = on_disk(db)
        saver.delete_thread("gone")
        after = on_disk(db)
        assert g.get_state(config("kept")).values == kept, "the other thread reads back otherwise"
        assert len(list(g.get_state_history(config("kept")))) == history
        assert g.get_state(config("gone")).values == {}
        report = replica.verify()
        assert report.ok
        assert saver.check_index() == []
        assert [t.thread_id for t in saver.threads()] == ["kept"]
        run(g, "gone", 1, seed + 3)  # the thread id used again: a new generation, alone
        assert len(g.get_state(config("gone")).values["messages"]) == 2
    return {"two threads": before, "one deleted": after, "records verified": report.checked}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="10 steps: a smoke test")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    steps = 10 if args.quick else args.steps
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        figures: dict[str, Any] = {
            "steps": steps,
            "SqliteSaver": theirs(base / "sqlitesaver.sqlite", steps, args.seed),
            "ConvgraphSaver": ours(base / "new", steps, args.seed, older=False),
            "ConvgraphSaver, store made before": ours(base / "old", steps, args.seed, older=True),
            "two threads": two_threads(base / "two", steps, args.seed),
        }
    print(f"{steps} steps, one thread ({2 * steps} messages); file + WAL on disk (WAL folded in), KiB")
    columns = ("SqliteSaver", "ConvgraphSaver", "ConvgraphSaver, store made before")
    print(f"  {'':<10}" + "".join(f"{c:>36}" for c in columns))
    for stage in STAGES:
        cells = [figures[c][stage] for c in columns]
        print(f"  {stage:<10}" + "".join(f"{'n/a' if v is None else f'{v / 1024:,.1f}':>36}" for v in cells))
    two = figures["two threads"]
    print(f"two threads: {two['two threads'] / 1024:,.1f} KiB; one deleted: "
          f"{two['one deleted'] / 1024:,.1f} KiB; the other reads back equal, "
          f"{two['records verified']} records verified")
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
