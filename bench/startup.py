"""Start-up: how long `convgraph` takes to say something, against `python -c pass` in the same run
(issue 27, "Start-up").

Run from the project root:

    .venv/bin/python bench/startup.py                 # 300,001 records (built once: minutes), 9 runs
    .venv/bin/python bench/startup.py --quick         # 3,001 records, 3 runs: a smoke test
    .venv/bin/python bench/startup.py --json bench/results-startup.json
    .venv/bin/python bench/startup.py --before ../old/src   # also an older tree's, in the same rounds

Side by side, each a fresh process, in rounds (one of each per round, so a burst of load from
elsewhere lands on all of them): `python -c pass`, `python -c "import convgraph"`, `convgraph
--help`, and `convgraph log --last 50` / `transcript --last 50` on one conversation of `--steps`
agent steps (3 records each, ~1 KB of text; the replica is built once and kept under
bench/out/startup-STEPS/). `convgraph` is run as its console script runs it
(`convgraph.cli.entry:main`). For each: the wall time from spawn to the first byte on stdout
(to exit, for the two that print nothing) and the CPU time of the process (user + system, from
wait4), min and median over the runs, and the median first output over `python -c pass`'s.

The run imports convgraph from a copy of src/ taken when it starts (see `--no-snapshot`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, environment, on_snapshot

OUT = ROOT / "bench" / "out"
LAST = 50
# what the console script does (pyproject.toml: convgraph = "convgraph.cli.entry:main"); a tree
# from before cli/entry.py (to compare, with --no-snapshot and its src/ on PYTHONPATH) had cli.main's
_CONSOLE = """import sys
sys.argv[0] = "convgraph"
try:
    from convgraph.cli.entry import main
except ImportError:
    from convgraph.cli.main import main
sys.exit(main())
"""


def replica(steps: int, cache: Path = OUT) -> tuple[Path, str]:
    """The cached replica of `steps` steps (under `cache`) and its conversation, built on first use."""
    where = cache / f"startup-{steps}"
    done = where / "conv.txt"
    if done.exists():
        return where / "home", done.read_text().strip()
    from views import build  # its writer: one rooted conversation, 500 steps per transaction

    from convgraph import Replica

    where.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    with Replica.open(where / "home") as r:
        conv = build(r, steps)
    done.write_text(conv + "\n")
    print(f"built {3 * steps + 1:,} records in {time.perf_counter() - t:.0f} s under {where}", flush=True)
    return where / "home", conv


def once(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Spawn `argv`: (ms to its first byte on stdout, or to its exit; its CPU ms)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, env=env)
    assert p.stdout is not None
    assert p.stderr is not None
    first = p.stdout.read(1)
    first_ms = (time.perf_counter() - t0) * 1000
    p.stdout.read()
    errors = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {p.returncode}: {errors.decode(errors='replace')}")
    if not first:  # printed nothing: the first output is the exit
        first_ms = (time.perf_counter() - t0) * 1000
    return first_ms, (usage.ru_utime + usage.ru_stime) * 1000


def cases(home: Path, conv: str) -> dict[str, list[str]]:
    py = sys.executable
    cli = [py, "-c", _CONSOLE]
    where = ["--home", str(home), "--no-pager"]
    return {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import convgraph'": [py, "-c", "import convgraph"],
        "convgraph --help": [*cli, "--help"],
        f"convgraph log --last {LAST}": [*cli, *where, "log", "--conv", conv, "--last", str(LAST)],
        f"convgraph transcript --last {LAST}": [*cli, *where, "transcript", "--conv", conv,
                                                "--last", str(LAST)],
    }


def measure(runs: int, home: Path, conv: str, before: Path | None) -> dict[str, dict[str, Any]]:
    todo: dict[str, tuple[list[str], dict[str, str] | None]] = {
        name: (argv, None) for name, argv in cases(home, conv).items()}
    if before is not None:  # the same commands on another src/, in the same rounds
        env = {**os.environ, "PYTHONPATH": str(before)}
        todo |= {f"before: {name}": (argv, env) for name, argv in cases(home, conv).items()
                 if name != "python -c pass"}
    for argv, env in todo.values():  # once each, untimed: the page cache and .pyc files are warm
        once(argv, env)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in todo}
    for _ in range(runs):
        for name, (argv, env) in todo.items():
            samples[name].append(once(argv, env))
    floor = statistics.median(f for f, _ in samples["python -c pass"])
    return {name: {"first_ms_min": min(f for f, _ in s),
                   "first_ms_median": statistics.median(f for f, _ in s),
                   "cpu_ms_min": min(c for _, c in s), "cpu_ms_median": statistics.median(c for _, c in s),
                   "x_python": statistics.median(f for f, _ in s) / floor, "samples": s}
            for name, s in samples.items()}


def run(argv: Sequence[str]) -> int:
    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000, help="agent steps (3 records each)")
    parser.add_argument("--runs", type=int, default=9, help="rounds of measurement")
    parser.add_argument("--quick", action="store_true", help="1,000 steps, 3 runs")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--cache", type=Path, default=OUT, help="where the replica is built and kept")
    parser.add_argument("--no-snapshot", action="store_true", help="import src/ as it is, not a copy")
    parser.add_argument("--before", type=Path, default=None,
                        help="also time the same commands importing convgraph from this src/ (to compare)")
    args = parser.parse_args(list(argv))
    steps, runs = (1_000, 3) if args.quick else (args.steps, args.runs)
    console = Console()
    home, conv = replica(steps, args.cache)
    load_start = os.getloadavg()[0]
    results = measure(runs, home, conv, args.before)
    load_end = os.getloadavg()[0]
    table = Table(title=f"start-up, {3 * steps + 1:,} records, {runs} runs "
                        f"(load {load_start:.2f} -> {load_end:.2f})")
    for col in ("command", "first output ms (min / median)", "CPU ms (min / median)", "x python -c pass"):
        table.add_column(col, justify="left" if col == "command" else "right")
    for name, r in results.items():
        table.add_row(name, f"{r['first_ms_min']:.0f} / {r['first_ms_median']:.0f}",
                      f"{r['cpu_ms_min']:.0f} / {r['cpu_ms_median']:.0f}", f"{r['x_python']:.1f}")
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps({"records": 3 * steps + 1, "runs": runs, "load_start": load_start,
                                         "load_end": load_end, "env": environment(["click", "rich", "cbrrr"]),
                                         "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(on_snapshot(__file__, run, None))
