"""Verified ingest in instructions, not seconds: a figure other processes cannot move.

Run from the project root (valgrind must be installed; about 4 minutes):

    .venv/bin/python bench/instructions.py              # floor, legacy and rooted ingest
    .venv/bin/python bench/instructions.py -n 3000      # a shorter steady state
    .venv/bin/python bench/instructions.py --smoke      # seconds, no valgrind: it runs, counts nothing

Each path (the bare floor of `append.py`, `Replica.ingest` into a legacy conversation, and
into a rooted one with authority on) ingests the first 1,000 and then the first 1,000 + n
of the same records under `valgrind --tool=callgrind`, each into a fresh SQLite store in a
fresh process. The difference of the two totals divided by n is the steady-state cost of a
record, start-up, imports and the store's creation cancelling out. Instruction counts repeat
exactly for the same inputs and binary however busy the machine is; they weigh a cache miss
like a register move, so they complement the wall-clock ratios of `append.py`, never
replace them.
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from append import floor_ingest, open_floor_db, replica_ingest
from profile_ingest import inputs

from convgraph import Replica

_BASE = 1000
_PATHS = ("floor", "legacy", "rooted")


def _inputs(n: int, tmp: Path) -> dict[str, list[bytes]]:
    made = inputs(n, tmp)
    return {"floor": made["legacy"], **made}


def _ingest(pickled: Path, path: str, count: int, where: Path) -> None:
    """The measured child: ingest the first `count` records of `path` into a fresh store."""
    datas = pickle.loads(pickled.read_bytes())[path][:count]
    if path == "floor":
        floor_ingest(open_floor_db(where, "NORMAL"), datas, lambda _: None)
    else:
        replica = Replica.open(where)
        replica_ingest(replica, datas, lambda _: None)
        replica.close()


def _instructions(inputs: Path, path: str, count: int, tmp: Path, *, smoke: bool = False) -> int:
    """The instructions the child ran; with `smoke`, the child runs without callgrind (about
    50x faster) and 0 is returned: that checks the script, not a figure."""
    out = tmp / f"cg-{path}-{count}.out"
    where = tmp / f"store-{path}-{count}"
    child = [sys.executable, __file__, "--child", str(inputs), path, str(count), str(where)]
    tool = [] if smoke else ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    run = subprocess.run([*tool, *child], capture_output=True, text=True,
                         env={**os.environ, "PYTHONHASHSEED": "0"}, check=False)
    if smoke:
        if run.returncode != 0:
            raise RuntimeError(f"child failed ({path}, {count}):\n{run.stderr[-2000:]}")
        return 0
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run failed ({path}, {count}):\n{run.stderr[-2000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("-n", type=int, default=4000, help="records in the steady state (default 4,000)")
    parser.add_argument("--only", action="append", choices=_PATHS, help="measure only this path")
    parser.add_argument("--smoke", action="store_true",
                        help="50 + 20 records, children without valgrind: checks that it runs, no counts")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        inputs, path, count, where = args.child
        _ingest(Path(inputs), path, int(count), Path(where))
        return 0
    base = 50 if args.smoke else _BASE
    if args.smoke:
        args.n = 20
    elif shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="convgraph-instructions-") as name:
        tmp = Path(name)
        inputs = tmp / "inputs.pickle"
        inputs.write_bytes(pickle.dumps(_inputs(base + args.n, tmp)))
        per: dict[str, float] = {}
        for path in args.only or _PATHS:
            low = _instructions(inputs, path, base, tmp, smoke=args.smoke)
            high = _instructions(inputs, path, base + args.n, tmp, smoke=args.smoke)
            if args.smoke:
                print(f"{path:>7}: ran ({base}, then {base + args.n} records; nothing counted)", flush=True)
                continue
            per[path] = (high - low) / args.n
            share = f"   floor ÷ this {per['floor'] / per[path]:6.1%}" if "floor" in per else ""
            print(f"{path:>7}: {per[path]:>11,.0f} instructions a record{share}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
