"""Artifacts travel with their conversation (docs/sync.md, *Artifacts*): both ways, checked,
within scope, never holding the records back."""

from __future__ import annotations

import functools
import hashlib
import itertools
import random
from collections.abc import Callable
from pathlib import Path

import dag_cbor
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multiformats import CID as MfCID
from multiformats import multihash

from convgraph import ManualClock, Replica
from convgraph.artifacts.blocks import CHUNK_SIZE, split
from convgraph.artifacts.claims import artifact_cid
from convgraph.artifacts.diff import make_unified_diff
from convgraph.core.cid import CID
from convgraph.errors import TransportError
from convgraph.sync import wire
from convgraph.sync.carfile import export_car, import_car
from convgraph.sync.initiator import synchronize
from convgraph.sync.local import sync_replicas
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.responder import Responder
from convgraph.sync.wire import Kind, Message, Section

_salt = itertools.count()
SIZES = [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 17]


def salts() -> bytes:
    return next(_salt).to_bytes(8, "big")


def expected_cid(data: bytes) -> CID:
    """The artifact CID computed from docs/format.md §17 with hashlib, and the manifest map
    encoded by the `dag_cbor` package with `multiformats` links: no convgraph code."""
    if len(data) <= CHUNK_SIZE:
        return CID(b"\x01\x55\x12\x20" + hashlib.sha256(data).digest())
    chunks = [MfCID("base32", 1, "raw", multihash.wrap(hashlib.sha256(data[i : i + CHUNK_SIZE]).digest(),
                                                        "sha2-256"))
              for i in range(0, len(data), CHUNK_SIZE)]
    manifest = dag_cbor.encode({"chunks": chunks, "size": len(data), "type": "convgraph/chunks", "v": 1})
    return CID(b"\x01\x71\x12\x20" + hashlib.sha256(manifest).digest())


def attach(r: Replica, conv: str, blobs: list[bytes]) -> list[CID]:
    cids = [r.put(b) for b in blobs]
    r.write(conv, "user_message", {"content": "see attached"}, refs=cids)
    return cids


def blobs(seed: int, sizes: list[int]) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(n) for n in sizes]


@pytest.mark.parametrize("direction", ["pull", "push"])
def test_artifacts_of_every_edge_size_arrive_byte_identical(direction: str) -> None:
    clock = ManualClock()
    holder, other = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    data = blobs(1, SIZES)
    cids = attach(holder, "c", data)
    assert cids == [expected_cid(d) for d in data]
    report = sync_replicas(other, holder, salts=salts) if direction == "pull" else sync_replicas(
        holder, other, salts=salts)
    assert report.converged
    assert [other.get_artifact(c) for c in cids] == data
    assert other.missing_artifacts("c") == [] and holder.missing_artifacts("c") == []
    conv = report.convs["c"]
    moved = conv.blocks_received if direction == "pull" else conv.blocks_sent
    assert moved == sum(len(split(d)[1]) for d in data)  # every block once: chunks and manifests
    assert not conv.missing_here and not conv.missing_there and not conv.refused_there


def test_a_second_sync_moves_no_block_and_costs_one_round_trip() -> None:
    clock = ManualClock()
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    attach(a, "c", blobs(2, [10, CHUNK_SIZE + 1]))
    sync_replicas(b, a, salts=salts)
    again = sync_replicas(b, a, salts=salts)
    assert again.converged and again.round_trips == 1
    assert again.convs["c"].blocks_received == again.convs["c"].blocks_sent == 0


def test_both_sides_bring_their_own_artifacts_in_one_run() -> None:
    clock = ManualClock()
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    mine, theirs = blobs(3, [5, 2 * CHUNK_SIZE]), blobs(4, [7, CHUNK_SIZE + 3])
    ca, cb = attach(a, "c", mine), attach(b, "c", theirs)
    report = sync_replicas(a, b, salts=salts)
    assert report.converged
    assert [b.get_artifact(c) for c in ca] == mine and [a.get_artifact(c) for c in cb] == theirs


def test_an_artifact_nobody_holds_is_reported_missing_and_the_records_converge() -> None:
    clock = ManualClock()
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    ghost = CID.of_raw(b"never stored anywhere")
    a.write("c", "user_message", {"content": "see"}, refs=[ghost])
    report = sync_replicas(b, a, salts=salts)
    conv = report.convs["c"]
    assert report.converged and b.store.count("c") == 1
    assert conv.missing_here == [ghost] and conv.missing_there == [ghost]
    assert "1 artifact blocks missing here" in conv.artifacts()
    assert report.round_trips == 2  # one ask, answered with nothing: then it stops


