"""Idle syncs (d = 0): what a sync with nothing to send costs at 1k, 10k and 100k records.

Run as `bench/sync.py --idle`. Two SQLite replicas hold the same n records of one
conversation (each its own key). Each sync is a whole `synchronize` run in one process, as
`bench/sync.py`'s d = 0 row does it: a new `ReplicaPeer` on each side and a new `Responder`
per message, as the server makes them per request. The first sync of a process is reported
apart (it fills whatever caches the code keeps); then `--repeat` rounds of one sync per size
(alternating, so that the machine's load touches every size alike), and per size the mean CPU
time of a sync (both sides, this process: what the goal is judged on, as the machine may be
shared), the median wall time, and the median part spent answering on the server side. The same replicas are
measured with the baseline code (`--baseline-src`, another checkout's src/) in a child
process of the same run. Goal (issue 31 §2): d = 0 at 100k costs at most 1.2x d = 0 at 1k.

    python bench/sync.py --idle --baseline-src /work/wt/base/src --json bench/results-sync-idle.json
    python bench/sync.py --idle --sizes 200,2000 --repeat 5     # smoke

The baseline's syncs are slow at 100k (about a second each): `--baseline-repeat` (20) bounds them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import environment, ok_mark
from rich.console import Console
from rich.table import Table

CONV = "idle"
GOAL = 1.2


def build(home: Path, n: int) -> None:
    """Server and client replica directories holding the same `n` records of `CONV`, each with its key."""
    from convgraph import Config, Replica, SigningKey, save_key
    from convgraph.replica.facade import turn_draft

    server = Replica.open(home / "server", config=Config(legacy_writes=True))
    try:
        for at in range(0, n, 1000):
            server.write_many(CONV, [turn_draft(CONV, "user" if i % 2 else "assistant", f"turn {i} of {n}")
                                     for i in range(at, min(n, at + 1000))])
    finally:
        server.close()
    (home / "client").mkdir()
    shutil.copy(home / "server" / "replica.sqlite", home / "client" / "replica.sqlite")
    save_key(SigningKey.generate(), home / "client" / "actor.key")  # its own author, as another machine


def measure(homes: Sequence[Path], repeat: int) -> list[dict[str, Any]]:
    """`repeat` + 1 idle syncs between the two replicas of each of `homes`, with whatever code is
    imported: the first of each, then rounds of one sync per home, so that a change of the
    machine's load touches every size alike."""
    from convgraph import Replica
    from convgraph.sync.initiator import synchronize
    from convgraph.sync.peer import ReplicaPeer
    from convgraph.sync.responder import Responder

    pairs = [(Replica.open(h / "client"), Replica.open(h / "server")) for h in homes]
    salt = iter(range(1 << 30))
    figures: list[dict[str, list[float]]] = [{"wall": [], "cpu": [], "served": []} for _ in homes]

    def one(client: Replica, server: Replica, into: dict[str, list[float]]) -> None:
        spent = [0.0]

        def respond(message: bytes) -> bytes:
            t = time.perf_counter()
            try:  # a new peer and responder per message, as the server makes them per request
                return Responder(ReplicaPeer(server), key=server.key, clock=server.clock).receive(message)
            finally:
                spent[0] += time.perf_counter() - t

        t, c = time.perf_counter(), time.process_time()
        report = synchronize(ReplicaPeer(client), respond, [CONV],
                             salts=lambda: next(salt).to_bytes(8, "big"))
        into["wall"].append(time.perf_counter() - t)
        into["cpu"].append(time.process_time() - c)
        into["served"].append(spent[0])
        if not report.converged or report.convs[CONV].accepted_here or report.convs[CONV].accepted_there:
            raise SystemExit("an idle sync moved records or did not converge")

    try:
        for _ in range(repeat + 1):
            for (client, server), into in zip(pairs, figures, strict=True):
                one(client, server, into)
        counts = [client.store.count(CONV) for client, _ in pairs]
    finally:
        for client, server in pairs:
            client.close()
            server.close()
    out = []
    for n, f in zip(counts, figures, strict=True):
        rest = f["wall"][1:]
        out.append({
            "n": n, "first_ms": f["wall"][0] * 1e3, "p50_ms": statistics.median(rest) * 1e3,
            "p90_ms": sorted(rest)[int(0.9 * (len(rest) - 1))] * 1e3,
            "server_p50_ms": statistics.median(f["served"][1:]) * 1e3, "syncs": len(rest),
            "cpu_ms": statistics.fmean(f["cpu"][1:]) * 1e3,
        })
    return out


def _worker(argv: Sequence[str]) -> int:
    homes, repeat = [Path(p) for p in argv[1:]], int(argv[0])
    print(json.dumps(measure(homes, repeat)))
    return 0


def _run_with(src: Path, homes: list[Path], repeat: int) -> list[dict[str, Any]]:
    """The figures of `homes` measured in a child process importing convgraph from `src`."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, __file__, "--worker", str(repeat), *map(str, homes)],
                         check=False, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the measuring process ({src}) failed:\n{out.stderr}")
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--idle", action="store_true")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--baseline-src", type=Path, default=None, help="another checkout's src/, run alike")
    parser.add_argument("--baseline-repeat", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--tmp", type=Path, default=None)
    parser.add_argument("--no-snapshot", action="store_true")
    args, _ = parser.parse_known_args(argv)
    import convgraph

    ours = Path(convgraph.__file__).resolve().parent.parent
    sizes = [int(s) for s in args.sizes.split(",")]
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    env = environment([])
    console.print(f"[bold]bench/sync.py --idle[/]  sizes {sizes}, {args.repeat} syncs each ({env['cpu']}, "
                  f"code {env['convgraph']}, baseline {args.baseline_src or 'none'})")
    tmp = Path(tempfile.mkdtemp(prefix="convgraph-idle-", dir=args.tmp))
    try:
        homes = []
        for n in sizes:
            home = tmp / f"n{n}"
            build(home, n)
            homes.append(home)
        runs = {"ours": _run_with(ours, homes, args.repeat)}
        if args.baseline_src is not None:
            runs["baseline"] = _run_with(args.baseline_src.resolve(), homes, args.baseline_repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table = Table("n", *(f"{who} {what}" for who in runs for what in ("first", "CPU", "p50", "server p50")))
    for i, n in enumerate(sizes):
        table.add_row(f"{n:,}", *(f"{runs[who][i][k]:.2f} ms" for who in runs
                                  for k in ("first_ms", "cpu_ms", "p50_ms", "server_p50_ms")))
    console.print(table)
    ratio = runs["ours"][-1]["cpu_ms"] / runs["ours"][0]["cpu_ms"]
    console.print(f"d = 0 at {sizes[-1]:,} / d = 0 at {sizes[0]:,}: {ratio:.2f}x (goal <= {GOAL}x): "
                  f"{ok_mark(ratio <= GOAL)}")
    if "baseline" in runs:
        base = runs["baseline"][-1]["cpu_ms"] / runs["baseline"][0]["cpu_ms"]
        console.print(f"baseline: {base:.2f}x")
    if args.json:
        doc = {"env": env, "sizes": sizes, "repeat": args.repeat, "baseline_src": str(args.baseline_src),
               "runs": runs, "ratio_largest_to_smallest": ratio, "goal": GOAL}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        sys.exit(_worker(sys.argv[2:]))
    from _common import on_snapshot

    sys.exit(on_snapshot(__file__, run, None))
