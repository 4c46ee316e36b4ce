"""Signed statements in sync (docs/integrity.md §2-§5, docs/sync.md *Message grammar*).

The responder signs one statement per reply section, after the section's records were
taken in, its clock read before its set; a receipt names exactly what the report gives as
stored. The initiator keeps a record as stored at the peer only when a receipt names it,
refuses statements that are not the peer's, drops gossip that does not verify, and hands
statements and gossip to the replica's memory through `sync.witness_hooks`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from convgraph import ManualClock, Replica
from convgraph.core.keys import SigningKey
from convgraph.errors import ProtocolError
from convgraph.integrity.statement import Statement, decode_statement, sign_statement
from convgraph.sync import wire
from convgraph.sync.initiator import synchronize
from convgraph.sync.keyset import KeySet
from convgraph.sync.local import sync_replicas
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.reconcile import Outcome, cid_of
from convgraph.sync.responder import Responder
from sync.fakes import KEY, T0, FakePeer, population, record, responder

_counter = itertools.count()


def salts() -> bytes:
    return next(_counter).to_bytes(8, "big")


def _statements(reply: bytes) -> list[Statement]:
    return [decode_statement(s.statement) for s in wire.decode(reply).sections if s.statement is not None]


def test_every_reply_section_carries_a_statement_of_the_set_after_the_message() -> None:
    b = FakePeer(population(random.Random(1), 40))
    a = FakePeer()
    first = wire.encode(wire.Message(wire.Kind.INITIATE, b"s" * 8, (
        wire.Section("c", 0, KeySet([]).fingerprint(0, 0, 16)),
        wire.Section("d", 0, KeySet([]).fingerprint(0, 0, 16)))))
    reply = wire.decode(responder(b).receive(first))
    for s in reply.sections:
        assert s.statement is not None
        st = decode_statement(s.statement)
        assert (st.conv, st.key, st.time_ms, st.stored) == (s.conv, KEY.public, T0, ())
        assert st.count == s.count == 40 and st.heads == tuple(b.heads(s.conv))
    report = synchronize(a, responder(b).receive, ["c"], salts=salts)
    assert report.converged and report.convs["c"].statements >= 1 and report.peer_key == KEY.public


def test_a_receipt_names_exactly_what_the_report_gives_as_stored() -> None:
    clock = ManualClock(T0)
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    held = a.say("c", "user", "held").data
    a.say("c", "user", "not pushed")
    orphan = a.say("c", "user", "its parent stays here")  # pushed without its parent: it waits
    b.ingest([held])
    bad = held[:-1] + bytes([held[-1] ^ 1])  # a broken signature
    push = wire.encode(wire.Message(wire.Kind.CONTINUE, b"s" * 8, (
        wire.Section("c", records=(bad, held, bad, orphan.data, orphan.data)),)))
    [section] = wire.decode(Responder(ReplicaPeer(b), key=b.key, clock=b.clock).receive(push)).sections
    fates = [e.fate for e in section.report or ()]
    assert fates == [wire.Fate.REJECTED, wire.Fate.DUPLICATE, wire.Fate.DUPLICATE, wire.Fate.QUARANTINED,
                     wire.Fate.DUPLICATE]
    assert section.statement is not None
    receipt = decode_statement(section.statement)
    # a second copy of a rejected or waiting record is reported DUPLICATE: its first entry decides
    assert receipt.stored == (cid_of(hashlib.sha256(held).digest()),)


@dataclass
class _Logged:
    """A replica peer that logs the order of ingest, set reads and head reads."""

    inner: ReplicaPeer
    log: list[str] = field(default_factory=list)

    def keys(self, conv: str) -> KeySet:
        self.log.append("keys")
        return self.inner.keys(conv)

    def heads(self, conv: str) -> Any:
        self.log.append("heads")
        return self.inner.heads(conv)

    def fetch(self, digests: Sequence[bytes]) -> list[bytes | None]:
        return self.inner.fetch(digests)

    def ingest(self, conv: str, records: Sequence[bytes], *, report: bool = True) -> Outcome:
        self.log.append("ingest")
        return self.inner.ingest(conv, records, report=report)

    def base(self, conv: str) -> Any:
        return self.inner.base(conv)

    def adopt(self, conv: str, base: Any) -> Outcome:
        return self.inner.adopt(conv, base)


def test_the_responder_reads_its_clock_after_the_ingest_and_before_its_set() -> None:
    clock = ManualClock(T0)
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    said = a.say("c", "user", "hello").data
    peer = _Logged(ReplicaPeer(b))

    def ticking() -> int:
        peer.log.append("clock")
        return clock()

    push = wire.encode(wire.Message(wire.Kind.CONTINUE, b"s" * 8, (wire.Section("c", records=(said,)),)))
    [receipt] = _statements(Responder(peer, key=b.key, clock=ticking).receive(push))
    assert peer.log[:4] == ["ingest", "clock", "keys", "heads"]
    assert receipt.stored == (cid_of(hashlib.sha256(said).digest()),) and receipt.heads == tuple(b.heads("c"))
    assert receipt.count == 1 and receipt.key == b.actor


def _rewrite(honest: Responder, change: Any) -> Any:
    """A hostile responder: each reply section's statement replaced by `change(section, statement)`."""

    def answer(message: bytes) -> bytes:
        reply = wire.decode(honest.receive(message))
        sections = tuple(dataclasses.replace(s, statement=change(s, decode_statement(s.statement)))
                         for s in reply.sections if s.statement is not None)
        return wire.encode(wire.Message(reply.kind, reply.salt, sections))

    return answer