def _responder(r: Replica, **kw: int) -> Responder:
    return Responder(ReplicaPeer(r), key=r.key, clock=r.clock, **kw)


def _tamper(answer: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """A hostile peer: every block it sends has its first byte flipped (or one added)."""

    def send(message: bytes) -> bytes:
        reply = wire.decode(answer(message))
        sections = tuple(Section(**{**s.__dict__, "blocks": tuple(
            (c, (bytes([d[0] ^ 1]) + d[1:]) if d else b"!") for c, d in s.blocks)}) for s in reply.sections)
        return wire.encode(Message(reply.kind, reply.salt, sections, reply.version))

    return send


def test_a_tampered_block_is_refused_and_nothing_is_stored() -> None:
    clock = ManualClock()
    honest, victim = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    cids = attach(honest, "c", blobs(5, [0, 100, CHUNK_SIZE + 1]))
    report = synchronize(ReplicaPeer(victim), _tamper(_responder(honest).receive), ["c"], salts=salts)
    conv = report.convs["c"]
    assert report.converged and victim.store.count("c") == 1  # the records are not held back
    assert victim.store.has_blocks(cids) == set()
    assert {rule for _, rule, _ in conv.blocks_refused_here} == {"artifact_hash"}
    assert len(conv.blocks_refused_here) == 3 and sorted(conv.missing_here) == sorted(cids)


def test_a_peer_cannot_upload_blocks_no_record_names() -> None:
    clock = ManualClock()
    server, client = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    attach(client, "c", [b"named"])
    sync_replicas(client, server, salts=salts)
    stray = b"not named by any record"
    push = Message(Kind.CONTINUE, b"s" * 8, (Section("c", blocks=((CID.of_raw(stray), stray),)),))
    reply = wire.decode(_responder(server).receive(wire.encode(push)))
    assert not server.store.has_blocks([CID.of_raw(stray)])
    assert reply.sections[0].needs == ()  # it lacks nothing it is asked to hold


def test_a_record_pushed_as_a_block_is_refused_even_when_named() -> None:
    """A dag-cbor block must be a manifest: a record's bytes never enter the block table."""
    clock = ManualClock()
    server = Replica.in_memory(clock=clock)
    rec = server.write("other", "user_message", {"content": "private"})
    server.write("c", "user_message", {"content": "cites"}, refs=[rec.cid])
    push = Message(Kind.CONTINUE, b"s" * 8, (Section("c", blocks=((rec.cid, rec.data),)),))
    _responder(server).receive(wire.encode(push))
    assert server.store.get_block(rec.cid) is None


def test_a_want_outside_the_sections_conversation_gets_nothing() -> None:
    """Guessing a CID: the block is held, but no record of the asked conversation names it."""
    clock = ManualClock()
    server = Replica.in_memory(clock=clock)
    [secret] = attach(server, "secret", [b"the secret"])
    server.write("public", "user_message", {"content": "hello"})
    ask = Message(Kind.CONTINUE, b"s" * 8, (Section("public", needs=(secret,)),))
    reply = wire.decode(_responder(server).receive(wire.encode(ask)))
    assert reply.sections[0].blocks == ()
    ask = Message(Kind.CONTINUE, b"s" * 8, (Section("secret", needs=(secret,)),))
    assert wire.decode(_responder(server).receive(wire.encode(ask))).sections[0].blocks == (
        (secret, b"the secret"),)


def test_a_version_3_initiator_gets_a_version_3_reply_without_artifacts() -> None:
    clock = ManualClock()
    server = Replica.in_memory(clock=clock)
    attach(server, "c", [b"x"])
    old = Message(Kind.INITIATE, b"s" * 8, (Section("c", 0, reconcile_empty()),), 3)
    data = _responder(server).receive(wire.encode(old))
    assert data[0] == 3 and wire.decode(data).sections[0].needs == ()


def reconcile_empty() -> bytes:
    from convgraph.sync.keyset import KeySet
    from convgraph.sync.reconcile import summary

    return summary(KeySet([]))[1]


def test_blocks_keep_to_the_message_budget() -> None:
    clock = ManualClock()
    holder, other = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    data = blobs(6, [4 * CHUNK_SIZE])
    [cid] = attach(holder, "c", data)
    budget = CHUNK_SIZE + 1000
    sizes: list[int] = []
    responder = _responder(holder, budget=budget)

    def send(message: bytes) -> bytes:
        reply = responder.receive(message)
        sizes.append(sum(len(d) for s in wire.decode(reply).sections for _, d in s.blocks))
        return reply

    report = synchronize(ReplicaPeer(other), send, ["c"], salts=salts, budget=budget)
    assert report.converged and other.get_artifact(cid) == data[0]
    assert max(sizes) <= budget and sizes.count(CHUNK_SIZE) == 4  # one chunk a message


@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 2, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 2 * CHUNK_SIZE + 1]),
                      min_size=1, max_size=4), seed=st.integers(0, 2**32), pull=st.booleans())
