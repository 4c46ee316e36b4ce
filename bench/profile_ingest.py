"""Where verified ingest spends its time: `Replica.ingest` against the bare floor of `append.py`.

Run from the project root:

    .venv/bin/python bench/profile_ingest.py                 # timings: floor, legacy, rooted
    .venv/bin/python bench/profile_ingest.py --cprofile rooted   # plus a cProfile of one path
    .venv/bin/python bench/profile_ingest.py --pyinstrument legacy   # (pyinstrument not in the venv)

The inputs are `append.py`'s: the same turns in a legacy conversation and in a rooted one
(written by a member after 50 grants and 10 revocations), 1000 records per `ingest` call,
into a fresh SQLite replica (synchronous=NORMAL) each repeat. Times are the best of
`--repeat` runs, as µs per record of wall and of this process's CPU time (other processes
inflate the wall time), with the part spent in the garbage collector: this is for finding
costs, not for the targets, which `append.py` measures against the floor in alternating rounds.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from append import (
    LEGACY,
    floor_ingest,
    open_floor_db,
    replica_ingest,
    rooted_datas,
    turn_items,
)

from convgraph import Draft, Replica


def inputs(n: int, tmp: Path) -> dict[str, list[bytes]]:
    """The legacy and the rooted records, as `append.py` builds them."""
    drafts = [Draft(kind, payload) for kind, payload in turn_items(n)]
    writer = Replica.open(tmp / "legacy-writer", config=LEGACY)
    for lo in range(0, n, 1000):
        writer.write_many("bench", drafts[lo:lo + 1000])
    legacy = [data for _, data in writer.store.iter_all()]
    writer.close()
    (tmp / "rooted").mkdir()
    return {"legacy": legacy, "rooted": rooted_datas(tmp / "rooted", drafts, "NORMAL")}


def runner(path: str, datas: list[bytes], tmp: Path) -> Callable[[int], Callable[[], None]]:
    """`make(i)` opens a fresh store and returns the call that ingests into it."""

    def make(i: int) -> Callable[[], None]:
        where = tmp / f"{path}-{i}"
        if path == "floor":
            db = open_floor_db(where.with_suffix(".sqlite"), "NORMAL")
            return lambda: floor_ingest(db, datas, lambda _: None)
        replica = Replica.open(where)
        return lambda: replica_ingest(replica, datas, lambda _: None)

    return make


def best_of(make: Callable[[int], Callable[[], None]], repeat: int) -> tuple[float, float, float]:
    """The least wall time, the least CPU time of this process, and the least time in the collector."""
    walls, cpus, gcs = [], [], []
    for i in range(repeat):
        call = make(i)
        collecting = [0.0, 0.0]

        def timer(phase: str, _info: object, collecting: list[float] = collecting) -> None:
            if phase == "start":
                collecting[1] = time.perf_counter()
            else:
                collecting[0] += time.perf_counter() - collecting[1]

        gc.callbacks.append(timer)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            call()
        finally:
            gc.callbacks.remove(timer)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        gcs.append(collecting[0])
    return min(walls), min(cpus), min(gcs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20_000, help="turns per conversation (default 20,000)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cprofile", choices=("legacy", "rooted"), help="cProfile this path once")
    parser.add_argument("--pyinstrument", choices=("legacy", "rooted"), help="pyinstrument this path once")
    parser.add_argument("--top", type=int, default=35, help="rows of the cProfile listing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="convgraph-profile-") as name:
        tmp = Path(name)
        data = inputs(args.n, tmp)
        data["floor"] = data["legacy"]
        floor = 0.0
        for path in ("floor", "legacy", "rooted"):
            datas = data[path]
            took, cpu, collecting = best_of(runner(path, datas, tmp), args.repeat)
            per, per_cpu = 1e6 * took / len(datas), 1e6 * cpu / len(datas)
            floor = floor or per_cpu
            gc_per = 1e6 * collecting / len(datas)
            print(f"{path:>7}: {per:6.1f} µs/record wall, {per_cpu:6.1f} CPU ({floor / per_cpu:4.0%} of "
                  f"floor's CPU), of which {gc_per:4.1f} in gc  ({len(datas):,} records)")
        if args.cprofile:
            call = runner(args.cprofile, data[args.cprofile], tmp)(99)
            profile = cProfile.Profile()
            profile.runcall(call)
            pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
        if args.pyinstrument:
            from pyinstrument import Profiler

            call = runner(args.pyinstrument, data[args.pyinstrument], tmp)(98)
            profiler = Profiler(interval=0.0002)
            profiler.start()
            call()
            profiler.stop()
            print(profiler.output_text(unicode=True, color=False, show_all=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
