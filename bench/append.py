"""Append, ingest, read and memory benchmark: convgraph's `Replica` against a bare floor.

Run from the project root:

    .venv/bin/python bench/append.py            # full run (~8 minutes on 2 cores)
    .venv/bin/python bench/append.py --quick    # smoke test (reduced sizes, ~1 minute)

The *floor* is the same work done by a bare loop without convgraph's layers: build the
record map, encode it with cbrrr, Ed25519-sign it with PyNaCl, re-encode it with the
signature, sha256 it for the CID, and insert it into a SQLite file that has exactly the
replica's tables and indexes (it is created by `SqliteStore` itself) under the same
pragmas (WAL, `synchronous` as labelled, foreign keys off, `BEGIN IMMEDIATE`), keeping the
`heads` table right once per transaction. The ingest floor decodes, re-encodes and
compares, rebuilds the signed bytes, verifies the signature, hashes and inserts the same
way. The replica rows are measured on identical inputs. Floor and replica alternate over
several rounds (fresh stores each round); the table shows medians, and each ratio is the
median of the per-round ratios, so a burst of load from other processes hits both sides.

The two 1,000,000-record phases each run in a fresh child process (so its peak RSS is its
own), fed in batches of 1000 by a generator process through a bounded queue: neither the
benchmark nor the replica ever holds the whole set.

The run imports convgraph from a copy of src/ taken when it starts (see `--no-snapshot`),
so concurrent edits cannot change the code under test halfway through.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import multiprocessing as mp
import os
import queue
import random
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cbrrr
import nacl.bindings
from _common import (
    WORDS,
    environment,
    machine_busy_s,
    ok_mark,
    on_snapshot,
    own_cpu_s,
    status_kib,
    tree_digest,
)
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import convgraph
from convgraph import SIGNING_DOMAIN, Config, Draft, Replica, SqliteStore, decode_record
from convgraph.core.keys import SigningKey
from convgraph.core.rooted import conv_id
from convgraph.store.sqlite import Synchronous


def _default_sync() -> Synchronous:
    default = inspect.signature(Replica.open).parameters["synchronous"].default
    return "FULL" if default == "FULL" else "NORMAL"


DEFAULT_SYNC: Synchronous = _default_sync()  # what `Replica.open` uses unless told otherwise
# the figures are of the version-1 write path into a legacy conversation, comparable across runs;
# a rooted conversation differs by one genesis record
LEGACY = Config(legacy_writes=True)
DOMAIN = b"convgraph/record/v1\n"  # the floor's own copy; checked against convgraph's below
PFX = b"\x01\x71\x12\x20"  # CIDv1, dag-cbor, sha2-256, 32 bytes
BATCH = 1000
CONV = "bench"
INSERT = (
    "INSERT OR IGNORE INTO records (cid, conv, actor, seq, wall, counter, parents, data)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


@dataclass(frozen=True)
class Sizes:
    """How many records each phase handles (per round, for the repeated phases)."""

    n: int  # batched append / ingest, floor and replica
    single_full: int  # one transaction per record, synchronous=FULL
    single_normal: int  # one transaction per record, synchronous=NORMAL
    big: int  # the memory / read phases (run once each)
    big_convs: int  # conversations in the spread-out big phase
    reads: int  # calls timed per read measurement
    rounds: int  # floor and replica alternate this many times; medians are reported


FULL_SIZES = Sizes(
    n=50_000, single_full=3_000, single_normal=10_000, big=1_000_000, big_convs=100, reads=500, rounds=3
)
QUICK_SIZES = Sizes(
    n=10_000, single_full=1_000, single_normal=3_000, big=100_000, big_convs=10, reads=200, rounds=2
)
# checks that every phase runs (tests/bench/test_smoke.py), in seconds: its figures mean nothing
SMOKE_SIZES = Sizes(n=2_000, single_full=50, single_normal=100, big=2_000, big_convs=2, reads=10, rounds=1)


# --------------------------------------------------------------------------- inputs


def payload_pools(seed: int = 7, size: int = 256) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Deterministic user and agent payloads with 200-500 bytes of text content each."""
    rng = random.Random(seed)

    def text() -> str:
        target = rng.randint(200, 500)
        words: list[str] = []
        length = 0
        while length < target:
            word = rng.choice(WORDS)
            words.append(word)
            length += len(word) + 1
        return " ".join(words)[:target].rstrip() + "."

    users = [{"role": "user", "content": text()} for _ in range(size)]
    agents = [
        {"role": "assistant", "content": text(), "model": "claude-sonnet-4-5", "stop_reason": "end_turn"}
        for _ in range(size)
    ]
    return users, agents