def test_a_record_reported_stored_but_missing_from_the_receipt_is_unconfirmed() -> None:
    pushed = [record(T0 + i, b"mine %d" % i) for i in range(3)]
    a, b = FakePeer(pushed), FakePeer()

    def forgetful(s: wire.Section, st: Statement) -> bytes:
        dropped = [c for c in st.stored if c.digest != hashlib.sha256(pushed[1]).digest()]
        return sign_statement(KEY, st.conv, st.count, st.heads, st.time_ms, stored=dropped).data

    report = synchronize(a, _rewrite(responder(b), forgetful), ["c"], salts=salts, max_sessions=1)
    conv = report.convs["c"]
    assert list(conv.unconfirmed) == [hashlib.sha256(pushed[1]).digest()]
    assert conv.unconfirmed[hashlib.sha256(pushed[1]).digest()].cid == str(cid_of(hashlib.sha256(pushed[1]).digest()))
    assert hashlib.sha256(pushed[1]).digest() not in conv.stored_there
    assert not report.converged and "named by no receipt" in conv.statement()
    # an honest run after it confirms the record (here the peer had it: d = 0)
    assert synchronize(a, responder(b).receive, ["c"], salts=salts).converged


@pytest.mark.parametrize(("change", "why"), [
    (lambda s, st: sign_statement(SigningKey(bytes(32)), st.conv, st.count, st.heads, st.time_ms).data,
     "not by the peer's key"),
    (lambda s, st: sign_statement(KEY, "elsewhere", st.count, st.heads, st.time_ms).data, "a statement about"),
    (lambda s, st: st.data[:-1] + bytes([st.data[-1] ^ 1]), "statement about 'c' is invalid"),
])
def test_a_statement_that_is_not_the_peers_about_the_section_is_refused(change: Any, why: str) -> None:
    a, b = FakePeer([record(T0, b"x")]), FakePeer()
    with pytest.raises(ProtocolError, match=why):
        synchronize(a, _rewrite(responder(b), change), ["c"], salts=salts, peer_key=KEY.public)


def test_statements_of_one_run_must_all_be_by_one_key() -> None:
    a, b = FakePeer([record(T0, b"x")]), FakePeer()
    other = SigningKey(bytes(range(2, 34)))
    flip = itertools.count()

    def alternating(s: wire.Section, st: Statement) -> bytes:
        key = KEY if next(flip) % 2 == 0 else other
        return sign_statement(key, st.conv, st.count, st.heads, st.time_ms, stored=st.stored).data

    with pytest.raises(ProtocolError, match="not by the peer's key"):
        synchronize(a, _rewrite(responder(b), alternating), ["c"], salts=salts)


@dataclass
class _Memory:
    """A stand-in for the replica's memory of statements (`Witness`), recording what sync hands it."""

    held: list[Statement] = field(default_factory=list)
    sessions: list[tuple[bytes, str, list[Statement], int, int, bool]] = field(default_factory=list)
    gossiped: list[tuple[str, list[Statement]]] = field(default_factory=list)
    asked: list[tuple[str, set[bytes]]] = field(default_factory=list)
    converged: bool = True

    def observe_session(self, peer: bytes, conv: str, statements: Sequence[Statement], *, started_ms: int,
                        received_ms: int, fingerprints_matched: bool) -> Any:
        self.sessions.append((peer, conv, list(statements), started_ms, received_ms, fingerprints_matched))
        return _Verdict(converged=self.converged, reasons=[] if self.converged else ["count differs"])

    def observe_gossip(self, conv: str, statements: Sequence[Statement]) -> list[Any]:
        self.gossiped.append((conv, list(statements)))
        return []

    def gossip_for(self, conv: str, exclude: Collection[bytes]) -> list[Statement]:
        self.asked.append((conv, set(exclude)))
        return [s for s in self.held if s.conv == conv]

    def findings(self, conv: str | None = None) -> list[Any]:
        return []


@dataclass
class _Verdict:
    findings: list[Any] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    converged: bool = True
    reasons: list[str] = field(default_factory=list)


