"""Load: 50 concurrent clients sync against one `convgraph serve` on 127.0.0.1 for a fixed time.

The server runs as its own process (`convgraph serve`, SQLite by default, `--db` for a
PostgreSQL URL), so it has a core of its own. The clients run in two processes of 25
threads each. Every client holds an in-memory replica and loops: write one turn to its
own conversation and one to a conversation all clients share, then sync both over HTTP.
Reported:

* throughput: syncs/s, HTTP exchanges/s and records accepted by the server per second;
* the server's CPU per sync: its utime + stime from /proc/<pid>/stat over the run, over the
  syncs it served (one is one `synchronize` of two conversations, 2 records);
* latency: p50 / p99 of one HTTP exchange and of a whole sync;
* lost: records a client wrote and synced that the server does not hold at the end. This
  must be zero.

    .venv/bin/python bench/load.py                     # 50 clients, 30 s, SQLite
    .venv/bin/python bench/load.py --db postgresql://postgres@127.0.0.1:5432/test
    .venv/bin/python bench/load.py --quick             # 10 clients, 5 s
    .venv/bin/python bench/load.py --clients 50,500 --both --db postgresql://postgres@127.0.0.1:5432/test \
        --baseline-src ../base/src --json bench/results-load.json   # every case beside the baseline's

With `--clients 50,500` each count is one case; `--both` runs each on SQLite and on
PostgreSQL; `--baseline-src` runs each case's server again on another checkout's src/ (the
clients run this code, unless `--baseline-clients`: then the baseline case's clients run the
baseline's code too, for a change on the client's side such as how many sessions a sync runs).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from _common import Server, drop_schema, environment, machine_busy_s, on_snapshot, process_cpu_s
from rich.console import Console
from rich.table import Table

console = Console(highlight=False)


def _clients(pairs: list[tuple[str, bytes]], seconds: float, out: mp.Queue,  # type: ignore[type-arg]
             src: Path | None = None, shared: str | None = "shared") -> None:
    """One client process: a thread per (server URL, seed), each looping write + sync until the
    deadline. Each sync carries 2 records: one in the client's own conversation and one in
    `shared` (every client's), or both in its own when `shared` is None. With `src` (a spawned
    process, which imported no convgraph yet), that src's code."""
    if src is not None:
        sys.path.insert(0, str(src))
    from convgraph import Config, Replica, SigningKey
    from convgraph.sync.http import HttpRemote
    from convgraph.sync.initiator import synchronize
    from convgraph.sync.peer import ReplicaPeer

    deadline = time.monotonic() + seconds
    results: list[dict[str, object]] = []
    lock = threading.Lock()

    def client(url: str, seed: bytes) -> None:
        key = SigningKey(seed)
        replica = Replica.in_memory(key, config=Config(legacy_writes=True))  # legacy names, as measured
        own = f"own-{seed.hex()[:8]}"
        convs = [own, shared] if shared else [own]
        exchanges: list[float] = []
        syncs: list[float] = []
        written: list[str] = []
        failures = converged = 0
        with HttpRemote(url, key, timeout_s=120) as remote:

            def timed(message: bytes) -> bytes:
                t = time.perf_counter()
                reply = remote.exchange(message)
                exchanges.append(time.perf_counter() - t)
                return reply

            n = 0
            while time.monotonic() < deadline:
                written.append(str(replica.say(own, "user", f"turn {n} of {own}").cid))
                written.append(str(replica.say(shared or own, "assistant", f"{own} turn {n}").cid))
                t = time.perf_counter()
                try:
                    report = synchronize(ReplicaPeer(replica), timed, convs, salts=lambda: os.urandom(8))
                    converged += report.converged
                except Exception:  # counted, not fatal: the bench reports failures
                    failures += 1
                syncs.append(time.perf_counter() - t)
                n += 1
            synchronize(ReplicaPeer(replica), remote.exchange, convs, salts=lambda: os.urandom(8))
        with lock:
            results.append({"exchanges": exchanges, "syncs": syncs, "written": written, "failures": failures,
                            "converged": converged})

    threads = [threading.Thread(target=client, args=pair) for pair in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(results)


def ours_src() -> Path:
    """The src/ this process imported convgraph from."""
    import convgraph

    return Path(convgraph.__file__).resolve().parent.parent


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000 if xs else float("nan")


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", default="50", help="client counts, comma separated: one run each")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--db", default=None, help="postgresql:// URL: serve a PostgreSQL schema")
    parser.add_argument("--both", action="store_true", help="SQLite and then PostgreSQL (--db) in one run")
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="another checkout's src/: its server runs each case too, in the same run")
    parser.add_argument("--baseline-clients", action="store_true",
                        help="with --baseline-src: the baseline case's clients run that src too")
    parser.add_argument("--instances", default=None,
                        help="instance counts (1,2,4): that many servers over one --db schema")
    parser.add_argument("--citus", default=None,
                        help="with --instances: a Citus coordinator, each count run there too")
    parser.add_argument("--no-shared", action="store_true",
                        help="with --instances: no conversation every client writes (2 records in its own)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--no-snapshot", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.seconds = "10", 5.0
    if args.both and not args.db:
        parser.error("--both needs --db")
    if args.instances and not args.db:
        parser.error("--instances needs --db")
    import convgraph

    env = environment(["starlette", "uvicorn", "httpx", "psycopg"])
    ours = Path(convgraph.__file__).resolve().parent.parent
    codes = [("ours", ours)] + ([("baseline", args.baseline_src.resolve())] if args.baseline_src else [])
    stores = ([None, args.db] if args.both else [args.db])
    rows = []
    if args.instances:
        return _instances_run(args, env)
    for clients in (int(c) for c in args.clients.split(",")):
        for db in stores:
            for code, src in codes:
                console.print(f"[bold]bench/load.py[/]  {clients} clients in {args.processes} processes, "
                              f"{args.seconds:.0f} s, store {'PostgreSQL' if db else 'SQLite'}, server code "
                              f"{code} ({env['cpu']}, {env['cores']} cores, code {env['convgraph']})")
                rows.append({"code": code, "src": str(src), **_one(args, clients, db, src)})
    keys = ("syncs_per_s", "server_cpu_ms_per_sync", "exchanges_per_sync", "server_cpu_ms_per_exchange",
            "converged_share", "sync_p50_ms", "sync_p99_ms", "exchange_p99_ms",
            "records_per_s", "failed_syncs", "lost", "server_verify_ok", "machine_cores_busy")
    table = Table("figure", *(f"{r['store']} {r['clients']} {r['code']}" for r in rows))
    for k in keys:
        table.add_row(k, *(str(r[k]) for r in rows))
    console.print(table)
    lost = sum(int(r["lost"]) for r in rows)
    console.print("[green]zero records lost[/]" if lost == 0 else f"[red]{lost} records LOST[/]")
    if args.json:
        args.json.write_text(json.dumps({"env": env, "rows": rows}, indent=2) + "\n")
    return 0 if lost == 0 and all(r["server_verify_ok"] for r in rows) else 1


def _one(args: argparse.Namespace, clients: int, db: str | None, src: Path) -> dict[str, object]:
    """One case: a server importing convgraph from `src`, `clients` clients for `args.seconds`."""
    from convgraph import Replica, SigningKey
    from convgraph.core.keys import actor_text

    seeds = [os.urandom(32) for _ in range(clients)]
    schema = "load_" + uuid.uuid4().hex[:10]
    serve_args = [a for s in seeds for a in ("--allow", f"{actor_text(SigningKey(s).public)}=*")]
    serve_args += ["--db", db, "--schema", schema] if db else []
    with tempfile.TemporaryDirectory(prefix="convgraph-load-") as tmp:  # the server's home goes with it
        home = Path(tmp) / "server"
        try:
            env = {**os.environ, "PYTHONPATH": str(src)}
            with Server(home, serve_args, log=Path(tmp) / "server.log", env=env) as server:
                busy0, t0, cpu0 = machine_busy_s(), time.monotonic(), process_cpu_s(server.pid)
                client_src = src if getattr(args, "baseline_clients", False) and src != ours_src() else None
                results = _drive([(server.url, s) for s in seeds], args.processes, args.seconds, client_src)
                wall, busy = time.monotonic() - t0, machine_busy_s() - busy0
                cpu = process_cpu_s(server.pid) - cpu0
            if db:  # the server stopped: read what it holds
                from convgraph.store.postgres import PostgresStore

                replica = Replica(PostgresStore(db, schema=schema), SigningKey.generate())
            else:
                replica = Replica.open(home)
            with replica:
                held = {str(r.cid) for conv in replica.conversations() for r in replica.records(conv)}
                verified = replica.verify().ok
        finally:
            if db:  # whatever happened, the schema goes too
                _drop(db, schema)
    store = "postgres" if db else "sqlite"
    return _figures(results, clients, args.seconds, wall, cpu, busy, held, verified, store)


def _drive(pairs: list[tuple[str, bytes]], processes: int, seconds: float,
           src: Path | None = None, shared: str | None = "shared") -> list[dict[str, object]]:
    """Run the clients, (server URL, seed) each, in `processes` processes; their results. With
    `src`, spawned processes that import convgraph from there, not forks of this one."""
    ctx: mp.context.DefaultContext = mp.get_context("fork" if src is None else "spawn")  # type: ignore[assignment]
    queue: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=_clients, args=(pairs[i::processes], seconds, queue, src, shared))
             for i in range(processes)]
    for p in procs:
        p.start()
    results = [r for _ in procs for r in queue.get()]
    for p in procs:
        p.join()
    return results