def turn_items(count: int) -> list[tuple[str, dict[str, Any]]]:
    """`count` (kind, payload) pairs alternating user and agent turns."""
    users, agents = payload_pools()
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(count):
        if i % 2 == 0:
            out.append(("user_message", users[(i // 2) % len(users)]))
        else:
            out.append(("agent_message", agents[(i // 2) % len(agents)]))
    return out


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------- measuring

@dataclass
class Sample:
    """One timed run: wall seconds, our CPU seconds, and what everyone else used meanwhile."""

    wall: float
    cpu: float
    others: float  # cores busy with other processes on average during the run


def measure(fn: Callable[..., object], *args: Any) -> Sample:
    """Run `fn(*args)` once and time it."""
    busy, cpu, start = machine_busy_s(), own_cpu_s(), time.perf_counter()
    fn(*args)
    wall = time.perf_counter() - start
    cpu = own_cpu_s() - cpu
    busy = machine_busy_s() - busy
    return Sample(wall, cpu, max(0.0, (busy - cpu) / wall))


# --------------------------------------------------------------------------- floor


def open_floor_db(path: Path, synchronous: Synchronous) -> sqlite3.Connection:
    """A SQLite file with the replica's exact schema, opened with the replica's pragmas."""
    SqliteStore(path, synchronous=synchronous).close()
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute("PRAGMA foreign_keys=OFF")
    return db


def bare_commits(db: sqlite3.Connection, count: int, tick: Callable[[int], None]) -> None:
    """The durability ceiling: `count` transactions of one tiny row each, nothing else."""
    db.execute("CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, x BLOB)")
    for i in range(1, count + 1):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO bare (x) VALUES (?)", (b"x",))
        db.execute("COMMIT")
        if i % 100 == 0:
            tick(100)


def floor_append(
    db: sqlite3.Connection,
    items: Sequence[tuple[str, dict[str, Any]]],
    batch: int,
    tick: Callable[[int], None],
) -> None:
    """Author a chain of records the bare way, `batch` per transaction."""
    pk, sk = nacl.bindings.crypto_sign_seed_keypair(os.urandom(32))
    sign, encode, sha256, cid_t = nacl.bindings.crypto_sign, cbrrr.encode_dag_cbor, hashlib.sha256, cbrrr.CID
    seq, wall, counter, done = 0, 0, 0, 0
    prev: bytes | None = None
    head: bytes | None = None
    for lo in range(0, len(items), batch):
        rows = []
        db.execute("BEGIN IMMEDIATE")
        for kind, payload in items[lo : lo + batch]:
            now = time.time_ns() // 1_000_000
            if now > wall:
                wall, counter = now, 0
            else:
                counter += 1
            seq += 1
            m = {
                "conv": CONV, "actor": pk, "seq": seq, "hlc": [wall, counter],
                "parents": [] if prev is None else [cid_t(prev)], "kind": kind, "payload": payload,
                "refs": [],
            }  # fmt: skip
            m["sig"] = sign(DOMAIN + encode(m), sk)[:64]
            data = encode(m)
            cid = PFX + sha256(data).digest()
            rows.append((cid, CONV, pk, seq, wall, counter, prev or b"", data))
            prev = cid
        db.executemany(INSERT, rows)
        if head is not None:
            db.execute("DELETE FROM heads WHERE conv = ? AND cid = ?", (CONV, head))
        db.execute("INSERT INTO heads VALUES (?, ?)", (CONV, prev))
        head = prev
        db.execute("COMMIT")
        done += len(rows)
        if done % 100 == 0 or batch > 1:
            tick(100 if batch == 1 else len(rows))


def floor_ingest(db: sqlite3.Connection, datas: Sequence[bytes], tick: Callable[[int], None]) -> None:
    """Verify and store foreign record bytes the bare way, 1000 per transaction."""
    decode, encode, sha256 = cbrrr.decode_dag_cbor, cbrrr.encode_dag_cbor, hashlib.sha256
    sign_open = nacl.bindings.crypto_sign_open
    for lo in range(0, len(datas), BATCH):
        rows = []
        named: set[tuple[str, bytes]] = set()
        db.execute("BEGIN IMMEDIATE")
        for data in datas[lo : lo + BATCH]:
            cid = PFX + sha256(data).digest()
            v = decode(data)
            if encode(v) != data:
                raise ValueError("non-canonical")
            sig = v.pop("sig")
            sign_open(sig + DOMAIN + encode(v), v["actor"])  # raises BadSignatureError
            conv = v["conv"]
            parents = [p.cid_bytes for p in v["parents"]]
            named.update((conv, p) for p in parents)
            hlc = v["hlc"]
            rows.append((cid, conv, v["actor"], v["seq"], hlc[0], hlc[1], b"".join(parents), data))
        db.executemany(INSERT, rows)
        db.executemany("DELETE FROM heads WHERE conv = ? AND cid = ?", list(named))
        fresh = [(r[1], r[0]) for r in rows if (r[1], r[0]) not in named]
        db.executemany("INSERT OR IGNORE INTO heads VALUES (?, ?)", fresh)
        db.execute("COMMIT")
        tick(len(rows))


def check_floor_records(db: sqlite3.Connection, count: int = 50) -> None:
    """The floor's bytes must be records convgraph accepts: proof it did the same work."""
    for (data,) in db.execute("SELECT data FROM records ORDER BY id LIMIT ?", (count,)):
        decode_record(data)


# --------------------------------------------------------------------------- replica


def replica_write_many(r: Replica, drafts: Sequence[Draft], tick: Callable[[int], None]) -> None:
    for lo in range(0, len(drafts), BATCH):
        chunk = drafts[lo : lo + BATCH]
        r.write_many(CONV, chunk)
        tick(len(chunk))


def replica_write_each(
    r: Replica, items: Sequence[tuple[str, dict[str, Any]]], tick: Callable[[int], None]
) -> None:
    for i, (kind, payload) in enumerate(items, 1):
        r.write(CONV, kind, payload)
        if i % 100 == 0:
            tick(100)


def replica_ingest(r: Replica, datas: Sequence[bytes], tick: Callable[[int], None]) -> None:
    for lo in range(0, len(datas), BATCH):
        chunk = datas[lo : lo + BATCH]
        report = r.ingest(chunk)
        if len(report.accepted) != len(chunk):
            raise RuntimeError(f"ingest accepted {len(report.accepted)}/{len(chunk)}: {report.rejected[:3]}")
        tick(len(chunk))


def rooted_datas(where: Path, drafts: Sequence[Draft], synchronous: Synchronous) -> list[bytes]:
    """The same turns in a rooted conversation, written by a member the owner granted `write`,
    after 50 grants and 10 revocations of others: what authority-on ingest has to judge."""
    owner = Replica.open(where / "rooted-owner", synchronous=synchronous)
    writer = Replica.open(where / "rooted-writer", synchronous=synchronous)
    nonce = bytes(range(16))
    conv = conv_id(owner.actor, nonce)
    owner.write(conv, "genesis", {"nonce": nonce})
    others = [SigningKey(bytes([i + 1]) * 32).public for i in range(50)]
    for i, key in enumerate(others):
        owner.write(conv, "grant", {"grantee": key, "rights": ["read", "write"]})
        if i % 5 == 0:
            owner.write(conv, "revocation", {"grantee": key, "rights": ["write"]})
    owner.write(conv, "grant", {"grantee": writer.actor, "rights": ["read", "write"]})
    writer.ingest([data for _, data in owner.store.iter_all()])
    for lo in range(0, len(drafts), BATCH):
        writer.write_many(conv, drafts[lo : lo + BATCH])
    datas = [data for _, data in writer.store.iter_all()]
    owner.close()
    writer.close()
    return datas


# --------------------------------------------------------------------------- big phases (child processes)


def conv_name(i: int, convs: int) -> str:
    return CONV if convs == 1 else f"conv-{i:04d}"


def generate(n: int, convs: int, out: Any) -> None:
    """Stream `n` valid signed records in batches of 1000 onto `out`, then `None`.

    Two actors (a user device and an agent) alternate in each conversation; conversations
    are interleaved round-robin; every record names the previous record of its
    conversation and its author's previous record; wall clocks lie in the recent past.
    """
    seeds = [hashlib.sha256(b"bench-actor-%d" % i).digest() for i in range(2)]
    keys = [nacl.bindings.crypto_sign_seed_keypair(seed) for seed in seeds]
    users, agents = payload_pools()
    sign, encode, sha256, cid_t = nacl.bindings.crypto_sign, cbrrr.encode_dag_cbor, hashlib.sha256, cbrrr.CID
    base = now_ms() - n - 600_000
    last: list[bytes | None] = [None] * convs
    own: list[list[bytes | None]] = [[None, None] for _ in range(convs)]
    seqs = [[0, 0] for _ in range(convs)]
    counts = [0] * convs
    batch: list[bytes] = []
    for i in range(n):
        c = i % convs
        who = counts[c] % 2
        pk, sk = keys[who]
        payload = users[(i // 2) % len(users)] if who == 0 else agents[(i // 2) % len(agents)]
        parents = sorted({p for p in (last[c], own[c][who]) if p is not None})
        seqs[c][who] += 1
        m = {
            "conv": conv_name(c, convs), "actor": pk, "seq": seqs[c][who], "hlc": [base + i, 0],
            "parents": [cid_t(p) for p in parents], "kind": "user_message" if who == 0 else "agent_message",
            "payload": payload, "refs": [],
        }  # fmt: skip
        m["sig"] = sign(DOMAIN + encode(m), sk)[:64]
        data = encode(m)
        cid = PFX + sha256(data).digest()
        last[c] = own[c][who] = cid
        counts[c] += 1
        batch.append(data)
        if len(batch) == BATCH:
            out.put(batch)
            batch = []
    if batch:
        out.put(batch)
    out.put(None)


def vmrss_kib() -> int:
    return status_kib("VmRSS")


def time_calls(fn: Callable[[], object], calls: int) -> dict[str, float]:
    """Wall median / p95 / min and CPU median, in ms, of `calls` warm calls (after 5 warm-ups)."""
    for _ in range(5):
        fn()
    walls, cpus = [], []
    for _ in range(calls):
        c, t = time.process_time_ns(), time.perf_counter_ns()
        fn()
        walls.append((time.perf_counter_ns() - t) / 1e6)
        cpus.append((time.process_time_ns() - c) / 1e6)
    walls.sort()
    return {
        "median_ms": statistics.median(walls), "p95_ms": walls[int(0.95 * (len(walls) - 1))],
        "min_ms": walls[0], "cpu_median_ms": statistics.median(cpus),
    }  # fmt: skip


def big_worker(n: int, convs: int, home: str, reads: int, report: Any) -> None:
    """Ingest `n` streamed records into a fresh replica, sampling RSS; then time reads."""
    try:
        ctx = mp.get_context("spawn")
        feed = ctx.Queue(maxsize=4)
        gen = ctx.Process(target=generate, args=(n, convs, feed), daemon=True)
        gen.start()
        replica = Replica.open(home, synchronous=DEFAULT_SYNC)
        rss = [(0, vmrss_kib())]
        step = max(BATCH, n // 10)
        done, waited, ingesting = 0, 0.0, 0.0
        start = time.perf_counter()
        while True:
            t = time.perf_counter()
            batch = feed.get()
            waited += time.perf_counter() - t
            if batch is None:
                break
            t = time.perf_counter()
            result = replica.ingest(batch)
            ingesting += time.perf_counter() - t
            if len(result.accepted) != len(batch):
                raise RuntimeError(f"accepted {len(result.accepted)}/{len(batch)}: {result.rejected[:3]}")
            done += len(batch)
            del batch, result
            if done % step == 0:
                rss.append((done, vmrss_kib()))
            report.put(("progress", done))
        wall = time.perf_counter() - start
        gen.join()
        # ru_maxrss keeps the pre-exec high-water mark of the process spawn forked from (the
        # parent's RSS), so VmHWM, the high-water mark of this address space, is the peak.
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        hwm = status_kib("VmHWM")
        conv = conv_name(convs // 2, convs)
        held = replica.store.count(conv)
        t = time.perf_counter_ns()
        first = replica.records(conv, last=200)
        first_ms = (time.perf_counter_ns() - t) / 1e6
        if len(first) != 200 or replica.heads(conv) != [first[-1].cid]:
            raise RuntimeError("last-200 read returned the wrong records")
        busy, cpu = machine_busy_s(), time.process_time()
        via_replica = time_calls(lambda: replica.records(conv, last=200), reads)
        via_store = time_calls(lambda: replica.store.records(conv, 200), reads)
        busy, cpu = machine_busy_s() - busy, time.process_time() - cpu
        replica.close()
        db_bytes = sum(p.stat().st_size for p in Path(home).glob("replica.sqlite*"))
        report.put(("result", {
            "n": done, "convs": convs, "wall_s": wall, "ingest_s": ingesting, "waited_s": waited,
            "rate": done / ingesting, "rss_kib": rss, "maxrss_kib": peak, "hwm_kib": hwm, "read_conv": conv,
            "read_conv_records": held, "first_read_ms": first_ms, "replica_read": via_replica,
            "store_read": via_store, "read_others_cpu_s": max(0.0, busy - cpu), "db_bytes": db_bytes,
        }))  # fmt: skip
    except BaseException:
        report.put(("error", traceback.format_exc()))
        raise


def run_big(progress: Progress, label: str, n: int, convs: int, home: Path, reads: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    report = ctx.Queue()
    task = progress.add_task(label, total=n)
    result: dict[str, Any] = {}

    def go() -> None:
        proc = ctx.Process(target=big_worker, args=(n, convs, str(home), reads, report))
        proc.start()
        while not result:
            try:
                what, value = report.get(timeout=1.0)
            except queue.Empty:
                if not proc.is_alive():
                    raise RuntimeError(f"{label}: worker died (exit {proc.exitcode})") from None
                continue
            if what == "progress":
                progress.update(task, completed=value)
            elif what == "result":
                result.update(value)
            else:
                raise RuntimeError(f"{label}: worker failed:\n{value}")
        proc.join()

    sample = measure(go)
    result["others"] = sample.others  # includes the generator's core: see the README
    result["cpu_s"] = sample.cpu
    return result


# --------------------------------------------------------------------------- orchestration


@dataclass
class Row:
    """One line of the results table: one path of one phase, over all rounds."""

    phase: str
    path: str
    n: int  # records per round
    samples: list[Sample]
    floor: Row | None = None  # the row this one is compared against
    target: str = ""

    def rates(self) -> list[float]:
        return [self.n / s.wall for s in self.samples]

    @property
    def rate(self) -> float:
        return statistics.median(self.rates())

    @property
    def ratio(self) -> float | None:
        """Median over rounds of (this rate / floor rate in the same round)."""
        if self.floor is None:
            return None
        return statistics.median(a / b for a, b in zip(self.rates(), self.floor.rates(), strict=True))

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase, "path": self.path, "n_per_round": self.n, "rounds": len(self.samples),
            "rate_median": self.rate, "rates": self.rates(), "ratio_to_floor": self.ratio,
            "samples": [asdict(s) for s in self.samples], "target": self.target,
        }  # fmt: skip


def run_rounds(progress: Progress, sizes: Sizes, tmp: Path) -> list[Row]:
    """The repeated phases: floor and replica alternate, `sizes.rounds` times, fresh stores each."""
    items = turn_items(max(sizes.n, sizes.single_normal, sizes.single_full))
    drafts = [Draft(kind, payload) for kind, payload in items[: sizes.n]]
    rounds = sizes.rounds
    n = sizes.n
    tasks: dict[str, Any] = {}

    def tick(label: str, per_round: int) -> Callable[[int], None]:
        if label not in tasks:
            tasks[label] = progress.add_task(label, total=per_round * rounds)
        task = tasks[label]
        return lambda k: progress.advance(task, k)

    def row(phase: str, path: str, count: int, floor: Row | None = None, target: str = "") -> Row:
        return Row(phase, path, count, [], floor, target)

    d = DEFAULT_SYNC
    batched_floor = row(f"append, 1000 records/txn ({d})", "floor", n)
    batched = row(
        f"append, 1000 records/txn ({d})", "Replica.write_many", n, batched_floor, ">= 70% of floor"
    )
    each: list[Row] = []
    modes: tuple[tuple[Synchronous, int], ...] = (
        ("FULL", sizes.single_full),
        ("NORMAL", sizes.single_normal),
    )
    for sync, count in modes:
        phase = f"append, 1 record/txn ({sync}{', the default' if sync == d else ''})"
        bare = row(phase, "bare commit, tiny row (ceiling)", count)
        floor = row(phase, "floor", count)
        target = ">= 5,000/s" if sync == d else f"(info: {sync})"
        each += [bare, floor, row(phase, "Replica.write", count, floor, target)]
    ingest_floor = row(f"ingest verified, 1000/call ({d})", "floor", n)
    ingest = row(f"ingest verified, 1000/call ({d})", "Replica.ingest", n, ingest_floor, ">= 70% of floor")
    (tmp / "rooted").mkdir()
    rooted = rooted_datas(tmp / "rooted", drafts, d)
    phase = f"ingest verified, rooted: authority on ({d})"
    ingest_rooted = row(phase, "Replica.ingest, vs authority off", len(rooted), ingest,
                        ">= 85% of authority off")
    # the same samples again, against the bare floor
    rooted_vs_floor = Row(phase, "Replica.ingest, vs floor", len(rooted), ingest_rooted.samples, ingest_floor,
                          ">= 70% of floor")

    for rnd in range(rounds):
        where = tmp / f"round-{rnd}"
        where.mkdir()
        db = open_floor_db(where / "floor-batch.sqlite", d)
        batched_floor.samples.append(
            measure(floor_append, db, items[:n], BATCH, tick("floor append, batched", n))
        )
        check_floor_records(db)
        db.close()
        writer = Replica.open(where / "write-many", synchronous=d, config=LEGACY)
        batched.samples.append(measure(replica_write_many, writer, drafts, tick("Replica.write_many", n)))
        datas = [data for _, data in writer.store.iter_all()]
        writer.close()

        for i, (sync, _) in enumerate(modes):
            bare, floor, replica_row = each[3 * i : 3 * i + 3]
            count = floor.n
            db = open_floor_db(where / f"bare-{sync}.sqlite", sync)
            bare.samples.append(measure(bare_commits, db, count, tick(f"bare commit, {sync}", count)))
            db.close()
            db = open_floor_db(where / f"floor-each-{sync}.sqlite", sync)
            ticker = tick(f"floor append, 1/txn, {sync}", count)
            floor.samples.append(measure(floor_append, db, items[:count], 1, ticker))
            check_floor_records(db)
            db.close()
            r = Replica.open(where / f"write-each-{sync}", synchronous=sync, config=LEGACY)
            ticker = tick(f"Replica.write, {sync}", count)
            replica_row.samples.append(measure(replica_write_each, r, items[:count], ticker))
            r.close()

        db = open_floor_db(where / "floor-ingest.sqlite", d)
        ingest_floor.samples.append(measure(floor_ingest, db, datas, tick("floor ingest", n)))
        db.close()
        r = Replica.open(where / "ingest", synchronous=d)
        ingest.samples.append(measure(replica_ingest, r, datas, tick("Replica.ingest", n)))
        r.close()
        r = Replica.open(where / "ingest-rooted", synchronous=d)
        ticker = tick("Replica.ingest, rooted", len(rooted))
        ingest_rooted.samples.append(measure(replica_ingest, r, rooted, ticker))
        r.close()
        del datas
        shutil.rmtree(where, ignore_errors=True)
    return [batched_floor, batched, *each, ingest_floor, ingest, ingest_rooted, rooted_vs_floor]


def main(argv: Sequence[str] | None = None) -> int:
    return on_snapshot(__file__, run, argv)


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="reduced sizes, for smoke-testing")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs, in seconds")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--tmp", type=Path, help="parent directory for the scratch stores (default: $TMPDIR)")
    parser.add_argument(
        "--no-snapshot", action="store_true", help="import src/ live instead of from a copy taken at start"
    )
    parser.add_argument("--skip-big", action="store_true", help="skip the two big ingest/read/memory phases")
    args = parser.parse_args(argv)
    if DOMAIN != SIGNING_DOMAIN:
        raise SystemExit("the floor's signing domain differs from convgraph's")
    sizes = SMOKE_SIZES if args.smoke else QUICK_SIZES if args.quick else FULL_SIZES
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    console = Console(width=None if sys.stdout.isatty() else 170)
    env = environment(("cbrrr", "pynacl"))
    env["convgraph_imported_from"] = str(Path(convgraph.__file__).parent)
    env["convgraph_src_sha256"] = tree_digest(Path(convgraph.__file__).parent)
    env["replica_open_default_synchronous"] = DEFAULT_SYNC
    console.print(f"[bold]convgraph append/ingest benchmark[/] ({mode}): {env}")
    console.print(f"sizes: {sizes}")
    tmp = Path(tempfile.mkdtemp(prefix="convgraph-bench-", dir=args.tmp))
    big: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    try:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console) as progress:
            rows = run_rounds(progress, sizes, tmp)
            if not args.skip_big:
                big["one"] = run_big(
                    progress, f"Replica.ingest {sizes.big:,} streamed (1 conversation)", sizes.big, 1,
                    tmp / "big-one", sizes.reads,
                )  # fmt: skip
                big["many"] = run_big(
                    progress, f"Replica.ingest {sizes.big:,} streamed ({sizes.big_convs} conversations)",
                    sizes.big, sizes.big_convs, tmp / "big-many", sizes.reads,
                )  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - started
    env["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    verdicts = render(console, rows, big, sizes)
    console.print(
        f"total time {elapsed:.0f} s; load average at start {env['loadavg_start']}, "
        f"at end {env['loadavg_end']}"
    )
    if args.json:
        doc = {
            "env": env, "quick": args.quick, "sizes": asdict(sizes), "elapsed_s": elapsed,
            "rows": [r.to_json() for r in rows], "big": big, "targets": verdicts,
        }  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


def _flat(rss: Sequence[Sequence[int]]) -> tuple[bool, float]:
    """Flat: from the 10% sample on, RSS grows by at most max(16 MiB, 10%)."""
    tail = [kib for done, kib in rss if done > 0]
    if len(tail) < 2:
        return True, 0.0
    growth = (max(tail) - tail[0]) / 1024
    return growth <= max(16.0, 0.10 * tail[0] / 1024), growth


def render(
    console: Console, rows: list[Row], big: dict[str, dict[str, Any]], sizes: Sizes
) -> list[dict[str, Any]]:
    verdicts: list[dict[str, Any]] = []
    table = Table(title=f"Throughput, records/s (median of {sizes.rounds} rounds; higher is better)")
    right = {"N/round", "records/s", "min-max", "µs/rec", "cpu", "others", "floor rec/s", "vs floor"}
    heads = ("phase", "path", "N/round", "records/s", "min-max", "µs/rec", "cpu", "others", "floor rec/s",
             "vs floor", "target", "")  # fmt: skip
    for col in heads:
        table.add_column(col, justify="right" if col in right else "left")
    for r in rows:
        rates = r.rates()
        cpu = statistics.median(s.cpu / s.wall for s in r.samples)
        others = statistics.median(s.others for s in r.samples)
        verdict = ""
        if r.target.startswith((">= 70%", ">= 85%")) and r.ratio is not None:
            met = r.ratio >= (0.70 if r.target.startswith(">= 70%") else 0.85)
            verdicts.append(
                {"target": f"{r.path} ({r.phase}) {r.target}", "value": f"{r.ratio:.0%}", "met": met}
            )
            verdict = ok_mark(met)
        elif r.target == ">= 5,000/s":
            met = r.rate >= 5000
            verdicts.append(
                {"target": f"{r.path} ({r.phase}) {r.target}", "value": f"{r.rate:,.0f}/s", "met": met}
            )
            verdict = ok_mark(met)
        table.add_row(
            r.phase, r.path, f"{r.n:,}", f"{r.rate:,.0f}", f"{min(rates):,.0f}-{max(rates):,.0f}",
            f"{1e6 / r.rate:.1f}", f"{cpu:.0%}", f"{others:.2f}",
            f"{r.floor.rate:,.0f}" if r.floor else "", f"{r.ratio:.0%}" if r.ratio is not None else "",
            r.target, verdict,
        )  # fmt: skip
    for b in big.values():
        phase = f"ingest {b['n']:,} streamed, {b['convs']} conv ({DEFAULT_SYNC})"
        table.add_row(
            phase, "Replica.ingest", f"{b['n']:,}", f"{b['rate']:,.0f}", "", f"{1e6 / b['rate']:.1f}", "",
            f"{b['others']:.2f}*", "", "", "(info)", "",
        )  # fmt: skip
    console.print(table)
    console.print(
        "cpu = this process's CPU time / wall time; others = cores busy with other processes meanwhile "
        "(* includes the record generator, ~1 core)."
    )
    if big:
        verdicts += render_big(console, big, sizes)
    summary = Table(title="Targets")
    for col in ("target", "measured", ""):
        summary.add_column(col)
    for v in verdicts:
        summary.add_row(v["target"], v["value"], ok_mark(v["met"]))
    console.print(summary)
    return verdicts


def render_big(console: Console, big: dict[str, dict[str, Any]], sizes: Sizes) -> list[dict[str, Any]]:
    verdicts: list[dict[str, Any]] = []
    reads = Table(title=f"Last 200 records of one conversation, warm: {sizes.reads} calls (ms)")
    for col in ("store", "conversation (records)", "call", "median", "p95", "min", "CPU median", "first call",
                "target", ""):  # fmt: skip
        reads.add_column(col)
    for b in big.values():
        where = f"{b['n']:,} records, {b['convs']} conv"
        calls = (
            ("Replica.records(conv, last=200)", "replica_read"),
            ("store.records(conv, 200)", "store_read"),
        )
        for call, key in calls:
            t = b[key]
            met = t["median_ms"] < 2.0
            value = f"{t['median_ms']:.3f} ms (CPU {t['cpu_median_ms']:.3f} ms)"
            verdicts.append({"target": f"{call} among {where}: median < 2 ms", "value": value, "met": met})
            reads.add_row(
                where, f"{b['read_conv']} ({b['read_conv_records']:,})", call, f"{t['median_ms']:.3f}",
                f"{t['p95_ms']:.3f}", f"{t['min_ms']:.3f}", f"{t['cpu_median_ms']:.3f}",
                f"{b['first_read_ms']:.3f}" if key == "replica_read" else "", "< 2 ms", ok_mark(met),
            )  # fmt: skip
    console.print(reads)

    mem = Table(title="Memory of the ingesting process (MiB)")
    heads = ("run", "RSS after k records ingested", "peak (VmHWM)", "ru_maxrss†", "growth after 10%", "flat?")
    for col in heads:
        mem.add_column(col)
    for b in big.values():
        flat, growth = _flat(b["rss_kib"])
        samples = ", ".join(f"{done // 1000}k: {kib / 1024:.0f}" for done, kib in b["rss_kib"])
        where = f"{b['n']:,} records, {b['convs']} conv"
        verdicts.append(
            {"target": f"memory flat while ingesting {where}", "value": f"+{growth:.1f} MiB", "met": flat}
        )
        mem.add_row(
            where,
            samples,
            f"{b['hwm_kib'] / 1024:.0f}",
            f"{b['maxrss_kib'] / 1024:.0f}",
            f"+{growth:.1f}",
            ok_mark(flat),
        )
    console.print(mem)
    console.print(
        "† ru_maxrss survives exec: for a spawned child it includes the parent's RSS at fork time; "
        "VmHWM is this process's own peak."
    )
    for b in big.values():
        console.print(
            f"  {b['n']:,} records / {b['convs']} conv: ingest {b['ingest_s']:.1f} s, "
            f"waited on the generator {b['waited_s']:.1f} s, wall {b['wall_s']:.1f} s, "
            f"database {b['db_bytes'] / 2**20:.0f} MiB; "
            f"other processes used {b['read_others_cpu_s']:.1f} CPU s during the read timings"
        )
    return verdicts


if __name__ == "__main__":
    sys.exit(main())
