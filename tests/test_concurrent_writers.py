"""Two processes on ONE SQLite replica directory at the same time.

Writers: both open `Replica.open(dir)` (so the same `actor.key`) and append N records each,
mixing single writes and `write_many` batches. SQLite's write lock (`BEGIN IMMEDIATE`)
must serialise each read-seq-then-write, so afterwards nothing is lost, the shared actor's
chain is 1..2N with no gap and no second record at any seq (no self-equivocation), and
every record names its predecessor.

Ingesters: both ingest overlapping sets of foreign records, shuffled, in batches, so
records wait in quarantine for parents the other process delivers. The end state is the
union, each record accepted exactly once across the two, nothing rejected or left waiting.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from convgraph import CID, ManualClock, Record, Replica, SigningKey

N = 300
CONV = "shared"

# argv: home, n, seed, pause. Prints "ready", waits for a line on stdin, then "<cid> <seq>" per
# record. `pause` (seconds, at most) between writes: 0 is a tight loop.
WRITER = r"""
import random, sys, time
from convgraph import Config, Draft, Replica
home, n, seed, pause = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
rng = random.Random(seed)
# a legacy conversation, as before: a child process is not under conftest's legacy_writes
replica = Replica.open(home, config=Config(legacy_writes=True))
print("ready", flush=True)
sys.stdin.readline()
written = 0
while written < n:
    k = min(n - written, rng.choice([1, 1, 1, 2, 5, 12]))
    if k == 1:
        recs = [replica.write("shared", "user_message", {"content": f"{seed}:{written}"})]
    else:
        recs = replica.write_many("shared", [
            Draft("user_message", {"content": f"{seed}:{written + j}"}) for j in range(k)])
    sys.stdout.write("".join(f"{r.cid} {r.seq}\n" for r in recs))
    sys.stdout.flush()
    written += k
    if pause:
        time.sleep(rng.random() * pause)
replica.close()
"""

# argv: home, file of hex records, seed. Prints "ready", waits, then one JSON report per batch.
INGESTER = r"""
import json, random, sys
from convgraph import Replica
home, path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
items = [bytes.fromhex(line) for line in open(path).read().split()]
rng.shuffle(items)
replica = Replica.open(home)
print("ready", flush=True)
sys.stdin.readline()
while items:
    k = rng.randint(1, 25)
    batch, items = items[:k], items[k:]
    report = replica.ingest(batch)
    print(json.dumps({
        "accepted": [str(c) for c in report.accepted],
        "rejected": [[str(r.cid), r.rule, str(r.error)] for r in report.rejected],
        "evicted": len(report.evicted),
        "quarantined": len(report.quarantined),
        "released": len(report.released),
        "duplicates": len(report.duplicates),
    }), flush=True)