def _figures(results: list[dict[str, object]], clients: int, seconds: float, wall: float, cpu: float,
             busy: float, held: set[str], verified: bool, store: str) -> dict[str, object]:
    """One case's figures from its clients' results and the server side's CPU and holdings."""
    exchanges = [x for r in results for x in r["exchanges"]]  # type: ignore[attr-defined]
    syncs = [x for r in results for x in r["syncs"]]  # type: ignore[attr-defined]
    written = {c for r in results for c in r["written"]}  # type: ignore[attr-defined]
    failures = sum(int(r["failures"]) for r in results)  # type: ignore[call-overload]
    # every client ends with one more sync (untimed) to flush what it wrote: the server served it
    served = len(syncs) + clients
    lost = len(written - held)
    return {
        "clients": clients, "seconds": seconds, "wall_s": round(wall, 1),
        "store": store,
        "syncs": len(syncs), "syncs_per_s": round(len(syncs) / seconds, 1),
        "server_cpu_s": round(cpu, 2), "server_cpu_ms_per_sync": round(cpu / served * 1000, 2),
        "server_cpu_ms_per_exchange": round(cpu / max(1, len(exchanges)) * 1000, 2),
        "exchanges": len(exchanges), "exchanges_per_s": round(len(exchanges) / seconds, 1),
        "exchanges_per_sync": round(len(exchanges) / max(1, len(syncs)), 2),
        # syncs that ended converged; the others ended behind what others wrote meanwhile (or failed)
        "converged_share": round(sum(int(r.get("converged", 0)) for r in results)  # type: ignore[call-overload]
                                 / max(1, len(syncs)), 2),
        "records_written": len(written), "records_per_s": round(len(written) / seconds, 1),
        "exchange_p50_ms": round(_pct(exchanges, 0.5), 2), "exchange_p99_ms": round(_pct(exchanges, 0.99), 2),
        "sync_p50_ms": round(_pct(syncs, 0.5), 2), "sync_p99_ms": round(_pct(syncs, 0.99), 2),
        "sync_mean_ms": round(statistics.fmean(syncs) * 1000, 2) if syncs else None,
        "failed_syncs": failures, "lost": lost, "server_verify_ok": verified,
        "machine_cores_busy": round(busy / wall, 2),
    }


