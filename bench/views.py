"""`convgraph log --last 50` and `transcript --last 50` on a long conversation: time to first
output and memory, on SQLite and PostgreSQL (issue 12, "Streaming views").

Run from the project root:

    .venv/bin/python bench/views.py [--steps 100000] [--pg postgresql://127.0.0.1:5432/test]
                                    [--json bench/results-views.json]

A conversation of `--steps` agent steps (3 records each: a user message, an assistant message
with a tool call, its result; ~1 KB of text each) is written once into a fresh SQLite replica
and, with `--pg`, into a fresh PostgreSQL schema (dropped afterwards). Then, for each view:

* **CLI, fresh process** (SQLite: the CLI opens a home directory): the wall time from spawning
  `convgraph --home H --no-pager log --conv C --last 50` (as `python -c`) to its first byte
  of output and to its exit, and that process's peak RSS (its own VmHWM at exit), median of 5. The same
  process's `import` cost is reported apart (`-X importtime` is not used: it slows imports).
* **In a fresh child process, convgraph already imported** (cold store, warm interpreter):
  the CLI's own command run in the child (SQLite), and the Python API the views sit on,
  `Replica.records(conv, last=50)` / `Replica.transcript(conv, last=50)` (SQLite and
  PostgreSQL): time from opening the store to the first line and to the last, and the child's
  peak RSS; and `Replica.resume(conv, "anthropic", last=200)`: open + first call, then the
  median of 50 warm calls. Median of 5 children.

Targets (issue 12): first output under 200 ms and memory under 100 MB at 300,000 records;
PostgreSQL within 2x of SQLite.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, environment

LAST = 50
RESUME_LAST = 200
TRIES = 5
WORDS = ("the", "a", "of", "to", "and", "in", "is", "that", "for", "it", "with", "as", "on", "this",
         "be", "are", "file", "code", "tool", "patch", "review")


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(180, 220)))


def _drafts(step: int, rng: random.Random) -> list[Any]:
    from convgraph import Draft

    call = f"call_{step}"
    return [
        Draft("user_message", {"role": "user", "content": _text(rng)}),
        Draft("agent_message", {"role": "assistant", "content": _text(rng),
                                "tool_calls": [{"id": call, "name": "lookup", "input": {"q": str(step)}}]}),
        Draft("tool_result", {"role": "tool", "tool_use_id": call, "content": _text(rng)}),
    ]


def build(replica: Any, steps: int) -> str:
    """One rooted conversation of `steps` steps, written 500 steps per transaction."""
    from rich.progress import Progress

    conv = str(replica.create("views bench"))
    rng = random.Random(12)
    with Progress(transient=True) as bar:
        task = bar.add_task(f"writing {steps:,} steps", total=steps)
        for start in range(0, steps, 500):
            drafts = [d for s in range(start, min(steps, start + 500)) for d in _drafts(s, rng)]
            replica.write_many(conv, drafts)
            bar.advance(task, min(500, steps - start))
    return conv


def _peak_rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


class _FirstWrite:
    """A stdout that notes when the first byte arrives and keeps only a line count."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.lines = 0

    def write(self, text: str) -> int:
        if self.first is None and text:
            self.first = time.perf_counter()
        self.lines += text.count("\n")
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _in_process(store_spec: dict[str, Any], conv: str, view: str, how: str, out: Any) -> None:
    """Child: convgraph imported first (not timed), then open the store and produce the view:
    through the CLI's own command (`how == "cli"`, SQLite) or the Python API (both stores)."""
    import convgraph.cli.main
    from convgraph import Replica
    from convgraph.core.keys import SigningKey

    if store_spec["kind"] == "pg":
        from convgraph.store.postgres import PostgresStore  # imported before the clock starts, as SQLite's is
    t0 = time.perf_counter()
    if how == "cli":
        sink = _FirstWrite()
        saved, sys.stdout = sys.stdout, sink  # type: ignore[assignment]
        try:
            convgraph.cli.main.cli.main(["--home", store_spec["home"], "--no-pager", view, "--conv", conv,
                                         "--last", str(LAST)], standalone_mode=False)
        finally:
            sys.stdout = saved
        first, count, last = sink.first, sink.lines, time.perf_counter()
    else:
        if store_spec["kind"] == "sqlite":
            r = Replica.open(store_spec["home"])
        else:
            r = Replica(PostgresStore(store_spec["dsn"], schema=store_spec["schema"]), SigningKey.generate())
        opened = time.perf_counter()
        first, count = None, 0
        if view == "resume":  # the agent loop's read: a cold first call, then warm ones
            count = len(r.resume(conv, "anthropic", last=RESUME_LAST))
            first = time.perf_counter()
            warm = []
            for _ in range(50):
                t = time.perf_counter()
                r.resume(conv, "anthropic", last=RESUME_LAST)
                warm.append((time.perf_counter() - t) * 1000)
        else:
            items = r.records(conv, last=LAST) if view == "log" else r.transcript(conv, last=LAST)
            for item in items:
                if first is None:
                    first = time.perf_counter()
                count += 1
                str(item.op if view == "transcript" else item.cid)
        r.close()
        last = first if view == "resume" else time.perf_counter()  # not the warm calls
    result = {"first_ms": ((first or last) - t0) * 1000, "last_ms": (last - t0) * 1000, "lines": count,
              "peak_rss_mib": _peak_rss_mib()}
    if how != "cli":
        result["open_ms"] = (opened - t0) * 1000
    if view == "resume":
        result["warm_ms"] = statistics.median(warm)
    out.send(result)


def in_process(
    store_spec: dict[str, Any], conv: str, view: str, how: str, tries: int = TRIES
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    samples = []
    for _ in range(tries):
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_in_process, args=(store_spec, conv, view, how, send))
        p.start()
        samples.append(recv.recv())
        p.join()
    return _summary(samples)


