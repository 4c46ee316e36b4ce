"""Sync benchmark: convgraph's range-based reconciliation against two baselines, side by side.

Run from the project root:

    .venv/bin/python bench/sync.py [--quick] [--json bench/results-sync.json]

    --quick          n = 10,000 and d in {0, 1, 10, 1,000} (about a minute)
    --json PATH      also write the raw figures
    --tmp DIR        parent directory for the scratch replicas (default: $TMPDIR)
    --rebuild        regenerate the cached dataset under bench/out/ even if present
    --cache DIR      cache datasets here instead of bench/out/
    --smoke          n = 300 and d in {0, 1, 10}: checks that it runs, in seconds

Budget, on the 2-core box this was written on (with other work running): the full run
takes about 6 minutes (generating the 100,000-record dataset the first time, 20 s of it;
"send everything" is most of the rest, 9-17 s a case), `--quick` about 30 s. Scratch
space: three copies of a ~130 MB replica at a time.

One conversation of n records (n = 100,000; `--quick` 10,000) of about 1.2 KB each
(`user_message` / `agent_message` with 900-1100 characters of pseudo-random text), written
by 4 actors (2 devices, 2 agents) taking turns at random. Each actor writes from its own
view: before a write it catches up with everything written so far with probability 1/4
(its record then names every current head, a merge), else it extends its own chain (its
record names only its previous one), so the DAG has up to 4 concurrent branches and
frequent merges. The history is generated once with `sign_record` and cached under
`bench/out/` (keyed by the parameters and a digest of the code that encodes and stores
records); every case copies it.

The d records that differ, and why these shapes:

* **tail (newest)**: the most common case, a replica that was offline for a while. The
  client holds the first n - d records, the server all n. The difference is a suffix of
  the canonical order, which the protocol's opening message (tip and tail probes) is
  built to find without bisecting.
* **tail, split**: both sides wrote while apart. Both hold the first n - d records; from
  there actors {0, 2} write ceil(d/2) records only the client holds and actors {1, 3}
  floor(d/2) only the server holds, concurrently (interleaved wall times).
* **scattered**: differences spread over the whole key range, the worst case for a
  protocol that splits ranges. A "late" device (an extra actor) wrote d records, each a
  child of a random older record of the main history (and of its own previous record,
  as the seq chain needs), with a wall time just after that parent; nobody else has seen
  them. The client lacks them. Dropping random records of the main history instead
  would drop their descendants too, far more than d, and leave no valid replica.
* **scattered, split**: two late devices, one known only to the client (ceil(d/2)
  records), one only to the server (floor(d/2)).

Both sides always stay valid replicas (no record without its parents), and the union is
n records in every case. d = 0 is one case shared by every shape.

Protocols, each between two `Replica.open` directories on SQLite files (fresh copies per
case and protocol), in-process over a transport that counts every message's bytes each
way and the round trips, with full verification (`Replica.ingest`) of the records that
move:

* **ours**: `synchronize(ReplicaPeer(client), Responder(ReplicaPeer(server), key=…,
  clock=…).receive, [conv])`.
* **naive heads walk**: the client sends its heads (CIDs), the server replies with its
  own and asks for the client's heads it lacks; then each side asks for the CIDs it lacks,
  one DAG level per round trip (the parents of what just arrived that it still lacks),
  both directions riding the same round trips, until neither lacks anything. Records are
  ingested at the end, each side in one call. Bytes: 36 per CID, the record bytes, a
  varint length per record and list.
* **send everything**: each side sends all its records in one round trip. The receiver
  hashes each and drops those it holds (bytes with a known CID are a known record), then
  ingests the rest: the duplicates cost bytes and hashing, not signature checks.

Per case: round trips, bytes client->server and server->client, their sum over the bytes
of the d missing records, and wall time split into ingest (`Replica.ingest`: decode,
verify, causality, store) and protocol (everything else: key sets, messages, reads).
After each run both sides' `store.sync_keys(conv)` must be equal and hold n keys, with
nothing left in quarantine; otherwise the row says FAIL.

The run imports convgraph from a copy of src/ taken when it starts (see `--no-snapshot`),
so concurrent edits cannot change the code under test halfway through.

`--idle` measures d = 0 alone at 1k, 10k and 100k records, beside `--baseline-src`'s code in
the same run (bench/sync_idle.py).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import pickle
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _common import ROOT, WORDS, environment, machine_busy_s, ok_mark, on_snapshot, own_cpu_s, tree_digest
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from convgraph import CID, Hlc, Record, Replica, SigningKey, SqliteStore, sign_record
from convgraph.core import codec
from convgraph.core import hlc as hlc_
from convgraph.core.keys import save_key
from convgraph.core.record import load_trusted
from convgraph.replica.home import KEY_FILE
from convgraph.store.rows import WriteSet
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.reconcile import Outcome
from convgraph.sync.responder import Responder
from convgraph.sync.varint import uvarint

_DISTS = ("cbrrr", "pynacl")
SEED = 20261203
CONV = "bench-sync"
T0 = 1_700_000_000_000  # the history's first wall time (ms), safely in the past
MAIN_ACTORS = (0, 1, 2, 3)  # 0, 1 devices (user turns); 2, 3 agents (assistant turns)
LATE_CLIENT, LATE_SERVER = 4, 5  # the late devices of the scattered shapes
SYNC_P = 0.25  # chance that an actor catches up with every head before it writes
CACHE_FORMAT = 1
BATCH = 1000
PROTOCOLS = ("ours", "naive heads walk", "send everything")


@dataclass(frozen=True)
class Sizes:
    n: int
    ds: tuple[int, ...]


FULL_SIZES = Sizes(n=100_000, ds=(0, 1, 10, 1000, 10_000))
QUICK_SIZES = Sizes(n=10_000, ds=(0, 1, 10, 1000))
# checks that every case runs (tests/bench/test_smoke.py), in seconds: its figures mean nothing
SMOKE_SIZES = Sizes(n=300, ds=(0, 1, 10))
CACHE = ROOT / "bench" / "out"
CONFIGS = (
    ("tail", "client lacks d", "tail (newest): the client lacks the newest d records"),
    ("tail", "split", "tail (newest), split: ceil(d/2) only on the client, floor(d/2) only on the server"),
    ("scattered", "client lacks d", "scattered: the client lacks d records of a late device"),
    ("scattered", "split", "scattered, split: a late device on each side, ceil(d/2) / floor(d/2)"),
)


# --------------------------------------------------------------------------- the dataset


def actor_key(i: int) -> SigningKey:
    return SigningKey(hashlib.sha256(f"convgraph bench/sync actor {i}".encode()).digest())


def _text(rng: random.Random, low: int = 900, high: int = 1100) -> str:
    target = rng.randint(low, high)
    return " ".join(rng.choices(WORDS, k=high // 3))[:target].rstrip() + "."


def turn(rng: random.Random, actor: int) -> tuple[str, dict[str, Any]]:
    if actor in (2, 3):
        return "agent_message", {
            "conversation_id": CONV, "role": "assistant", "content": _text(rng), "model": "claude-sonnet-4-5",
        }  # fmt: skip
    return "user_message", {"conversation_id": CONV, "role": "user", "content": _text(rng)}


@dataclass(frozen=True)
class Meta:
    """What continuations need of a main-history record."""

    cid: CID
    actor: int
    seq: int
    hlc: Hlc
    parents: tuple[CID, ...]


class Writers:
    """Actors writing one conversation, each from its own view (caught up now and then)."""

    def __init__(
        self, actors: Sequence[int], rng: random.Random, *, wall: int = T0, heads: Iterable[CID] = (),
        last: dict[int, tuple[CID, int, Hlc]] | None = None, hlcs: dict[CID, Hlc] | None = None,
    ) -> None:
        self.actors, self.rng, self.wall = list(actors), rng, wall
        self.keys = {a: actor_key(a) for a in self.actors}
        self.index = {k.public: a for a, k in self.keys.items()}
        self.heads: set[CID] = set(heads)  # the heads of everything these writers wrote or started from
        self.view = {a: set(self.heads) for a in self.actors}  # what each actor has seen: it extends these
        self.last = dict(last or {})  # actor -> (cid, seq, hlc) of its previous record
        self.hlcs = hlcs if hlcs is not None else {}  # cid -> hlc, for every possible parent
        self.merges = 0

    def write(self) -> Record:
        rng = self.rng
        actor = rng.choice(self.actors)
        if rng.random() < SYNC_P:
            self.view[actor] = set(self.heads)
        parents = set(self.view[actor])
        prev = self.last.get(actor)
        if prev is not None:
            parents.add(prev[0])
        self.merges += len(parents) > 1
        self.wall += rng.randint(0, 30)
        stamp = hlc_.after_all(prev[2] if prev else hlc_.ZERO, [self.hlcs[p] for p in parents], self.wall)
        kind, payload = turn(rng, actor)
        seq = prev[1] + 1 if prev else 1
        rec = sign_record(self.keys[actor], conv=CONV, seq=seq, hlc=stamp, parents=parents, kind=kind,
                          payload=payload)  # fmt: skip
        self.heads.difference_update(parents)
        self.heads.add(rec.cid)
        self.view[actor] = {rec.cid}
        self.last[actor] = (rec.cid, seq, stamp)
        self.hlcs[rec.cid] = stamp
        return rec


def late_device(actor: int, anchors: Sequence[Meta], count: int, rng: random.Random) -> list[Record]:
    """`count` records of a device nobody has seen: each a child of a random older record."""
    key, out = actor_key(actor), list[Record]()
    prev: Record | None = None
    for p in sorted(rng.sample(range(len(anchors)), count)):
        anchor = anchors[p]
        parents = {anchor.cid} | ({prev.cid} if prev else set())
        now = anchor.hlc.wall_ms + rng.randint(1, 30)
        stamp = hlc_.after_all(prev.hlc if prev else hlc_.ZERO, [anchor.hlc], now)
        kind, payload = turn(rng, actor)
        prev = sign_record(key, conv=CONV, seq=len(out) + 1, hlc=stamp, parents=parents, kind=kind,
                           payload=payload)  # fmt: skip
        out.append(prev)
    return out


@dataclass
class Dataset:
    """The main history: `base/` holds its first n - dmax records, `tail` the rest's bytes."""

    home: Path
    n: int
    dmax: int
    metas: list[Meta]
    tail: list[bytes]  # records n - dmax .. n - 1
    stats: dict[str, Any]

    @property
    def base(self) -> Path:
        return self.home / "base"