def _instances_run(args: argparse.Namespace, env: dict[str, str]) -> int:
    """`--instances`: each client count on N servers over one schema, plain PostgreSQL then Citus."""
    rows = []
    for clients in (int(c) for c in args.clients.split(",")):
        for store, db in [("postgres", args.db)] + ([("citus", args.citus)] if args.citus else []):
            for n in (int(i) for i in args.instances.split(",")):
                console.print(f"[bold]bench/load.py[/]  {clients} clients in {args.processes} processes, "
                              f"{args.seconds:.0f} s, {n} instance(s) over one {store} schema "
                              f"({env['cpu']}, {env['cores']} cores, code {env['convgraph']})")
                rows.append(_many(args, clients, store, db, n))
    keys = ("syncs_per_s", "server_cpu_ms_per_sync", "exchanges_per_sync", "sync_p50_ms", "sync_p99_ms",
            "failed_syncs", "lost",
            "lock_wait_share", "lock_waiters_mean", "lock_waiters_max", "citus_lock_waits_mean",
            "machine_cores_busy")
    table = Table("figure", *(f"{r['store']} {r['clients']}c x{r['instances']}" for r in rows))
    for k in keys:
        table.add_row(k, *(str(r.get(k, "")) for r in rows))
    console.print(table)
    for r in rows:
        if r["lock_waits_by_event"]:
            console.print(f"  {r['store']} x{r['instances']} lock waits by event: {r['lock_waits_by_event']}")
            for query, n in r["lock_waits_by_query"].items():  # type: ignore[attr-defined]
                console.print(f"    {n} waiting in: {query}")
        for line in r["refused"]:  # type: ignore[attr-defined]
            console.print(f"  {r['store']}: Citus refused {line}")
    lost = sum(int(r["lost"]) for r in rows)  # type: ignore[call-overload]
    console.print("[green]zero records lost[/]" if lost == 0 else f"[red]{lost} records LOST[/]")
    if args.json:
        args.json.write_text(json.dumps({"env": env, "rows": rows}, indent=2) + "\n")
    return 0 if lost == 0 and all(r["server_verify_ok"] for r in rows) else 1


