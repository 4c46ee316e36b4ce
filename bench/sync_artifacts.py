"""Sync bytes for a conversation with artifacts, against the bytes of what had to move.

Run from the project root:

    .venv/bin/python bench/sync_artifacts.py [--records 200] [--artifacts 20] [--json PATH]

One conversation of `--records` signed turns (about 1 KB of text each) and `--artifacts`
artifacts of mixed sizes (from 0 bytes to about 3 MB, random bytes, so nothing compresses),
each named by one of the records. Two SQLite replicas in scratch directories, in-process over
a transport that counts every message's bytes both ways and the round trips; the
responder's budget is the protocol's 4 MiB. Cases:

* **pull**: the client (the initiator) holds nothing, the server everything;
* **push**: the client holds everything, the server nothing;
* **artifacts only**: both hold the records, the client none of the artifacts (a replica
  that synced before the artifacts arrived, or whose earlier sync was cut).

The target (issue 14) is at most 1.1x the records' and artifacts' own bytes when the peer
lacks them. After each run the receiving side must hold every artifact byte-identical and
miss none, else the row says FAIL. Takes a few seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from convgraph import Config, Replica
from convgraph.core.cid import CID
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.responder import Responder

CONV = "bench"


def _sizes(rng: random.Random, n: int) -> list[int]:
    """Mixed sizes: the edges of one block, a few chunks, up to about 3 MB."""
    fixed = [0, 1, 262_143, 262_144, 262_145, 3_000_000]
    return (fixed + [rng.randrange(1, 3_000_000) for _ in range(max(0, n - len(fixed)))])[:n]


Artifacts = list[tuple[CID, bytes]]


def _build(path: Path, records: int, artifacts: int, seed: int) -> tuple[Replica, Artifacts, int]:
    rng = random.Random(seed)
    r = Replica.open(path, config=Config(legacy_writes=True))
    blobs = [rng.randbytes(n) for n in _sizes(rng, artifacts)]
    cids = [r.put(b) for b in blobs]
    every = max(1, records // max(1, artifacts))
    for i in range(records):
        refs = [cids[i // every]] if i % every == 0 and i // every < len(cids) else []
        words = ["code", "review", "patch", "the", "a", "diff", "test"]
        text = " ".join(rng.choice(words) for _ in range(170))
        r.write(CONV, "user_message", {"content": text[:1000]}, refs=refs)
    record_bytes = sum(len(d) for _, d in r.store.records(CONV))
    return r, list(zip(cids, blobs, strict=True)), record_bytes


def _run(client: Replica, server: Replica) -> tuple[int, int, int, float]:
    responder = Responder(ReplicaPeer(server), key=server.key, clock=server.clock)
    sent = received = 0

    def send(message: bytes) -> bytes:
        nonlocal sent, received
        reply = responder.receive(message)
        sent, received = sent + len(message), received + len(reply)
        return reply

    start = time.perf_counter()
    report = synchronize(ReplicaPeer(client), send, [CONV], salts=lambda: random.randbytes(8))
    return sent, received, report.round_trips, time.perf_counter() - start


def _case(name: str, tmp: Path, args: argparse.Namespace, setup: Callable[[Replica, Replica], None],
          pull: bool) -> dict[str, object]:
    full, artifacts, record_bytes = _build(tmp / f"{name}-full", args.records, args.artifacts, args.seed)
    empty = Replica.open(tmp / f"{name}-empty", config=Config(legacy_writes=True))
    setup(full, empty)
    moved_records = record_bytes if empty.store.count(CONV) == 0 else 0
    client, server = (empty, full) if pull else (full, empty)
    sent, received, trips, seconds = _run(client, server)
    ok = empty.missing_artifacts(CONV) == [] and all(empty.get_artifact(c) == b for c, b in artifacts)
    artifact_bytes = sum(len(b) for _, b in artifacts)
    payload = moved_records + artifact_bytes
    full.close()
    empty.close()
    return {"case": name, "records_bytes": moved_records, "artifact_bytes": artifact_bytes,
            "sent": sent, "received": received, "round_trips": trips, "ratio": (sent + received) / payload,
            "seconds": round(seconds, 3), "ok": ok}


def _records_only(full: Replica, empty: Replica) -> None:
    empty.ingest([d for _, d in full.store.records(CONV)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--artifacts", type=int, default=20)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="convgraph-bench-artifacts-"))
    try:
        rows = [_case("pull", tmp, args, lambda _f, _e: None, pull=True),
                _case("push", tmp, args, lambda _f, _e: None, pull=False),
                _case("artifacts only", tmp, args, _records_only, pull=True)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.records} records, {args.artifacts} artifacts ({rows[0]['artifact_bytes']:,} bytes)")
    print(f"{'case':16} {'records B':>10} {'artifacts B':>12} {'sent':>10} {'received':>10} "
          f"{'trips':>5} {'ratio':>7} {'s':>6}  ok")
    for r in rows:
        print(f"{r['case']:16} {r['records_bytes']:>10,} {r['artifact_bytes']:>12,} {r['sent']:>10,} "
              f"{r['received']:>10,} {r['round_trips']:>5} {r['ratio']:>6.4f}x {r['seconds']:>6}  "
              f"{'ok' if r['ok'] else 'FAIL'}")
    if args.json:
        args.json.write_text(json.dumps({"records": args.records, "artifacts": args.artifacts, "rows": rows},
                                        indent=2) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
