"""Witness benchmark: how long a witness takes to cosign a checkpoint that extends the one it
cosigned last by 1,000 records (docs/integrity.md §7.4; target < 200 ms).

Run from the project root:

    .venv/bin/python bench/witness.py [--base 1000] [--step 1000] [--runs 7] [--tmp DIR]

One legacy conversation: `--base` turns (about 200 characters each) and a checkpoint, then
`--step` more turns and a second checkpoint, written once by one client. Each run copies it
into a fresh SQLite witness (not timed), has the witness cosign the first checkpoint, then
times the cosignature of the second: in process (`Cosigner.cosign`, what the route runs in
its worker thread: the §7.2 check over every record of the checkpoint's causal past, the
extension walk, the cosignature and the fsynced record of it) and over HTTP (a signed
`POST /v1/witness/{conv}/cosign` to uvicorn on 127.0.0.1). Prints the median of each.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import uvicorn

from convgraph import Config, Replica
from convgraph.core.keys import SigningKey, actor_text
from convgraph.core.record import Record
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.server.witness import Cosigner, cosigner_for
from convgraph.sync.http import HttpRemote

CONV = "bench-witness"
TEXT = "the replica signs every record and the witness cosigns what extends what it cosigned " * 2


def _history(base: int, step: int) -> tuple[SigningKey, list[bytes], Record, Record]:
    key = SigningKey.generate()
    client = Replica.in_memory(key, config=Config(legacy_writes=True))
    for i in range(base):
        client.say(CONV, "user" if i % 2 else "assistant", f"{i} {TEXT}")
    first = client.checkpoint(CONV)
    for i in range(step):
        client.say(CONV, "user" if i % 2 else "assistant", f"{base + i} {TEXT}")
    second = client.checkpoint(CONV)
    return key, [r.data for r in client.records(CONV)], first, second


class _Live:
    """uvicorn on a free port of 127.0.0.1 in a thread."""

    def __init__(self, app: object) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _witness(where: Path, records: list[bytes]) -> tuple[Replica, Cosigner]:
    replica = Replica.open(where)
    replica.ingest(records)
    cosigner = cosigner_for(where, replica.store, replica.key, name=None, clock_s=lambda: int(time.time()))
    return replica, cosigner


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base", type=int, default=1000)
    parser.add_argument("--step", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tmp", type=Path, default=None)
    args = parser.parse_args(argv)
    key, records, first, second = _history(args.base, args.step)
    local, remote = [], []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for run in range(args.runs):
            replica, cosigner = _witness(Path(tmp) / f"local{run}", records)
            cosigner.cosign(CONV, first.cid)
            start = time.perf_counter()
            cosigner.cosign(CONV, second.cid)
            local.append(time.perf_counter() - start)
            replica.close()

            replica, cosigner = _witness(Path(tmp) / f"http{run}", records)
            access = Access.from_rules([f"{actor_text(key.public)}=*"])
            live = _Live(create_app(replica, ServerConfig(access=access), cosigner=cosigner))
            try:
                with HttpRemote(live.url, key) as client:
                    client.cosign(CONV, first.cid)
                    start = time.perf_counter()
                    client.cosign(CONV, second.cid)
                    remote.append(time.perf_counter() - start)
            finally:
                live.close()
                replica.close()
    total = args.base + args.step + 2
    print(f"witness cosign, checkpoint extending the last by {args.step} records ({total} in its past), "
          f"median of {args.runs} runs:")
    print(f"  in process (Cosigner.cosign): {statistics.median(local) * 1000:7.1f} ms "
          f"(min {min(local) * 1000:.1f}, max {max(local) * 1000:.1f})")
    print(f"  over HTTP (POST .../cosign):  {statistics.median(remote) * 1000:7.1f} ms "
          f"(min {min(remote) * 1000:.1f}, max {max(remote) * 1000:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