replica.close()
"""


def run_together(*argvs: list[str], timeout: float = 240) -> list[str]:
    """Start the children, wait until each is ready, release them at once; their stdouts."""
    procs = [
        subprocess.Popen([sys.executable, "-c", *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for argv in argvs
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            ready = proc.stdout.readline()  # the child writes nothing more until released
            assert ready == "ready\n", ready + proc.communicate()[1]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [proc.communicate(timeout=timeout) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0 and not err, err
    return [out for out, _ in results]


def created(home: Path) -> Path:
    """Create the replica (and its key) before the children start: see the report on the key race."""
    Replica.open(home).close()
    return home


@pytest.mark.slow
@pytest.mark.parametrize(("pause", "min_switches"), [(0.0, 1), (0.01, 20)], ids=["tight", "paced"])
def test_two_writers_one_chain(tmp_path: Path, pause: float, min_switches: int) -> None:
    """`tight`: each writer loops flat out (SQLite's sleeping busy handler lets the lock holder
    keep it, so they take turns rarely); `paced`: short random pauses, so they interleave."""
    home = created(tmp_path / "replica")
    outs = run_together([WRITER, str(home), str(N), "1", str(pause)], [WRITER, str(home), str(N), "2", str(pause)])
    acks = [[(CID.parse(c), int(s)) for c, s in (line.split() for line in out.splitlines())] for out in outs]
    for mine in acks:
        assert len(mine) == N
        assert [s for _, s in mine] == sorted({s for _, s in mine}), "one writer's seqs not increasing"
    acked = {cid: seq for mine in acks for cid, seq in mine}
    assert len(acked) == 2 * N

    with Replica.open(home) as replica:
        verified = replica.verify()
        assert verified.ok, verified.failures
        records = {r.cid: r for r in replica.iter_records()}
        assert replica.store.count() == len(records) == 2 * N
        assert {cid: r.seq for cid, r in records.items()} == acked
        assert {r.actor for r in records.values()} == {replica.actor}
        by_seq = {r.seq: r for r in records.values()}
        assert sorted(by_seq) == list(range(1, 2 * N + 1)), "gap or duplicate seq: equivocation"
        for seq in range(2, 2 * N + 1):
            assert by_seq[seq - 1].cid in by_seq[seq].parents
            assert by_seq[seq - 1].hlc < by_seq[seq].hlc
        assert replica.heads(CONV) == [by_seq[2 * N].cid]
        assert replica.store.equivocations() == []
    owner = {cid: i for i, mine in enumerate(acks) for cid, _ in mine}
    switches = sum(owner[by_seq[s].cid] != owner[by_seq[s + 1].cid] for s in range(1, 2 * N))
    assert switches >= min_switches, f"the writers barely overlapped ({switches} switches): the test proved little"


def foreign_history(seed: int, n: int = 240) -> list[Record]:
    """Records by three foreign authors in two conversations, with concurrent branches and joins."""
    rng = random.Random(seed)
    clock = ManualClock()
    authors = [Replica.in_memory(SigningKey(bytes([i + 1]) * 32), clock=clock) for i in range(3)]
    history: list[Record] = []
    for step in range(n):
        clock.advance(rng.randint(0, 3))
        author = rng.choice(authors)
        if rng.random() < 0.3:
            author.ingest([r.data for r in history])
        conv = rng.choice(["f1", "f2"])
        payload: dict[str, Any] = {"content": f"{step}"}
        history.append(author.write(conv, "user_message", payload))
    return history


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_two_ingesters_overlapping_sets(tmp_path: Path, seed: int) -> None:
    history = foreign_history(seed)
    order = list(history)
    random.Random(seed).shuffle(order)
    third = len(order) // 3
    files = []
    for i, part in enumerate([order[: 2 * third], order[third:]]):
        path = tmp_path / f"part{i}.hex"
        path.write_text("\n".join(r.data.hex() for r in part))
        files.append(path)
    home = created(tmp_path / "replica")
    outs = run_together([INGESTER, str(home), str(files[0]), str(seed * 10)],
                        [INGESTER, str(home), str(files[1]), str(seed * 10 + 1)])
    reports = [json.loads(line) for out in outs for line in out.splitlines()]
    assert [r["rejected"] for r in reports if r["rejected"]] == []
    assert sum(r["evicted"] for r in reports) == 0
    accepted = Counter(c for r in reports for c in r["accepted"])
    assert accepted == Counter(str(r.cid) for r in history), "a record accepted twice, or never"
    assert sum(r["quarantined"] for r in reports) > 0, "no record waited for a parent: the test proved little"

    with Replica.open(home) as replica:
        verified = replica.verify()
        assert verified.ok, verified.failures
        stored = {r.cid for r in replica.iter_records()}
        assert stored == {r.cid for r in history}
        assert replica.store.count() == len(history)
        assert replica.store.pending_stats() == (0, 0)
        named = {p for r in history for p in r.parents}
        for conv in ("f1", "f2"):
            members = {r.cid for r in history if r.conv == conv}
            assert replica.heads(conv) == sorted(members - named)
        assert replica.store.equivocations() == []
