"""Sync with the replica's memory of statements (docs/integrity.md §4, §5), replicas end to end.

A peer that signs a state lacking a record it receipted is caught by the next session as
`withholding` (its fingerprints matched), with a bundle the verifier accepts; a split view reaches a third replica as
gossip and is caught there as `server_equivocation`.
"""

from __future__ import annotations

import dataclasses
import itertools
import shutil
from pathlib import Path
from typing import Any

from convgraph import ManualClock, Replica, SigningKey
from convgraph.integrity.evidence import verify_bundle
from convgraph.integrity.statement import Statement, decode_statement, sign_statement
from convgraph.sync import wire
from convgraph.sync.initiator import synchronize
from convgraph.sync.local import sync_replicas
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.responder import Responder

T0 = 1_700_000_000_000
_counter = itertools.count()


def salts() -> bytes:
    return next(_counter).to_bytes(8, "big")


def _lying(server: Replica, change: Any) -> Any:
    """`server` answering honestly, but signing `change(statement)` in each reply section."""
    honest = Responder(ReplicaPeer(server), key=server.key, clock=server.clock)

    def answer(message: bytes) -> bytes:
        reply = wire.decode(honest.receive(message))
        sections = tuple(dataclasses.replace(s, statement=change(decode_statement(s.statement)))
                         for s in reply.sections if s.statement is not None)
        return wire.encode(wire.Message(reply.kind, reply.salt, sections))

    return answer


def test_a_peer_that_signs_away_a_receipted_record_is_caught_with_a_bundle_that_proves_it() -> None:
    clock = ManualClock(T0)
    a, server = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    first = a.say("c", "user", "first")
    a.say("c", "user", "second")
    pushed = sync_replicas(a, server, ["c"], salts=salts)
    assert pushed.converged and not pushed.findings
    clock.advance(5_000)  # later than the slack: the next statement must extend the receipt

    def forget_second(st: Statement) -> bytes:
        return sign_statement(server.key, st.conv, 1, [first.cid], st.time_ms).data

    report = synchronize(ReplicaPeer(a), _lying(server, forget_second), ["c"], salts=salts, witness=a,
                         peer_key=server.actor, clock=a.clock, max_sessions=1)
    assert not report.converged
    [finding] = report.findings
    # its fingerprints matched ours while it signed a state without a record it receipted
    assert finding.kind == "withholding" and finding.conv == "c"
    assert verify_bundle(finding.bundle).ok
    assert [f.id for f in a.findings("c")] == [finding.id]
    again = synchronize(ReplicaPeer(a), _lying(server, forget_second), ["c"], salts=salts, witness=a,
                        peer_key=server.actor, clock=a.clock, max_sessions=1)
    assert not again.findings  # the same evidence is one finding, reported when new


def test_a_statement_that_claims_less_than_the_fingerprints_do_is_not_converged() -> None:
    clock = ManualClock(T0)
    a, server = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    a.say("c", "user", "one")
    assert sync_replicas(a, server, ["c"], salts=salts).converged

    def nothing(st: Statement) -> bytes:
        return sign_statement(server.key, st.conv, 0, [], st.time_ms).data

    report = synchronize(ReplicaPeer(a), _lying(server, nothing), ["c"], salts=salts, witness=a,
                         peer_key=server.actor, clock=a.clock, max_sessions=1)
    assert report.round_trips == 1 and not report.converged  # d = 0, but the signature says otherwise


def test_a_split_view_reaches_a_third_replica_as_gossip_and_is_caught_there() -> None:
    clock = ManualClock(T0)
    key = SigningKey(bytes([1]) * 32)  # one server key over two databases: each client sees one of them
    shown_c2, shown_c3 = Replica.in_memory(key, clock=clock), Replica.in_memory(key, clock=clock)
    c2 = Replica.in_memory(SigningKey(bytes([2]) * 32), clock=clock)
    c3 = Replica.in_memory(SigningKey(bytes([3]) * 32), clock=clock)
    c2.say("c", "user", "what c2 wrote")
    c3.say("c", "user", "what c3 wrote")
    for client, view in ((c2, shown_c2), (c3, shown_c3)):
        alone = sync_replicas(client, view, ["c"], salts=salts)
        assert alone.converged and not alone.findings  # alone, each sees nothing wrong
    # each gossips its statement of the server's key; c2's reply carries what it held before
    # the INITIATE's gossip, never that gossip echoed back
    met = sync_replicas(c3, c2, ["c"], salts=salts)
    assert met.converged
    [finding] = met.findings  # c3 holds both histories after the session: it decides the pair
    assert finding.kind == "server_equivocation" and verify_bundle(finding.bundle).ok
    assert {s.key for s in finding.statements} == {key.public}
    assert [f.id for f in c3.findings("c")] == [finding.id]


def test_a_server_restored_from_a_backup_is_caught_in_the_sync_that_pushes_the_lost_records_back(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0)
    server = Replica.open(tmp_path / "server", clock=clock)
    writer = Replica.in_memory(SigningKey(bytes([2]) * 32), clock=clock)  # holds receipts for what it wrote
    reader = Replica.in_memory(SigningKey(bytes([3]) * 32), clock=clock)  # saw it only in statements
    writer.say("c", "user", "before the backup")
    assert sync_replicas(writer, server, ["c"], salts=salts).converged
    server.close()
    shutil.copytree(tmp_path / "server", tmp_path / "backup")
    server = Replica.open(tmp_path / "server", clock=clock)
    clock.advance(5_000)
    writer.say("c", "user", "after the backup")
    writer.say("c", "user", "and again")
    assert sync_replicas(writer, server, ["c"], salts=salts).converged
    clock.advance(5_000)
    assert sync_replicas(reader, server, ["c"], salts=salts).converged
    for client, kind in ((reader, "rollback"), (writer, "deletion")):
        server.close()
        shutil.rmtree(tmp_path / "server")
        shutil.copytree(tmp_path / "backup", tmp_path / "server")  # restored, then restarted
        server = Replica.open(tmp_path / "server", clock=clock)
        clock.advance(5_000)
        report = sync_replicas(client, server, ["c"], salts=salts)
        # the final statement looks fine (the client pushed the lost records back); the first
        # reply's smaller signed state is the proof
        assert report.converged and server.store.count("c") == 3
        assert [f.kind for f in report.findings] == [kind], report.findings
        assert verify_bundle(report.findings[0].bundle).ok
        assert not sync_replicas(client, server, ["c"], salts=salts).findings  # reported once
    server.close()