_CLI_CHILD = """
import atexit, sys
def _hwm():
    with open("/proc/self/status", encoding="ascii") as f:
        sys.stderr.write("".join(line for line in f if line.startswith("VmHWM:")))
atexit.register(_hwm)
from convgraph.cli.entry import main
main()
"""


def cli(home: Path, conv: str, view: str, tries: int = TRIES) -> dict[str, Any]:
    """Spawn the CLI; time to its first byte and to exit; its peak RSS from wait4."""
    # the child reports its own VmHWM at exit: wait4's ru_maxrss would count the pages of this
    # (large) process that the child holds between fork and exec
    argv = [sys.executable, "-c", _CLI_CHILD, "--home", str(home), "--no-pager", view, "--conv", conv,
            "--last", str(LAST)]
    samples = []
    for _ in range(tries):
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        assert p.stdout is not None
        first_byte = p.stdout.read(1)
        first = time.perf_counter() - t0
        rest, errors = p.communicate()
        last = time.perf_counter() - t0
        if p.returncode != 0 or not first_byte:
            raise SystemExit(f"{' '.join(argv)} failed with exit {p.returncode}: {errors.decode()}")
        hwm = int(errors.decode().rsplit("VmHWM:", 1)[1].split()[0])
        samples.append({"first_ms": first * 1000, "last_ms": last * 1000,
                        "lines": (first_byte + rest).count(b"\n"), "peak_rss_mib": hwm / 1024})
    imports = subprocess.run([sys.executable, "-c",
                              "import time; t=time.perf_counter(); import convgraph.cli.main; "
                              "print((time.perf_counter()-t)*1000)"],
                             capture_output=True, text=True, check=True)
    return {**_summary(samples), "import_ms": float(imports.stdout)}


def _summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "first_ms": statistics.median(s["first_ms"] for s in samples),
        "last_ms": statistics.median(s["last_ms"] for s in samples),
        "peak_rss_mib": max(s["peak_rss_mib"] for s in samples),
        "lines": samples[0]["lines"],
        **{k: statistics.median(s[k] for s in samples) for k in ("open_ms", "warm_ms") if k in samples[0]},
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    from convgraph import Replica
    from convgraph.core.keys import SigningKey

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000, help="agent steps (3 records each)")
    parser.add_argument("--pg", default=None, help="also PostgreSQL at this DSN")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true",
                        help="100 steps, one try of each: checks that the script runs, measures nothing")
    args = parser.parse_args(argv)
    tries = 1 if args.smoke else TRIES
    if args.smoke:
        args.steps = 100
    console = Console()
    results: dict[str, Any] = {"steps": args.steps, "records": 3 * args.steps + 1,
                               "env": environment(["cbrrr", "pynacl", "psycopg"]),
                               "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                               "load_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="convgraph-views-") as tmp:
        home = Path(tmp) / "home"
        t = time.perf_counter()
        with Replica.open(home) as r:
            conv = build(r, args.steps)
        console.print(f"SQLite: {args.steps:,} steps written in {time.perf_counter() - t:.0f} s")
        sqlite_spec = {"kind": "sqlite", "home": str(home)}
        for view in ("log", "transcript"):
            results[f"sqlite {view} cli"] = cli(home, conv, view, tries)
            results[f"sqlite {view} cli, in process"] = in_process(sqlite_spec, conv, view, "cli", tries)
            results[f"sqlite {view} api"] = in_process(sqlite_spec, conv, view, "api", tries)
        results["sqlite resume api"] = in_process(sqlite_spec, conv, "resume", "api", tries)
        if args.pg:
            from convgraph.store.postgres import PostgresStore

            schema = f"views_bench_{os.getpid()}"
            store = PostgresStore(args.pg, schema=schema)
            try:
                t = time.perf_counter()
                with Replica(store, SigningKey.generate()) as r:
                    pg_conv = build(r, args.steps)
                console.print(f"PostgreSQL: written in {time.perf_counter() - t:.0f} s")
                pg_spec = {"kind": "pg", "dsn": args.pg, "schema": schema}
                for view in ("log", "transcript"):
                    results[f"postgres {view} api"] = in_process(pg_spec, pg_conv, view, "api", tries)
                results["postgres resume api"] = in_process(pg_spec, pg_conv, "resume", "api", tries)
            finally:
                import psycopg

                with psycopg.connect(args.pg, autocommit=True) as c:
                    c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    results["load_end"] = os.getloadavg()[0]
    table = Table(title=f"--last {LAST} on {results['records']:,} records (median of {tries})")
    columns = ("view", "first output ms", "done ms", "peak RSS MiB", "lines", "import ms", "open ms",
               "warm ms")
    for col in columns:
        table.add_column(col, justify="right" if col != "view" else "left")
    for name, row in results.items():
        if isinstance(row, dict) and "first_ms" in row:
            table.add_row(name, f"{row['first_ms']:.1f}", f"{row['last_ms']:.1f}",
                          f"{row['peak_rss_mib']:.0f}", str(row["lines"]),
                          f"{row['import_ms']:.0f}" if "import_ms" in row else "",
                          f"{row['open_ms']:.1f}" if "open_ms" in row else "",
                          f"{row['warm_ms']:.2f}" if "warm_ms" in row else "")
    console.print(table)
    for view in ("log", "transcript", "resume"):
        pg, lite = results.get(f"postgres {view} api"), results[f"sqlite {view} api"]
        if pg:
            ratio = pg["first_ms"] / lite["first_ms"]
            console.print(f"{view}: PostgreSQL / SQLite, first output: {ratio:.2f}x")
    console.print(f"load average {results['load_start']:.2f} at start, {results['load_end']:.2f} at end")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