def code_digest(where: Path) -> str:
    """What the cached bytes depend on: record encoding and the SQLite store's schema."""
    h = hashlib.sha256(tree_digest(where / "core").encode())
    h.update((where / "store" / "sqlite.py").read_bytes())
    return h.hexdigest()[:12]


def dataset(sizes: Sizes, where: Path, progress: Progress, *, rebuild: bool, cache: Path = CACHE) -> Dataset:
    dmax = max(sizes.ds)
    home = cache / f"sync-n{sizes.n}-d{dmax}-s{SEED}-f{CACHE_FORMAT}-{code_digest(where)}"
    index = home / "history.pickle"
    if index.exists() and not rebuild:
        with index.open("rb") as f:
            doc = pickle.load(f)
        cached = [Meta(CID(c), a, s, Hlc(w, k), tuple(map(CID, ps))) for c, a, s, w, k, ps in doc["metas"]]
        return Dataset(home, sizes.n, dmax, cached, doc["tail"], doc["stats"])
    shutil.rmtree(home, ignore_errors=True)
    work = home.with_name(home.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    task = progress.add_task(f"generating {sizes.n:,} records (cached for later runs)", total=sizes.n)
    started = time.perf_counter()
    rng = random.Random(SEED)
    writers = Writers(MAIN_ACTORS, rng)
    replica = Replica.open(work / "base")
    metas: list[Meta] = []
    tail: list[bytes] = []
    depth: dict[CID, int] = {}
    batch: list[Record] = []
    record_bytes = payload_chars = 0
    for i in range(sizes.n):
        rec = writers.write()
        metas.append(Meta(rec.cid, writers.index[rec.actor], rec.seq, rec.hlc, rec.parents))
        depth[rec.cid] = 1 + max((depth[p] for p in rec.parents), default=0)
        record_bytes += len(rec.data)
        payload_chars += len(rec.payload["content"])
        if i < sizes.n - dmax:
            batch.append(rec)
            if len(batch) == BATCH:
                replica.store.commit(WriteSet(records=batch, fresh=True))
                batch = []
        else:
            tail.append(rec.data)
        if (i + 1) % 500 == 0:
            progress.update(task, completed=i + 1)
    if batch:
        replica.store.commit(WriteSet(records=batch, fresh=True))
    replica.close()
    (work / "base" / KEY_FILE).unlink()  # `measure` gives each side a key of its own
    stats = {
        "records": sizes.n, "actors": len(MAIN_ACTORS), "merges": writers.merges,
        "mean_record_bytes": record_bytes / sizes.n, "mean_content_chars": payload_chars / sizes.n,
        "dag_depth": max(depth.values()), "heads_at_end": len(writers.heads),
        "wall_span_s": (metas[-1].hlc.wall_ms - T0) / 1000, "generate_s": time.perf_counter() - started,
    }  # fmt: skip
    raw = [(bytes(m.cid), m.actor, m.seq, m.hlc.wall_ms, m.hlc.counter, tuple(map(bytes, m.parents)))
           for m in metas]  # fmt: skip
    with (work / "history.pickle").open("wb") as f:
        pickle.dump({"metas": raw, "tail": tail, "stats": stats}, f, protocol=pickle.HIGHEST_PROTOCOL)
    work.rename(home)
    progress.update(task, completed=sizes.n, visible=False)
    return Dataset(home, sizes.n, dmax, metas, tail, stats)


# --------------------------------------------------------------------------- the cases


@dataclass
class Case:
    shape: str
    side: str
    label: str
    d: int
    client_extra: list[Record] = field(default_factory=list)  # records only the client holds
    server_extra: list[Record] = field(default_factory=list)  # records only the server holds

    @property
    def missing_bytes(self) -> int:
        return sum(len(r.data) for r in (*self.client_extra, *self.server_extra))


def state_at(ds: Dataset, m: int) -> tuple[set[CID], dict[int, tuple[CID, int, Hlc]], dict[CID, Hlc], int]:
    """Heads, each actor's previous record, every hlc and the latest wall after `m` records."""
    heads: set[CID] = set()
    last: dict[int, tuple[CID, int, Hlc]] = {}
    hlcs: dict[CID, Hlc] = {}
    for x in ds.metas[:m]:
        heads.difference_update(x.parents)
        heads.add(x.cid)
        last[x.actor] = (x.cid, x.seq, x.hlc)
        hlcs[x.cid] = x.hlc
    return heads, last, hlcs, max(h.wall_ms for h in hlcs.values())


def make_case(ds: Dataset, shape: str, side: str, label: str, d: int) -> Case:
    """The records only one side holds; both sides also hold the main history's first n - d."""
    case = Case(shape, side, label, d)
    if d == 0:
        return case
    m, rng = ds.n - d, random.Random(f"{SEED}/{shape}/{side}/{d}")
    mine, theirs = (d + 1) // 2, d // 2  # the client's and the server's shares of a split
    if shape == "tail" and side == "split":
        heads, last, hlcs, wall = state_at(ds, m)
        for actors, out, count in (((0, 2), case.client_extra, mine), ((1, 3), case.server_extra, theirs)):
            w = Writers(actors, rng, wall=wall, heads=heads, hlcs=dict(hlcs),
                        last={a: v for a, v in last.items() if a in actors})  # fmt: skip
            out += [w.write() for _ in range(count)]
    elif shape == "tail":
        case.server_extra = [load_trusted(data, CID.of_record(data)) for data in ds.tail[ds.dmax - d :]]
    elif side == "split":
        case.client_extra = late_device(LATE_CLIENT, ds.metas[:m], mine, rng)
        case.server_extra = late_device(LATE_SERVER, ds.metas[:m], theirs, rng)
    else:
        case.server_extra = late_device(LATE_CLIENT, ds.metas[:m], d, rng)
    return case


def commit_into(home: Path, records: Sequence[Record]) -> None:
    """Store records we signed ourselves, skipping verification (setup, not measured)."""
    store = SqliteStore(home / "replica.sqlite")
    try:
        for i in range(0, len(records), BATCH):
            store.commit(WriteSet(records=list(records[i : i + BATCH]), fresh=True))
    finally:
        store.close()


def build_common(ds: Dataset, d: int, dest: Path) -> None:
    """A replica directory (no key yet) holding the main history's first n - d records."""
    shutil.copytree(ds.base, dest)
    extra = ds.tail[: ds.dmax - d]
    commit_into(dest, [load_trusted(data, CID.of_record(data)) for data in extra])


# --------------------------------------------------------------------------- the protocols


def frame(have: Sequence[bytes] = (), want: Sequence[bytes] = (), records: Sequence[bytes] = ()) -> bytes:
    """A baseline message: announced CIDs, wanted CIDs (36 bytes each) and records."""
    out = bytearray(b"\x01")
    for cids in (have, want):
        out += uvarint(len(cids))
        out += b"".join(cids)
    out += uvarint(len(records))
    for data in records:
        out += uvarint(len(data))
        out += data
    return bytes(out)


def unframe(data: bytes) -> tuple[list[bytes], list[bytes], list[bytes]]:
    pos = 1

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    lists: list[list[bytes]] = []
    for _ in range(2):
        n = varint()
        lists.append([data[pos + 36 * i : pos + 36 * (i + 1)] for i in range(n)])
        pos += 36 * n
    records = []
    for _ in range(varint()):
        size = varint()
        records.append(data[pos : pos + size])
        pos += size
    assert pos == len(data)
    return lists[0], lists[1], records


class Counted:
    """A transport that counts round trips and the bytes of every message each way."""

    def __init__(self, handler: Callable[[bytes], bytes]) -> None:
        self.handler = handler
        self.rounds = self.up = self.down = 0

    def __call__(self, message: bytes) -> bytes:
        self.rounds += 1
        self.up += len(message)
        reply = self.handler(message)
        self.down += len(reply)
        return reply


class Ingests:
    """Times every `Replica.ingest` a protocol makes (decode, verify, causality, store)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, replica: Replica, records: Sequence[bytes]) -> int:
        t = time.perf_counter()
        report = replica.ingest(records, conversations={CONV})
        self.seconds += time.perf_counter() - t
        return len(report.accepted)


class TimedPeer(ReplicaPeer):
    def __init__(self, replica: Replica, timer: Ingests) -> None:
        super().__init__(replica)
        self.timer = timer

    def ingest(self, conv: str, records: Sequence[bytes], *, report: bool = True) -> Outcome:
        t = time.perf_counter()
        try:
            return super().ingest(conv, records, report=report)
        finally:
            self.timer.seconds += time.perf_counter() - t


Run = tuple[Counted, dict[str, Any]]


def run_ours(client: Replica, server: Replica, timer: Ingests, salts: Callable[[], bytes]) -> Run:
    transport = Counted(Responder(TimedPeer(server, timer), key=server.key, clock=server.clock).receive)
    report = synchronize(TimedPeer(client, timer), transport, [CONV], salts=salts)
    conv = report.convs[CONV]
    return transport, {
        "sessions": report.sessions, "converged": report.converged,
        "to_client": conv.accepted_here, "to_server": conv.accepted_there,
        "report_matches_transport": (report.round_trips, report.bytes_sent, report.bytes_received)
        == (transport.rounds, transport.up, transport.down),
    }  # fmt: skip


class HeadsWalker:
    """One side of the naive protocol: knows what it holds, asks for what it lacks."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.received: dict[bytes, bytes] = {}  # cid -> bytes, in arrival order
        self.asked: set[bytes] = set()

    def heads(self) -> list[bytes]:
        return [bytes(c) for c in self.replica.store.heads(CONV)]

    def lacking(self, cids: Iterable[bytes]) -> list[bytes]:
        """Those of `cids` this side neither holds nor has received or asked for; now asked."""
        fresh = [c for c in dict.fromkeys(cids) if c not in self.received and c not in self.asked]
        held = {bytes(c) for c in self.replica.store.metas(CID(c) for c in fresh)}
        out = [c for c in fresh if c not in held]
        self.asked.update(out)
        return out

    def take(self, records: Sequence[bytes]) -> list[bytes]:
        """Keep the records that arrived; the next level: their parents this side lacks."""
        parents: list[bytes] = []
        for data in records:
            self.received[bytes(CID.of_record(data))] = data
            parents += [bytes(p) for p in codec.decode_trusted(data)["parents"]]
        return self.lacking(parents)

    def serve(self, cids: Sequence[bytes]) -> list[bytes]:
        found = [self.replica.store.get(CID(c)) for c in cids]
        return [data for data in found if data is not None]

    def ingest(self, timer: Ingests) -> int:
        """Everything received, in one call (deepest level first: mostly parents first)."""
        return timer(self.replica, list(reversed(self.received.values()))) if self.received else 0


def run_naive(client: Replica, server: Replica, timer: Ingests, _salts: Callable[[], bytes]) -> Run:
    me, peer = HeadsWalker(client), HeadsWalker(server)
    state = {"first": True}

    def respond(data: bytes) -> bytes:
        have, want, records = unframe(data)
        if state["first"]:
            state["first"] = False
            return frame(have=peer.heads(), want=peer.lacking(have))
        next_level = peer.take(records)
        return frame(want=next_level, records=peer.serve(want))

    transport = Counted(respond)
    have, wanted, _ = unframe(transport(frame(have=me.heads())))
    wanting = me.lacking(have)
    levels = 0
    while wanting or wanted:
        levels += 1
        _, wanted, records = unframe(transport(frame(want=wanting, records=me.serve(wanted))))
        wanting = me.take(records)
    to_client, to_server = me.ingest(timer), peer.ingest(timer)
    return transport, {"to_client": to_client, "to_server": to_server, "levels": levels}


def run_everything(client: Replica, server: Replica, timer: Ingests, _salts: Callable[[], bytes]) -> Run:
    def everything(r: Replica) -> list[bytes]:
        return [data for _, data in r.store.records(CONV)]

    def absorb(r: Replica, records: Sequence[bytes]) -> int:
        cids = [CID.of_record(data) for data in records]
        held = r.store.metas(cids)
        fresh = [data for cid, data in zip(cids, records, strict=True) if cid not in held]
        return timer(r, fresh) if fresh else 0

    moved = {"to_client": 0, "to_server": 0}

    def respond(data: bytes) -> bytes:
        mine = everything(server)  # what the server held before this exchange
        moved["to_server"] = absorb(server, unframe(data)[2])
        return frame(records=mine)

    transport = Counted(respond)
    moved["to_client"] = absorb(client, unframe(transport(frame(records=everything(client))))[2])
    return transport, moved


RUNNERS: dict[str, Callable[[Replica, Replica, Ingests, Callable[[], bytes]], Run]] = {
    "ours": run_ours, "naive heads walk": run_naive, "send everything": run_everything,
}


def check(client: Replica, server: Replica, n: int) -> str:
    """`ok`, or what is wrong: both sides must hold the same n keys, nothing in quarantine."""
    a, b = client.store.sync_keys(CONV), server.store.sync_keys(CONV)
    problems = []
    if a != b:
        sa, sb = set(a), set(b)
        problems.append(f"sets differ: {len(sa - sb):,} keys only on the client, {len(sb - sa):,} only on "
                        "the server")
    for name, keys, r in (("client", a, client), ("server", b, server)):
        if len(keys) != n:
            problems.append(f"{name} holds {len(keys):,} records, not {n:,}")
        waiting = r.store.pending_stats()[0]
        if waiting:
            problems.append(f"{name} has {waiting:,} records in quarantine")
    return "ok" if not problems else "FAIL: " + "; ".join(problems)


def measure(
    protocol: str, common: Path, case: Case, n: int, work: Path, salts: Callable[[], bytes]
) -> dict[str, Any]:
    """One protocol on fresh copies of the case's two replicas."""
    sides = {"client": case.client_extra, "server": case.server_extra}
    for name, extra in sides.items():
        shutil.copytree(common, work / name)
        commit_into(work / name, extra)
        save_key(SigningKey.generate(), work / name / KEY_FILE)  # each side its own author, as two machines
    client, server = Replica.open(work / "client"), Replica.open(work / "server")
    try:
        client.store.sync_keys(CONV)  # warm both files into the page cache alike
        server.store.sync_keys(CONV)
        timer = Ingests()
        busy, cpu, start = machine_busy_s(), own_cpu_s(), time.perf_counter()
        transport, extra_info = RUNNERS[protocol](client, server, timer, salts)
        wall = time.perf_counter() - start
        cpu = own_cpu_s() - cpu
        busy = machine_busy_s() - busy
        verdict = check(client, server, n)
        if protocol == "ours" and not extra_info["converged"]:
            verdict = ("FAIL: synchronize reported no convergence; " + verdict).removesuffix("; ok")
    finally:
        client.close()
        server.close()
        for name in sides:
            shutil.rmtree(work / name, ignore_errors=True)
    return {
        "protocol": protocol, "round_trips": transport.rounds, "up": transport.up, "down": transport.down,
        "wall_s": wall, "ingest_s": timer.seconds, "protocol_s": wall - timer.seconds, "cpu_s": cpu,
        "others": max(0.0, (busy - cpu) / wall) if wall > 0 else 0.0, "check": verdict, **extra_info,
    }  # fmt: skip


# --------------------------------------------------------------------------- orchestration


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if "--idle" in args:  # d = 0 alone, at 1k to 100k, beside a baseline (bench/sync_idle.py)
        import sync_idle

        return on_snapshot(__file__, sync_idle.run, args)
    return on_snapshot(__file__, run, argv)


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 10,000 and d up to 1,000")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs, in seconds")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--tmp", type=Path, help="where the scratch replicas go (default: $TMPDIR)")
    parser.add_argument("--rebuild", action="store_true", help="regenerate the cached dataset")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where datasets are kept (bench/out)")
    parser.add_argument(
        "--no-snapshot", action="store_true", help="import src/ live instead of from a copy taken at start"
    )
    args = parser.parse_args(argv)
    sizes = SMOKE_SIZES if args.smoke else QUICK_SIZES if args.quick else FULL_SIZES
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    console = Console(width=None if sys.stdout.isatty() else 180)
    env = environment(_DISTS)
    spec = importlib.util.find_spec("convgraph")
    where = Path(spec.origin).parent if spec and spec.origin else ROOT / "src" / "convgraph"
    env["convgraph_imported_from"] = str(where)
    env["convgraph_src_sha256"] = tree_digest(where)
    console.print(f"[bold]convgraph sync benchmark[/] ({mode}): {env}")
    console.print(f"sizes: {sizes}")
    salt_rng = random.Random(SEED)

    def salts() -> bytes:
        return salt_rng.randbytes(8)

    started = time.perf_counter()
    cases: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="convgraph-bench-sync-", dir=args.tmp))
    try:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console) as progress:
            ds = dataset(sizes, where, progress, rebuild=args.rebuild, cache=args.cache)
            ready = time.perf_counter()
            none = (("all", "no difference", "d = 0"),)
            plan = [(d, cfg) for d in sizes.ds for cfg in (none if d == 0 else CONFIGS)]
            task = progress.add_task("cases", total=len(plan) * len(PROTOCOLS))
            for d in sizes.ds:
                common = tmp / f"common-{d}"
                build_common(ds, d, common)
                for shape, side, label in (cfg for dd, cfg in plan if dd == d):
                    case = make_case(ds, shape, side, label, d)
                    row: dict[str, Any] = {
                        "shape": shape, "side": side, "label": label, "d": d, "n": ds.n,
                        "only_client": len(case.client_extra), "only_server": len(case.server_extra),
                        "missing_bytes": case.missing_bytes, "runs": {},
                    }  # fmt: skip
                    for protocol in PROTOCOLS:
                        progress.update(task, description=f"{shape}, {side}, d = {d:,}: {protocol}")
                        res = measure(protocol, common, case, ds.n, tmp, salts)
                        row["runs"][protocol] = res
                        if res["check"] != "ok":
                            say = f"{label}, d={d:,}, {protocol}: {res['check']}"
                            progress.console.print(f"[bold red]{say}[/]")
                        progress.advance(task)
                    cases.append(row)
                shutil.rmtree(common, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - started
    env["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    console.print(f"dataset: {ds.stats} (cache {ds.home})")
    verdicts = render(console, cases)
    console.print(
        f"total time {elapsed:.0f} s (dataset ready after {ready - started:.0f} s); load average at start "
        f"{env['loadavg_start']}, at end {env['loadavg_end']}"
    )
    if args.json:
        doc = {
            "env": env, "quick": args.quick, "sizes": asdict(sizes), "elapsed_s": elapsed,
            "dataset": ds.stats, "cases": cases, "targets": verdicts,
        }  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


# --------------------------------------------------------------------------- report


def size(b: float) -> str:
    if b < 10_000:
        return f"{b:,.0f} B"
    if b < 10 << 20:
        return f"{b / 1024:,.1f} KiB"
    return f"{b / 2**20:,.1f} MiB"


def render(console: Console, cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    zero = next((c for c in cases if c["d"] == 0), None)
    for shape, side, label in CONFIGS:
        rows = [c for c in cases if (c["shape"], c["side"]) == (shape, side)]
        if zero is not None:
            rows.insert(0, zero)
        table = Table(title=label)
        heads = ("d", "missing", "protocol", "round trips", "C→S", "S→C", "sent / missing", "wall ms",
                 "protocol ms", "ingest ms", "ingest %", "moved →C / →S", "check")  # fmt: skip
        for col in heads:
            table.add_column(col, justify="left" if col in ("protocol", "check") else "right")
        for c in rows:
            for i, protocol in enumerate(PROTOCOLS):
                r = c["runs"][protocol]
                sent = r["up"] + r["down"]
                ratio = f"{sent / c['missing_bytes']:,.2f}x" if c["missing_bytes"] else "—"
                name = protocol if r.get("sessions", 1) == 1 else f"{protocol} ({r['sessions']} sessions)"
                share = r["ingest_s"] / r["wall_s"] if r["wall_s"] else 0.0
                table.add_row(
                    f"{c['d']:,}" if i == 0 else "", size(c["missing_bytes"]) if i == 0 else "", name,
                    f"{r['round_trips']:,}", size(r["up"]), size(r["down"]), ratio,
                    f"{r['wall_s'] * 1000:,.1f}", f"{r['protocol_s'] * 1000:,.1f}",
                    f"{r['ingest_s'] * 1000:,.1f}",
                    f"{share:.0%}", f"{r['to_client']:,} / {r['to_server']:,}",
                    "[green]ok[/]" if r["check"] == "ok" else f"[bold red]{r['check']}[/]",
                    end_section=i == len(PROTOCOLS) - 1,
                )  # fmt: skip
        console.print(table)
    console.print(
        "missing = bytes of the records one side lacks (both sides' together). C→S, S→C = bytes of every "
        "message client to server, server to client; sent / missing = both ways over missing. ingest = "
        "time in Replica.ingest (decode, signature, causality, store); protocol = the rest of the wall "
        "time (key sets, messages, reads). d = 0 is one measurement, repeated in every table. send "
        "everything drops records it holds by hash before ingest."
    )
    others = [r["others"] for c in cases for r in c["runs"].values()]
    if others:
        console.print(
            f"others = cores busy with other processes during the timed runs (from /proc/stat): mean "
            f"{sum(others) / len(others):.2f}, max {max(others):.2f} of {os.cpu_count()}."
        )
    verdicts = targets(cases)
    summary = Table(title="Targets (ours)")
    for col in ("target", "case", "measured", ""):
        summary.add_column(col)
    for v in verdicts:
        summary.add_row(v["target"], v["case"], v["value"], ok_mark(v["met"]))
    console.print(summary)
    return verdicts


def _trips(r: dict[str, Any]) -> str:
    n, s = r["round_trips"], r.get("sessions", 1)
    return f"{n} round trip{'s' * (n != 1)}" + (f", {s} sessions" if s != 1 else "")


def targets(cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in cases:
        r = c["runs"]["ours"]
        sent, where = r["up"] + r["down"], f"{c['shape']}, {c['side']}"
        ok = r["check"] == "ok"
        if c["d"] == 0:
            out.append({
                "target": "d = 0: one round trip, under 1 KB", "case": "no difference", "d": 0,
                "value": f"{_trips(r)}, {sent:,} B", "met": ok and r["round_trips"] == 1
                and sent < 1024,
            })  # fmt: skip
        elif c["d"] == 1:
            beyond = sent - c["missing_bytes"]
            out.append({
                "target": "d = 1: at most 4 round trips, under 4 KB beyond the record", "case": where, "d": 1,
                "value": f"{_trips(r)}, {beyond:,} B beyond the record ({c['missing_bytes']:,} B)",
                "met": ok and r["round_trips"] <= 4 and beyond < 4096,
            })  # fmt: skip
        elif c["d"] >= 1000:
            ratio = sent / c["missing_bytes"]
            out.append({
                "target": f"d = {c['d']:,}: bytes sent within 1.1x of the missing records", "case": where,
                "d": c["d"],
                "value": f"{size(sent)} / {size(c['missing_bytes'])} = {ratio:.3f}x ({_trips(r)})",
                "met": ok and ratio <= 1.1,
            })  # fmt: skip
            share = r["ingest_s"] / r["wall_s"]
            out.append({
                "target": f"d = {c['d']:,}: wall time dominated by verifying (ingest > 50%)", "case": where,
                "d": c["d"],
                "value": f"ingest {r['ingest_s'] * 1000:,.0f} of {r['wall_s'] * 1000:,.0f} ms = {share:.0%}",
                "met": ok and share > 0.5,
            })  # fmt: skip
    return out


if __name__ == "__main__":
    sys.exit(main())
