"""Statements that are no receipt are signed once per state and reused for a second at most;
receipts are always signed afresh, and a reused statement always names the current state."""

from __future__ import annotations

import itertools

from convgraph import ManualClock, Replica
from convgraph.integrity.statement import decode_statement
from convgraph.sync import wire
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.responder import Responder
from convgraph.sync.statement_cache import StatementCache

_salt = itertools.count()


def _salts() -> bytes:
    return next(_salt).to_bytes(8, "big")


def test_idle_syncs_share_one_statement_until_the_state_or_a_second_moves_on() -> None:
    clock = ManualClock()
    server, client = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    for i in range(5):
        server.say("c", "user", f"turn {i}")
    cache = StatementCache()
    seen: list[bytes] = []

    def respond(message: bytes) -> bytes:
        reply = Responder(ReplicaPeer(server), key=server.key, clock=clock, statements=cache).receive(message)
        seen.extend(s.statement for s in wire.decode(reply).sections if s.statement is not None)
        return reply

    synchronize(ReplicaPeer(client), respond, ["c"], salts=_salts)  # the client pulls all five
    signed = cache.signed
    seen.clear()
    for _ in range(3):  # idle: the same state, the same clock
        synchronize(ReplicaPeer(client), respond, ["c"], salts=_salts)
    assert cache.signed == signed and len(set(seen)) == 1
    clock.advance(1_001)  # older than a second: signed again
    synchronize(ReplicaPeer(client), respond, ["c"], salts=_salts)
    assert cache.signed == signed + 1
    server.say("c", "user", "one more")  # a new state: a new statement naming it
    seen.clear()
    synchronize(ReplicaPeer(client), respond, ["c"], salts=_salts)
    first = decode_statement(seen[0])
    assert first.count == 6 and list(first.heads) == server.store.heads("c")


def test_receipts_are_signed_for_each_push() -> None:
    clock = ManualClock()
    server, client = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    cache = StatementCache()
    respond = Responder(ReplicaPeer(server), key=server.key, clock=clock, statements=cache).receive
    client.say("c", "user", "hello")
    report = synchronize(ReplicaPeer(client), respond, ["c"], salts=_salts)
    assert report.converged and not report.convs["c"].unconfirmed
    assert len(server.records("c")) == 1
