"""Crash safety: a writer killed with SIGKILL at a random moment loses nothing it acknowledged.

A child process opens `Replica.open(dir)` and appends in a loop (single writes and
`write_many` batches), printing each record's CID only after the call that wrote it has
returned. The parent reads those acknowledgements, kills the child after a seeded random
number of them plus a random delay (so the kill lands anywhere in a later write, a commit
or a WAL checkpoint), reopens the replica and checks: `verify()` passes, every acknowledged
record is present, the actor's seq chain is 1..n without gaps or duplicates and each
record names its predecessor, heads are exactly the records no record names as parent, and
the replica still accepts writes. Rounds reuse one directory, so each recovery starts
from the previous one's crash.
"""

from __future__ import annotations

import itertools
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convgraph import CID, Record, Replica

CONV = "crash"
ROUNDS = 5

# argv: home, synchronous, seed, mode. Prints "ready", then one CID per line, each only
# after the write (or the write_many) that made it has returned.
CHILD = r"""
import random, sys
from convgraph import Config, Draft, Replica
home, synchronous, seed, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rng = random.Random(seed)
sizes = {"single": [1], "batches": [2, 5, 16, 40], "mixed": [1, 1, 1, 3, 8]}[mode]
# a legacy conversation, as before: a child process is not under conftest's legacy_writes
replica = Replica.open(home, synchronous=synchronous, config=Config(legacy_writes=True))
print("ready", flush=True)
for step in range(20_000):  # bounded, in case the parent never kills us
    k = rng.choice(sizes)
    if k == 1:
        recs = [replica.write("crash", "user_message", {"content": f"{seed}:{step}"})]
    else:
        drafts = [Draft("user_message", {"content": f"{seed}:{step}.{j}", "meta": {"j": j}}) for j in range(k)]
        recs = replica.write_many("crash", drafts)
    sys.stdout.write("".join(f"{r.cid}\n" for r in recs))
    sys.stdout.flush()
"""


def crash_once(home: Path, rng: random.Random, *, synchronous: str, mode: str) -> list[CID]:
    """Run a writer in `home`, SIGKILL it at a random moment; return the CIDs it acknowledged."""
    args = [sys.executable, "-c", CHILD, str(home), synchronous, str(rng.randrange(2**32)), mode]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            first = proc.stdout.readline()
            assert first == "ready\n", first + proc.stderr.read()
            acked: list[CID] = []
            target = rng.randint(1, 250)
            while len(acked) < target:
                line = proc.stdout.readline()
                assert line.endswith("\n"), f"writer died early: {proc.stderr.read()}"
                acked.append(CID.parse(line.strip()))
            time.sleep(rng.random() * 0.02)
        finally:
            proc.send_signal(signal.SIGKILL)
        rest = proc.stdout.read()  # not communicate(): it would skip what readline buffered
        err = proc.stderr.read()
    assert proc.returncode == -signal.SIGKILL, err
    acked += [CID.parse(line) for line in rest.split("\n")[:-1]]  # a cut-off last line is no ack
    return acked


def check_recovered(replica: Replica, acked: list[CID], last_run: list[CID]) -> list[Record]:
    """What a reopened replica must satisfy; `last_run` are the acks of the latest writer."""
    verified = replica.verify()
    assert verified.ok, verified.failures
    records = {r.cid: r for r in replica.iter_records()}
    assert verified.checked == len(records) == replica.store.count()
    missing = [c for c in acked if c not in records]
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[0]}"
    chain = sorted((r for r in records.values() if r.actor == replica.actor), key=lambda r: r.seq)
    assert [r.seq for r in chain] == list(range(1, len(chain) + 1)), "gap or duplicate in the seq chain"
    for prev, rec in itertools.pairwise(chain):
        assert prev.cid in rec.parents and prev.hlc < rec.hlc
    named = {p for r in records.values() for p in r.parents}
    assert replica.heads(CONV) == sorted(set(records) - named)
    assert replica.heads(CONV) == [chain[-1].cid]  # one writer: the chain's tip is the only head
    assert replica.store.equivocations() == []
    assert replica.store.pending_stats() == (0, 0)
    seqs = [records[c].seq for c in acked]
    assert seqs == sorted(set(seqs)), "acknowledgements out of chain order"
    run = [records[c].seq for c in last_run]
    assert run == list(range(run[0], run[0] + len(run))), "one writer's acknowledgements skip a seq"
    return chain


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["single", "batches", "mixed"])
def test_sigkill_loses_no_acknowledged_write(tmp_path: Path, mode: str) -> None:
    rng = random.Random(f"crash-{mode}")
    home = tmp_path / "replica"
    all_acked: list[CID] = []
    for round_ in range(ROUNDS):
        synchronous = "FULL" if round_ % 2 == 0 else "NORMAL"  # WAL + NORMAL survives a process crash too
        acked = crash_once(home, rng, synchronous=synchronous, mode=mode)
        assert acked, "the writer acknowledged nothing"
        all_acked += acked
        with Replica.open(home) as replica:
            chain = check_recovered(replica, all_acked, acked)
            assert chain[0].seq == 1 and len(chain) >= len(all_acked)
            after = replica.write(CONV, "user_message", {"content": f"after crash {round_}"})
            assert after.seq == chain[-1].seq + 1 and chain[-1].cid in after.parents
            all_acked.append(after.cid)
    with Replica.open(home) as replica:
        check_recovered(replica, all_acked, all_acked[-1:])