def test_any_mix_of_artifacts_round_trips(sizes: list[int], seed: int, pull: bool) -> None:
    clock = ManualClock()
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    data = blobs(seed, sizes)
    cids = attach(a, "c", data)
    assert cids == [expected_cid(d) for d in data]
    run = functools.partial(sync_replicas, salts=salts)
    report = run(b, a) if pull else run(a, b)
    assert report.converged and [b.get_artifact(c) for c in cids] == data
    assert b.missing_artifacts("c") == []


@pytest.mark.parametrize("cut_at", [1, 2, 3, 4])
def test_a_transfer_cut_mid_way_is_taken_up_again_and_nothing_is_lost(cut_at: int) -> None:
    """The network fails once on the `cut_at`-th message (a lost request or a lost reply):
    the run starts a new session, and what was stored before the cut stays."""
    clock = ManualClock()
    holder, other = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    data = blobs(8, [CHUNK_SIZE * 3 + 1, 5, 0])
    cids = attach(holder, "c", data)
    responder = _responder(holder, budget=CHUNK_SIZE)
    calls = itertools.count(1)

    def flaky(message: bytes) -> bytes:
        n = next(calls)
        if n == cut_at:
            raise TransportError("request lost")
        reply = responder.receive(message)
        if n == cut_at + 3:  # a lost reply too, after the server acted on the message
            raise TransportError("reply lost")
        return reply

    report = synchronize(ReplicaPeer(other), flaky, ["c"], salts=salts, budget=CHUNK_SIZE, max_sessions=3)
    assert report.failed_sessions == 2 and report.converged
    assert [other.get_artifact(c) for c in cids] == data and other.missing_artifacts("c") == []


@settings(max_examples=30, deadline=None)
@given(layout=st.lists(st.tuples(st.sampled_from(["open", "secret", "both"]),
                                 st.sampled_from([0, 3, CHUNK_SIZE + 1])), min_size=1, max_size=5),
       asked=st.sets(st.integers(0, 40)))
def test_a_want_gets_exactly_the_blocks_in_its_conversations_scope(
    layout: list[tuple[str, int]], asked: set[int],
) -> None:
    """Whatever CIDs a peer names under `open`, it gets only blocks `open`'s records name (or
    chunks of those manifests), never one only `secret` names."""
    server = Replica.in_memory(clock=ManualClock())
    server.write("open", "user_message", {"content": "start"})
    scope: set[CID] = set()
    every: list[CID] = []
    for i, (where, size) in enumerate(layout):
        data = bytes([i]) * size + bytes([i, 1])
        cid, blocks = split(data)
        server.put(data)
        for conv in (["open", "secret"] if where == "both" else [where]):
            server.write(conv, "user_message", {"content": "f"}, refs=[cid])
        every += [c for c, _ in blocks]
        if where != "secret":
            scope |= {c for c, _ in blocks}
    wanted = tuple(sorted({every[i % len(every)] for i in asked})) or (every[0],)
    ask = Message(Kind.CONTINUE, b"s" * 8, (Section("open", needs=wanted),))
    got = {c for c, _ in wire.decode(_responder(server, budget=64 << 20).receive(wire.encode(ask))).sections[0].blocks}
    assert got == set(wanted) & scope


def test_a_forged_patch_is_found_when_its_base_arrives_by_sync(tmp_path: Path) -> None:
    """The receiver took the patch before it held the base; the base's arrival by sync (or by a
    CAR import) lets the claim be judged, and the false one becomes a finding there."""
    old, new = b"def f():\n    return 1\n", b"def f():\n    return 2\n"
    clock = ManualClock()
    author, receiver, other = (Replica.in_memory(clock=clock) for _ in range(3))
    conv = author.create("review")
    diff = make_unified_diff(old, new, "f.py")
    author.write(conv, "patch", {"base": author.put(old), "diff": diff, "result": artifact_cid(new + b"#\n")})
    receiver.ingest([d for _, d in author.store.records(conv)])  # the records first, no block
    assert receiver.findings(conv) == []
    sync_replicas(receiver, author, [conv], salts=salts)
    assert [f.kind for f in receiver.findings(conv)] == ["false_patch"]
    file = tmp_path / "r.car"
    export_car(author, file, [conv])
    other.ingest([d for _, d in author.store.records(conv)])
    import_car(other, file)
    assert [f.kind for f in other.findings(conv)] == ["false_patch"]