def test_sessions_hand_every_statement_and_the_gossip_to_the_memory() -> None:
    clock = ManualClock(T0)
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    a.say("c", "user", "from a")
    witness_key = SigningKey(bytes(range(3, 35)))
    seen = sign_statement(witness_key, "c", 1, a.heads("c"), T0)
    mine, theirs = _Memory(held=[seen]), _Memory()
    responder_ = Responder(ReplicaPeer(b), key=b.key, clock=b.clock, witness=theirs)
    ticks = iter(range(T0, T0 + 100, 10))
    report = synchronize(ReplicaPeer(a), lambda m: responder_.receive(m, initiator=a.actor), ["c"], salts=salts,
                         witness=mine, peer_key=b.actor, clock=lambda: next(ticks))
    assert report.converged
    [(peer, conv, statements, started, received, matched)] = mine.sessions
    assert (peer, conv, matched, started, received) == (b.actor, "c", True, T0, T0 + 10)
    assert [s.key for s in statements] == [b.actor] * len(statements) and statements[-1].count == 1
    assert mine.asked == [("c", {b.actor})]  # the peer's own statements are not gossiped to it
    assert theirs.gossiped == [("c", [seen])]  # the responder took in what the INITIATE carried
    assert theirs.asked == [("c", {a.actor, b.actor})]


def test_a_memory_that_sees_no_signed_convergence_makes_the_run_not_converge() -> None:
    clock = ManualClock(T0)
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    a.say("c", "user", "from a")
    doubting = _Memory(converged=False)
    report = synchronize(ReplicaPeer(a), Responder(ReplicaPeer(b), key=b.key, clock=b.clock).receive, ["c"],
                         salts=salts, witness=doubting, max_sessions=1)
    assert not report.converged and "statement: count differs" in report.convs["c"].statement()


def test_gossip_that_does_not_verify_is_dropped_and_counted_never_refused() -> None:
    a, b = FakePeer([record(T0, b"x")]), FakePeer()
    other = SigningKey(bytes(range(4, 36)))
    good = sign_statement(other, "c", 1, [cid_of(b"\x01" * 32)], T0)
    elsewhere = sign_statement(other, "d", 1, [cid_of(b"\x01" * 32)], T0)
    broken = good.data[:-1] + bytes([good.data[-1] ^ 1])
    honest = responder(b)

    def gossiping(message: bytes) -> bytes:
        reply = wire.decode(honest.receive(message))
        sections = tuple(dataclasses.replace(s, gossip=(good.data, broken, elsewhere.data)) for s in reply.sections)
        return wire.encode(wire.Message(reply.kind, reply.salt, sections))

    memory = _Memory()
    report = synchronize(a, gossiping, ["c"], salts=salts, witness=memory)
    assert report.converged and report.convs["c"].gossip_dropped == 2 * report.round_trips
    assert all(statements == [good] * (len(statements)) for _, statements in memory.gossiped)


def test_the_responder_keeps_only_verified_gossip_about_the_section_by_other_keys() -> None:
    b = FakePeer()
    other = SigningKey(bytes(range(5, 37)))
    good = sign_statement(other, "c", 0, [], T0)
    own = sign_statement(KEY, "c", 0, [], T0)
    broken = good.data[:-1] + bytes([good.data[-1] ^ 1])
    memory = _Memory(held=[good, own])
    first = wire.encode(wire.Message(wire.Kind.INITIATE, b"s" * 8, (
        wire.Section("c", 0, KeySet([]).fingerprint(0, 0, 16), gossip=(good.data, broken, own.data)),)))
    [section] = wire.decode(responder(b, witness=memory).receive(first, initiator=other.public)).sections
    assert memory.gossiped == [("c", [good])]
    assert section.gossip == ()  # neither the initiator's statements nor our own go back


def test_sync_replicas_signs_with_the_remote_key_and_converges_in_one_round_trip_at_d_0() -> None:
    clock = ManualClock(T0)
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    a.say("c", "user", "hello")
    assert sync_replicas(a, b, ["c"], salts=salts).converged
    again = sync_replicas(a, b, ["c"], salts=salts)
    assert again.converged and again.round_trips == 1 and again.peer_key == b.actor
    assert again.bytes_received < 600  # the summary, the tip and one statement with one head


def test_the_responder_gossips_what_it_held_before_never_the_initiators_own_gossip_back() -> None:
    other = SigningKey(bytes(range(6, 38)))
    held = sign_statement(other, "c", 0, [], T0)
    sent = sign_statement(other, "c", 0, [], T0 + 1)  # newer: the memory's latest once taken in

    class Remembering(_Memory):
        def observe_gossip(self, conv: str, statements: Sequence[Statement]) -> list[Any]:
            self.held = [*statements, *self.held]
            return super().observe_gossip(conv, statements)

        def gossip_for(self, conv: str, exclude: Collection[bytes]) -> list[Statement]:
            return super().gossip_for(conv, exclude)[:1]  # the latest per key only

    memory = Remembering(held=[held])
    first = wire.encode(wire.Message(wire.Kind.INITIATE, b"s" * 8, (
        wire.Section("c", 0, KeySet([]).fingerprint(0, 0, 16), gossip=(sent.data,)),)))
    [section] = wire.decode(responder(FakePeer(), witness=memory).receive(first)).sections
    assert section.gossip == (held.data,) and memory.held[0] == sent
