"""Per-write latency: one record appended to one of many conversations, plain PostgreSQL beside Citus.

Each target gets a fresh schema and a `PostgresStore`; every write is one `Store.commit` of
one signed record (the append path of a server's ingest, without HTTP), round-robin over
`--conversations` conversations, by `--writers` threads (each its own conversations). The
first record of each conversation is written untimed. Targets, all in one run:

* `pg`: plain PostgreSQL (`--pg`); without `--citus` (or `$CONVGRAPH_CITUS_DSN`) the only one;
* `citus`: the Citus coordinator (`--citus`), every table distributed as tests/citus.py
  places them (the tables Citus refuses stay on the coordinator: it prints which);
* `citus-local`: the same coordinator with every table left plain on it, the baseline that
  separates the cost of distribution from the cost of going through Citus at all.

The targets take turns, `--rounds` times (pg, citus, citus-local, pg, …; each turn a fresh
schema), and each target's latencies are pooled over its turns: the machine's load, which moves
over minutes here, weighs on every target alike. Reported: p50 / p99 / mean ms per write,
writes/s, each target's p50 ÷ plain PostgreSQL's and ÷ `citus-local`'s (the same server: the
cost of distribution alone), and on Citus the statements one append sends to the workers
(`citus.log_remote_commands` on one more append, counted). Issue 31 §4's goal: Citus at most
1.5 times plain PostgreSQL.

    .venv/bin/python bench/write_latency.py --citus postgresql://postgres@127.0.0.1:9700/test
    .venv/bin/python bench/write_latency.py --quick --writers 4      # plain PostgreSQL alone
    .venv/bin/python bench/write_latency.py --citus DSN --rounds 5   # five turns each
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import ROOT, environment, on_snapshot
from rich.console import Console
from rich.table import Table

console = Console(highlight=False)
sys.path.insert(0, str(ROOT / "tests"))  # tests/citus.py: the one placement rule, shared with the tests


def _records(conversations: int, per_conv: int) -> list[list[Any]]:
    """`conversations` chains of `per_conv` signed records each, one list per conversation."""
    from convgraph import Config, Replica, SigningKey

    replica = Replica.in_memory(SigningKey.generate(), config=Config(legacy_writes=True))
    chains: list[list[Any]] = []
    for i in range(conversations):
        conv = f"wl-{i}"
        for n in range(per_conv):
            replica.say(conv, "user", f"turn {n} of {conv}: " + "x" * 200)
        chains.append(list(replica.records(conv)))
    return chains


def _measure(dsn: str, place: str, chains: list[list[Any]], writers: int) -> dict[str, Any]:
    """Write `chains` into a fresh schema on `dsn`: the per-write latencies (`times`, s), the
    wall time, the statements one more append sent to the workers (on Citus), or why it failed.
    The last chain is the probe's, not timed."""
    import psycopg

    import citus
    from convgraph.errors import StoreError
    from convgraph.store.postgres import PostgresStore
    from convgraph.store.rows import WriteSet

    schema = "wl_" + uuid.uuid4().hex[:10]
    citus.refused.clear()
    PostgresStore.on_create = citus.place if place == "distribute" else None
    citus.MODE = place
    try:
        store = PostgresStore(dsn, schema=schema, pool_size=max(2, writers + 1))
    finally:
        PostgresStore.on_create = None
    out: dict[str, Any] = {"refused": citus.report()}
    timed, probe = chains[:-1], chains[-1]
    times: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def writer(mine: list[list[Any]]) -> None:
        try:
            for chain in mine:  # untimed: the conversation's first record (its row, its first head)
                store.commit(WriteSet(records=[chain[0]]))
            took = []
            for n in range(1, max(len(c) for c in mine)):
                for chain in mine:
                    if n < len(chain):
                        t = time.perf_counter()
                        store.commit(WriteSet(records=[chain[n]]))
                        took.append(time.perf_counter() - t)
            with lock:
                times.extend(took)
        except StoreError as exc:
            with lock:
                errors.append(str(exc))

    try:
        threads = [threading.Thread(target=writer, args=(timed[i::writers],)) for i in range(writers)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        if place == "distribute" and not errors:
            out["remote_commands"] = _remote_commands(dsn, schema, probe)
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET client_min_messages = warning")
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if errors:
        return out | {"failed": errors[0]}
    return out | {"times": times, "wall_s": wall}


def _remote_commands(dsn: str, schema: str, probe: list[Any]) -> list[str]:
    """What Citus sends to the workers for one append (`probe[1]`, after `probe[0]` untimed):
    `citus.log_remote_commands` on the one connection of a store of its own."""
    from convgraph.store.postgres import PostgresStore
    from convgraph.store.rows import WriteSet

    store = PostgresStore(dsn, schema=schema, pool_size=1)
    notes: list[str] = []
    try:
        store.commit(WriteSet(records=[probe[0]]))
        with store._pool.connection() as conn:  # the pool's only connection: the next commit's
            conn.add_notice_handler(lambda d: notes.append(d.message_primary or ""))
            conn.execute("SET citus.log_remote_commands = on; SET client_min_messages = log")
        store.commit(WriteSet(records=[probe[1]]))
        with store._pool.connection() as conn:
            conn.execute("RESET citus.log_remote_commands; RESET client_min_messages")
    finally:
        store.close()
    return [n.removeprefix("issuing ")[:120] for n in notes if n.startswith("issuing ")]


def _figures(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One target's figures, its latencies pooled over its turns."""
    failed = [r["failed"] for r in rounds if "failed" in r]
    out: dict[str, Any] = {"refused": rounds[0]["refused"], "rounds": len(rounds)}
    if "remote_commands" in rounds[0]:
        out["remote_commands"] = rounds[0]["remote_commands"]
    if failed:
        return out | {"failed": failed[0]}
    times = sorted(t for r in rounds for t in r["times"])
    wall = sum(r["wall_s"] for r in rounds)
    return out | {
        "writes": len(times), "wall_s": round(wall, 2), "writes_per_s": round(len(times) / wall, 1),
        "p50_ms": round(times[len(times) // 2] * 1000, 2),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))] * 1000, 2),
        "mean_ms": round(statistics.fmean(times) * 1000, 2),
        "p50_ms_by_round": [round(sorted(r["times"])[len(r["times"]) // 2] * 1000, 2) for r in rounds],
    }


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--citus", default=os.environ.get("CONVGRAPH_CITUS_DSN"),
                        help="the Citus coordinator (scripts/citus-cluster start); else plain PG only")
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--per-conv", type=int, default=6,
                        help="records per conversation (the first untimed)")
    parser.add_argument("--writers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="turns each target takes, alternating")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--no-snapshot", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.conversations, args.per_conv, args.rounds = 20, 4, 1
    env = environment(["psycopg"])
    console.print(f"[bold]bench/write_latency.py[/]  {args.conversations} conversations x "
                  f"{args.per_conv - 1} timed appends, {args.writers} writer(s), {args.rounds} round(s) "
                  f"({env['cpu']}, {env['cores']} cores, "
                  f"code {env['convgraph']})")
    chains = _records(args.conversations + 1, max(2, args.per_conv))  # the last: the probe's
    targets = {"pg": (args.pg, "none")}
    if args.citus:
        targets |= {"citus": (args.citus, "distribute"), "citus-local": (args.citus, "none")}
    turns: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
    for _ in range(max(1, args.rounds)):
        for name, (dsn, place) in targets.items():
            turns[name].append(_measure(dsn, place, chains, args.writers))
    results = {name: _figures(rounds) for name, rounds in turns.items()}
    env["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    # two baselines: plain PostgreSQL (another server, maybe busier), and the coordinator's own
    # plain tables (same server, same settings and load: the cost of distribution alone)
    base = results["pg"].get("p50_ms")
    local = results.get("citus-local", {}).get("p50_ms")
    table = Table("target", "p50 ms", "p99 ms", "mean ms", "writes/s", "p50 ÷ pg", "p50 ÷ citus-local",
                  "p50 ms by round")
    for name, r in results.items():
        if "failed" in r:
            table.add_row(name, "failed", "", "", "", "", "", "")
            continue
        ratio = f"{r['p50_ms'] / base:.2f}" if base else ""
        to_local = f"{r['p50_ms'] / local:.2f}" if local and name != "pg" else ""
        cells = (r["p50_ms"], r["p99_ms"], r["mean_ms"], r["writes_per_s"])
        table.add_row(name, *map(str, cells), ratio, to_local, " ".join(map(str, r["p50_ms_by_round"])))
    console.print(table)
    console.print(f"load average {env['loadavg_start']} at the start, {env['loadavg_end']} at the end")
    for name, r in results.items():
        if "failed" in r:
            console.print(f"[red]{name} failed[/]: {r['failed']}")
        for line in r["refused"]:
            console.print(f"  {name}: Citus refused {line}")
        if "remote_commands" in r:
            console.print(f"  {name}: one append sends {len(r['remote_commands'])} commands to the workers:")
            for line in r["remote_commands"]:
                console.print(f"    {line}")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "results": results,
                                         "env": env}, indent=2, default=str) + "\n")
    return 0 if "failed" not in results["pg"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    return on_snapshot(__file__, run, argv)


if __name__ == "__main__":
    sys.exit(main())