def _many(args: argparse.Namespace, clients: int, store: str, db: str, n: int) -> dict[str, object]:
    """One case of `--instances`: `n` servers of this code over one schema of `db`, clients spread
    over them round-robin; their CPU summed from /proc, the database's lock waits sampled."""
    from _instances import Instances, LockWaits, prepare, url_for

    from convgraph import Replica, SigningKey
    from convgraph.core.keys import actor_text
    from convgraph.store.postgres import PostgresStore

    seeds = [os.urandom(32) for _ in range(clients)]
    schema = "load_" + uuid.uuid4().hex[:10]
    allow = [a for s in seeds for a in ("--allow", f"{actor_text(SigningKey(s).public)}=*")]
    try:
        refused = prepare(db, schema)  # on Citus: the schema distributed before any server opens it
        with (tempfile.TemporaryDirectory(prefix="convgraph-load-") as tmp,
              Instances(Path(tmp) / "server", n, allow, db=db, schema=schema) as servers,
              LockWaits(db, schema) as waits):
            busy0, t0, cpu0 = machine_busy_s(), time.monotonic(), sum(servers.cpu_s())
            results = _drive([(url_for(i, servers.urls), s) for i, s in enumerate(seeds)],
                             args.processes, args.seconds, shared=None if args.no_shared else "shared")
            wall, busy = time.monotonic() - t0, machine_busy_s() - busy0
            cpu = sum(servers.cpu_s()) - cpu0
            waits.close()
            locks = waits.figures()
        with Replica(PostgresStore(db, schema=schema), SigningKey.generate()) as replica:
            held = {str(r.cid) for conv in replica.conversations() for r in replica.records(conv)}
            verified = replica.verify().ok
    finally:
        _drop(db, schema)
    figures = _figures(results, clients, args.seconds, wall, cpu, busy, held, verified, store)
    return figures | {"instances": n, "code": "ours", "shared_conversation": not args.no_shared, **locks,
                      "refused": refused}


def _drop(db: str, schema: str) -> None:
    """Drop the run's schema; a failure is said, not raised (it must not hide why the run ended)."""
    why = drop_schema(db, schema)
    if why:
        console.print(f"[red]{why}[/]")


def main(argv: Sequence[str] | None = None) -> int:
    return on_snapshot(__file__, run, argv)


if __name__ == "__main__":
    sys.exit(main())
