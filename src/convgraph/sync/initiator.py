"""The client side of sync: the loop that runs sessions until both sides agree or are caught up.

`synchronize` repeats sessions (`Initiator`, in `sync.initiator_session`), each with a fresh
salt, until they agree, a session moves nothing, or a session has done its work and differs
from the peer only by records others landed there meanwhile (those wait for the next run: a
run never chases a peer that keeps moving), within one deadline and one round-trip budget
for the whole run. After each session it hands the peer's statements and gossip to
the replica's memory (docs/integrity.md §4, §5; `sync.witness_hooks`). Invariant: a run
never makes more than `max_round_trips` round trips, failed sessions included, and every
statement of the run is signed by one key.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

from convgraph.core.hlc import Clock, system_clock
from convgraph.errors import TransportError
from convgraph.sync.deadline import DEFAULT_TIMEOUT_S, Deadline, Monotonic
from convgraph.sync.initiator_session import MAX_ROUND_TRIPS, Initiator, check_budget
from convgraph.sync.messages import DEFAULT_LIMITS, WireLimits
from convgraph.sync.reconcile import SyncPeer
from convgraph.sync.reports import ConvReport, SyncReport
from convgraph.sync.witness_hooks import Witness, gossip_out, held_findings, landed, observe

__all__ = ["MAX_ROUND_TRIPS", "ConvReport", "Initiator", "Remote", "SyncReport", "Transport", "synchronize"]

Transport = Callable[[bytes], bytes]


@runtime_checkable
class Remote(Protocol):
    """A transport that can keep one exchange within the sync's deadline (HTTP, spool)."""

    def exchange(self, message: bytes, *, deadline: Deadline | None = None) -> bytes:
        """Send one message and return the reply, giving up when `deadline` passes."""
        ...


def synchronize(
    peer: SyncPeer, transport: Transport | Remote, convs: Iterable[str], *, salts: Callable[[], bytes],
    max_sessions: int = 2, budget: int = 4 << 20, limits: WireLimits = DEFAULT_LIMITS,
    on_round: Callable[[Initiator], None] | None = None, retries: int = 2,
    timeout_s: float = DEFAULT_TIMEOUT_S, max_round_trips: int = MAX_ROUND_TRIPS,
    monotonic: Monotonic = time.monotonic, witness: Witness | None = None, peer_key: bytes | None = None,
    clock: Clock = system_clock,
) -> SyncReport:
    """Run sessions until both sides agree, a session moves nothing, every conversation is
    caught up (`ConvReport.caught_up`: behind only by what others landed at the peer during the
    session), or `max_sessions` ran.

    The whole run has one deadline, `timeout_s` from the start on `monotonic`
    (`SyncTimeoutError`), and one budget of `max_round_trips` (`RoundTripLimitError`), failed
    sessions included. A `Remote` gets the deadline with every exchange and ends a slow
    answer by it; a bare callable is checked between round trips only. A session
    broken by the network (`TransportError`) is started over with a fresh salt, at most
    `retries` times in all; a reply that breaks the protocol is the peer's fault and is
    never retried. What a broken session had ingested stays. `on_round` sees the session
    after each reply (for progress displays).

    Every statement of the run must be signed by one key: `peer_key` when the caller knows
    the peer's (a pinned server key), else the first statement's. With a `witness` (the
    replica's memory of statements), each INITIATE gossips what it holds of other keys, and
    after each completed session it judges the peer's statements (`observe_session`, with
    the times on `clock` around the session) and the gossip received; what it finds is in
    the report, and a conversation it does not see as converged is not.
    """
    deadline = Deadline.after(timeout_s, monotonic)
    send: Transport = (functools.partial(transport.exchange, deadline=deadline)
                       if isinstance(transport, Remote) else transport)
    report, refused, deferred = SyncReport(), set[bytes](), set[bytes]()
    names = sorted(set(convs))
    failures = used = 0
    seen = held_findings(witness, names)
    for _ in range(max_sessions + retries):
        if report.sessions >= max_sessions:
            break
        gossip = gossip_out(witness, names, peer_key)
        session = Initiator(peer, names, salt=salts(), budget=budget, limits=limits, refused=refused,
                            deferred=deferred, max_rounds=max_round_trips, peer_key=peer_key, gossip=gossip)
        started_ms = clock()
        try:
            message: bytes | None = session.initiate()
            while message is not None:
                check_budget(used + session.rounds, max_round_trips)
                deadline.check(f"round trip {used + session.rounds + 1}")
                message = session.receive(send(message))
                if on_round is not None:
                    on_round(session)
        except TransportError:
            failures += 1
            report.failed_sessions += 1
            if failures > retries:
                raise
            continue
        finally:
            used += session.rounds
        peer_key = report.peer_key = session.peer_key
        if witness is not None:
            observe(witness, session, started_ms=started_ms, received_ms=clock())
            landed(witness, session, seen)
        report._add(session)
        moved = any(r.accepted_here or r.accepted_there or r.released_there or r.adopted
                    or r.blocks_received or r.blocks_sent for r in session.reports.values())
        if not moved or all(r.caught_up() for r in session.reports.values()):
            break  # converged, or a next session would only chase records others write meanwhile
    report.converged = all(r.converged for r in report.convs.values())
    return report
