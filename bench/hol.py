"""Head-of-line: one pushed message of 60,000 chained orphans against everybody else (issue 31 §1).

A real `convgraph serve` (SQLite, or `--db` PostgreSQL) holds a rooted conversation A, whose
owner granted `read` to two keys: an attacker and a reader. While an honest client syncs
another conversation B in a loop (two new records a sync) and the reader pulls A in a loop,
the attacker, read-only, pushes one message of N records chained to a first parent it never
sends (60,000 by default: about 15 MB). Reported for each phase, quiet (no attack) and
attack (from the push's start to its reply):

* B's sync latency p50 / p99 / max, and failed syncs;
* the reader's pull of A, p50 / p99 / max;
* how long the attacker's push took, and what its reply said.

With `--baseline-src DIR` the same scenario runs again in the same run against a server that
imports DIR (the old code, by PYTHONPATH for the server process only), side by side. Goals:
B's p99 under attack at most twice its quiet p99, and the reader's max under attack <= 1 s.

    .venv/bin/python bench/hol.py --baseline-src /work/wt/base/src --json bench/results-hol.json
    .venv/bin/python bench/hol.py --db postgresql://postgres@127.0.0.1:5432/test
    .venv/bin/python bench/hol.py --smoke
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import ROOT, SNAPSHOT_ENV, Server, drop_schema, environment, ok_mark, on_snapshot
from rich.console import Console
from rich.table import Table

console = Console(highlight=False)
TIMEOUT_S = 300.0  # a client's patience: far beyond any sync that is not blocked


def _pct(xs: list[float], p: float) -> float | None:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p * len(xs)))] * 1000, 1) if xs else None


def _stats(xs: list[float]) -> dict[str, float | int | None]:
    return {"n": len(xs), "p50_ms": _pct(xs, 0.5), "p99_ms": _pct(xs, 0.99),
            "max_ms": round(max(xs) * 1000, 1) if xs else None}


class _Loop:
    """A client syncing `conv` over and over (writing `writes` records before each) until stopped."""

    def __init__(self, url: str, seed: bytes, conv: str, writes: int) -> None:
        from convgraph import Config, Replica, SigningKey

        self.url, self.key, self.conv, self.writes = url, SigningKey(seed), conv, writes
        self.replica = Replica.in_memory(self.key, config=Config(legacy_writes=True))
        self.times: list[float] = []
        self.failures, self.written = 0, list[str]()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from convgraph.sync.http import HttpRemote
        from convgraph.sync.initiator import synchronize
        from convgraph.sync.peer import ReplicaPeer

        with HttpRemote(self.url, self.key, timeout_s=TIMEOUT_S) as remote:
            n = 0
            while not self.stop.is_set():
                for _ in range(self.writes):
                    self.written.append(str(self.replica.say(self.conv, "user", f"turn {n}").cid))
                    n += 1
                t = time.perf_counter()
                try:
                    synchronize(ReplicaPeer(self.replica), remote.exchange, [self.conv],
                                salts=lambda: os.urandom(8))
                    self.times.append(time.perf_counter() - t)
                except Exception:  # counted: a failed sync is a figure here, not an end
                    self.failures += 1
                time.sleep(0.02)  # a client that syncs often, not a flood

    def take(self) -> tuple[list[float], int]:
        """The latencies and failures since the last `take`."""
        times, failures = self.times, self.failures
        self.times, self.failures = [], 0
        return times, failures


def _orphans(seed: bytes, conv: str, genesis: Any, n: int) -> tuple[list[bytes], int]:
    """`n` records chained to a first one (on `genesis`) never sent; the size of their message."""
    from convgraph import SigningKey
    from convgraph.core.hlc import Hlc
    from convgraph.core.record import sign_record
    from convgraph.sync import wire

    key, now = SigningKey(seed), int(time.time() * 1000)
    parent = sign_record(key, conv=conv, seq=1, hlc=Hlc(now, 0), parents=[genesis], kind="user_message",
                         payload={"content": "never sent"})
    out = []
    for i in range(n):
        parent = sign_record(key, conv=conv, seq=2 + i, hlc=Hlc(now, 1 + i), parents=[parent.cid],
                             kind="user_message", payload={"content": f"{i}"})
        out.append(parent.data)
    message = wire.Message(wire.Kind.CONTINUE, b"s" * 8, (wire.Section(conv, records=tuple(out)),))
    return out, len(wire.encode(message))


def scenario(src: Path, label: str, args: argparse.Namespace, seeds: dict[str, bytes]) -> dict[str, Any]:
    """One server importing `src`: the quiet phase, then the attack phase."""
    from convgraph import Replica, SigningKey
    from convgraph.core.keys import actor_text
    from convgraph.sync import wire
    from convgraph.sync.http import HttpRemote
    from convgraph.sync.initiator import synchronize
    from convgraph.sync.peer import ReplicaPeer

    keys = {name: SigningKey(seed) for name, seed in seeds.items()}
    owner = Replica.in_memory(keys["owner"])
    attacked = owner.create("attacked")
    for who in ("attacker", "reader"):
        owner.write(attacked, "grant", {"grantee": keys[who].public, "rights": ["read"]})
    for i in range(args.history):
        owner.say(attacked, "user", f"history {i}")
    orphans, size = _orphans(seeds["attacker"], attacked, owner.records(attacked)[0].cid, args.records)
    schema = "hol_" + uuid.uuid4().hex[:10]
    serve_args = ["--allow", f"{actor_text(keys['owner'].public)}={attacked}",
                  "--allow", f"{actor_text(keys['honest'].public)}=other"]
    serve_args += ["--db", args.db, "--schema", schema] if args.db else []
    with tempfile.TemporaryDirectory(prefix="convgraph-hol-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(src)}
        try:
            with Server(Path(tmp) / "server", serve_args, log=Path(tmp) / "server.log", env=env,
                        start_timeout_s=120, stop_timeout_s=60) as server:
                with HttpRemote(server.url, keys["owner"], timeout_s=TIMEOUT_S) as remote:
                    assert synchronize(ReplicaPeer(owner), remote.exchange, [attacked],
                                       salts=lambda: os.urandom(8)).converged
                honest = _Loop(server.url, seeds["honest"], "other", 2)
                reader = _Loop(server.url, seeds["reader"], attacked, 0)
                for loop in (honest, reader):
                    loop.thread.start()
                time.sleep(args.warm_s)  # unmeasured: the first syncs of a process pay for its warm-up
                for loop in (honest, reader):
                    loop.take()
                time.sleep(args.quiet_s)
                quiet = {"other": honest.take(), "reader": reader.take()}
                reply: dict[str, Any] = {}
                t0 = time.perf_counter()
                try:
                    with HttpRemote(server.url, keys["attacker"], timeout_s=TIMEOUT_S * 2) as remote:
                        section = wire.Section(attacked, records=tuple(orphans))
                        answer = wire.decode(remote.exchange(wire.encode(
                            wire.Message(wire.Kind.CONTINUE, os.urandom(8), (section,)))))
                    fates: dict[str, int] = {}
                    for entry in answer.sections[0].report or ():
                        fates[entry.fate.name] = fates.get(entry.fate.name, 0) + 1
                    reply = {"fates": fates}
                except Exception as exc:  # said in the figures: the push's fate is part of the result
                    reply = {"error": f"{type(exc).__name__}: {exc}"[:200]}
                attack_s = time.perf_counter() - t0
                attack = {"other": honest.take(), "reader": reader.take()}
                for loop in (honest, reader):
                    loop.stop.set()
                for loop in (honest, reader):
                    loop.thread.join(TIMEOUT_S)
        finally:
            if args.db:
                why = drop_schema(args.db, schema)
                if why:
                    console.print(f"[red]{why}[/]")
    figures: dict[str, Any] = {"code": label, "src": str(src), "records": args.records,
                               "message_bytes": size, "attack_s": round(attack_s, 1), "attack_reply": reply}
    for phase, got in (("quiet", quiet), ("attack", attack)):
        for who, (times, failures) in got.items():
            figures[f"{phase}_{who}"] = {**_stats(times), "failed": failures}
    return figures


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=60_000, help="orphans in the attacker's one message")
    parser.add_argument("--history", type=int, default=50, help="records A holds before")
    parser.add_argument("--quiet-s", type=float, default=10.0, help="the phase without attack")
    parser.add_argument("--warm-s", type=float, default=3.0, help="unmeasured syncs before it")
    parser.add_argument("--db", default=None, help="postgresql:// URL: serve a PostgreSQL schema")
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="a src/ directory of the old code: the same scenario on it, in the same run")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: only that it runs")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--no-snapshot", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.records, args.history, args.quiet_s, args.warm_s = 300, 5, 1.0, 0.5
    env = environment(["starlette", "uvicorn", "httpx", "psycopg"])
    own = Path(os.environ.get(SNAPSHOT_ENV) or ROOT / "src")
    console.print(f"[bold]bench/hol.py[/]  {args.records} orphans in one message, store "
                  f"{'PostgreSQL' if args.db else 'SQLite'}  ({env['cpu']}, {env['cores']} cores, "
                  f"code {env['convgraph']})")
    seeds = {name: os.urandom(32) for name in ("owner", "attacker", "reader", "honest")}
    runs = [scenario(own, "this", args, seeds)]
    if args.baseline_src is not None:
        runs.append(scenario(args.baseline_src.resolve(), "baseline", args, seeds))
    table = Table("figure", *(r["code"] for r in runs))
    table.add_row("push of the orphans, s", *(str(r["attack_s"]) for r in runs))
    table.add_row("push reply", *(json.dumps(r["attack_reply"])[:60] for r in runs))
    for phase in ("quiet", "attack"):
        for who, name in (("other", "B sync"), ("reader", "A reader")):
            for stat in ("p50_ms", "p99_ms", "max_ms", "n", "failed"):
                table.add_row(f"{phase}: {name} {stat}", *(str(r[f"{phase}_{who}"][stat]) for r in runs))
    console.print(table)
    this = runs[0]
    quiet_p99 = this["quiet_other"]["p99_ms"] or 0.0
    goals = {
        "other_p99_within_2x_quiet": (this["attack_other"]["p99_ms"] or 0.0) <= 2 * quiet_p99,
        "reader_max_within_1s": (this["attack_reader"]["max_ms"] or 0.0) <= 1000.0,
    }
    for goal, met in goals.items():
        console.print(f"{goal}: {ok_mark(met)}")
    if args.json:
        args.json.write_text(json.dumps({"store": "postgres" if args.db else "sqlite", "runs": runs,
                                         "goals": goals, "env": env}, indent=2) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return on_snapshot(__file__, run, argv)


if __name__ == "__main__":
    sys.exit(main())
