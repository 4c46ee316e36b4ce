"""Sync between real replicas in one process: full validation on every record that moves."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path

from convgraph import Draft, ManualClock, Replica, SigningKey, transcript_bytes
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import sign_record
from convgraph.sync.initiator import synchronize
from convgraph.sync.local import sync_replicas
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.reconcile import Outcome
from convgraph.sync.responder import Responder
from convgraph.sync.witness_hooks import witness_of

_salt = itertools.count()


def salts() -> bytes:
    return next(_salt).to_bytes(8, "big")


def chat(r: Replica, conv: str, n: int, who: str) -> None:
    for i in range(n):
        r.say(conv, "user" if i % 2 else "assistant", f"{who} {i}")


def test_two_replicas_converge_to_identical_transcripts(tmp_path: Path) -> None:
    clock = ManualClock()
    a, b = Replica.open(tmp_path / "a", clock=clock), Replica.in_memory(clock=clock)
    chat(a, "c", 30, "a")
    sync_replicas(a, b, salts=salts)
    chat(a, "c", 5, "a")
    chat(b, "c", 7, "b")
    chat(b, "other", 3, "b")
    report = sync_replicas(a, b, salts=salts)
    assert report.converged and report.sessions == 1
    for conv in ("c", "other"):
        assert [x.cid for x in a.records(conv)] == [x.cid for x in b.records(conv)]
        assert transcript_bytes(a.transcript(conv)) == transcript_bytes(b.transcript(conv))
    assert a.verify().ok and b.verify().ok
    assert report.convs["c"].accepted_here == 7 and report.convs["c"].accepted_there == 5


def test_partial_sync_moves_only_the_named_conversations() -> None:
    clock = ManualClock()
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    chat(b, "wanted", 4, "b")
    chat(b, "private", 4, "b")
    report = sync_replicas(a, b, ["wanted"], salts=salts)
    assert report.converged and a.conversations() == ["wanted"]


class _Tampering:
    """A peer that serves one record with a flipped byte: its CID no longer matches."""

    def __init__(self, inner: ReplicaPeer, victim: bytes) -> None:
        self.inner, self.victim = inner, victim

    def keys(self, conv: str):  # type: ignore[no-untyped-def]
        return self.inner.keys(conv)

    def fetch(self, digests: Sequence[bytes]) -> list[bytes | None]:
        found = self.inner.fetch(digests)
        return [d[:-1] + bytes([d[-1] ^ 1]) if d is not None and x == self.victim else d
                for x, d in zip(digests, found, strict=True)]

    def ingest(self, conv: str, records: Sequence[bytes], *, report: bool = True) -> Outcome:
        return self.inner.ingest(conv, records, report=report)

    def heads(self, conv: str) -> list[CID]:
        return self.inner.heads(conv)


def test_a_tampered_record_is_rejected_and_everything_else_arrives() -> None:
    clock = ManualClock()
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    other = SigningKey.generate()
    # two independent authors, so the tampered record has no descendants among the others
    chat(b, "c", 10, "b")
    lone = sign_record(other, conv="c", seq=1, hlc=Hlc(clock() + 5, 0), parents=[], kind="user_message",
                       payload={"content": "from elsewhere"})
    b.ingest([lone.data])
    responder = Responder(_Tampering(ReplicaPeer(b), lone.cid.digest), key=b.key, clock=b.clock)
    report = synchronize(ReplicaPeer(a), responder.receive, ["c"], salts=salts, max_sessions=2)
    conv = report.convs["c"]
    assert conv.accepted_here == 10
    assert {rule for _, rule, _ in conv.rejected_here} <= {"signature", "canonical", "decode", "schema"}
    assert conv.rejected_here and not report.converged
    assert lone.cid not in {r.cid for r in a.records("c")} and a.verify().ok


def test_a_record_smuggled_into_another_conversations_section_is_refused() -> None:
    clock = ManualClock()
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    chat(a, "mine", 3, "a")
    smuggled = a.records("mine")

    class Smuggler(ReplicaPeer):
        def fetch(self, digests: Sequence[bytes]) -> list[bytes | None]:
            return [smuggled[0].data for _ in digests]  # whatever is asked for, a record of "mine"

    chat(a, "open", 2, "a")
    answerer = Responder(ReplicaPeer(b), key=b.key, clock=b.clock)
    report = synchronize(Smuggler(a), answerer.receive, ["open"], salts=salts, max_sessions=1)
    assert "mine" not in b.conversations()
    assert {r.rule for r in report.convs["open"].rejected_there} == {"forbidden"}


def test_sync_into_a_directory_replica_survives_reopening(tmp_path: Path) -> None:
    a = Replica.open(tmp_path / "a")
    a.write_many("c", [Draft("user_message", {"content": f"m{i}"}) for i in range(200)])
    with Replica.open(tmp_path / "b") as b:
        assert sync_replicas(b, a, salts=lambda: os.urandom(8)).converged
    with Replica.open(tmp_path / "b") as b:
        assert len(b.records("c")) == 200 and b.verify().ok
    a.close()


def test_the_peer_key_cache_grows_with_its_ingests_and_sees_other_writers() -> None:
    clock = ManualClock()
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    chat(a, "c", 5, "a")
    peer = ReplicaPeer(b)
    assert len(peer.keys("c")) == 0
    outcome = peer.ingest("c", [r.data for r in a.records("c")])
    assert len(outcome.accepted) == 5
    assert list(peer.keys("c").keys) == b.store.sync_keys("c")  # grown, confirmed by the count
    peer.ingest("c", [r.data for r in a.records("c")])  # nothing new
    chat(b, "c", 2, "b")  # a write that bypasses the peer
    assert list(peer.keys("c").keys) == b.store.sync_keys("c") and len(peer.keys("c")) == 7


def test_a_third_partys_turn_landing_mid_session_waits_for_the_next_run() -> None:
    clock = ManualClock()
    a, hub, c = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    chat(a, "c", 20, "a")
    sync_replicas(c, hub, salts=salts)
    sync_replicas(a, hub, salts=salts)
    sync_replicas(c, hub, salts=salts)
    chat(a, "c", 2, "a")
    chat(c, "c", 2, "c")
    sync_replicas(c, hub, salts=salts)  # the hub holds c's turns before a's session starts
    chat(c, "c", 3, "c late")  # ...and these land between a's two messages
    responder = Responder(ReplicaPeer(hub), key=hub.key, clock=hub.clock, witness=witness_of(hub))
    calls = [0]

    def busy(message: bytes) -> bytes:
        calls[0] += 1
        if calls[0] == 2:
            assert sync_replicas(c, hub, salts=salts).converged
        return responder.receive(message, initiator=a.actor)

    report = synchronize(ReplicaPeer(a), busy, ["c"], salts=salts, witness=witness_of(a),
                         peer_key=hub.actor, clock=a.clock)
    conv = report.convs["c"]
    assert report.sessions == 1 and calls[0] == report.round_trips
    assert conv.accepted_here == 2 and conv.accepted_there == 2  # c's first turns in, a's two out
    assert {r.cid for r in a.records("c")} <= {r.cid for r in hub.records("c")}  # all of a's pushed
    assert len(hub.records("c")) - len(a.records("c")) == 3 == conv.behind
    assert not report.converged and not report.findings
    assert "3 records stored by the peer from others" in conv.statement()
    again = sync_replicas(a, hub, salts=salts)  # the next run takes them
    assert again.converged and again.convs["c"].accepted_here == 3 and a.verify().ok
