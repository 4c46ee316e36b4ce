"""The client side of a sync session, and the loop that runs sessions until both sides agree.

`Initiator.initiate()` opens a session over the conversations the client names;
`receive(reply)` ingests what the reply brought and returns the next message, or None when
nothing is left to ask or send. `converged()` then compares the strong fingerprint of our
set (as it now is) with the one the peer sent last. `synchronize` repeats sessions, each
with a fresh salt, until they agree or a session moves nothing, within one deadline and one
round-trip budget for the whole run. Every reply section carries the peer's signed statement
(docs/integrity.md §2): the session keeps them per conversation, takes a record as stored at
the peer only when a receipt names it (§3), and hands them to the replica's memory after the
session (§4), with the gossip (§5). Invariant: the initiator never pushes one record twice
in a session, and never sends more than `budget` bytes of records in one message (plus one
record, when that record alone is larger); every statement it keeps verified, is about its
section's conversation and is signed by the session's one peer key.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from convgraph.core.cid import CID
from convgraph.core.hlc import Clock, system_clock
from convgraph.core.keys import actor_text
from convgraph.errors import (
    ProtocolError,
    RoundTripLimitError,
    StatementError,
    SyncError,
    TransportError,
    UnconfirmedStoreError,
)
from convgraph.integrity.findings import Finding
from convgraph.integrity.statement import Statement, decode_statement
from convgraph.sync import reconcile, wire
from convgraph.sync.deadline import DEFAULT_TIMEOUT_S, Deadline, Monotonic
from convgraph.sync.keyset import STRONG_LEN, Key, KeySet
from convgraph.sync.reconcile import Step, SyncPeer, cid_of
from convgraph.sync.wire import (
    DEFAULT_LIMITS,
    MAX_GOSSIP,
    SALT_LEN,
    Base,
    Fate,
    Kind,
    Message,
    Reported,
    Section,
    WireLimits,
)
from convgraph.sync.witness_hooks import Witness

Transport = Callable[[bytes], bytes]
_FETCH = 256  # records read per store look-up
MAX_ROUND_TRIPS = 10_000


@runtime_checkable
class Remote(Protocol):
    """A transport that can keep one exchange within the sync's deadline (HTTP, spool)."""

    def exchange(self, message: bytes, *, deadline: Deadline | None = None) -> bytes:
        """Send one message and return the reply, giving up when `deadline` passes."""
        ...


@dataclass
class ConvReport:
    """One conversation's share of a session, from the initiator's side.

    The `*_there` fields are the peer's report on what we pushed: counts for records it
    stored, and what is still waiting there (by digest, as last reported) or was refused.
    """

    sent: int = 0
    sent_bytes: int = 0
    received: int = 0
    accepted_here: int = 0
    quarantined_here: int = 0
    rejected_here: list[tuple[bytes | None, str, str]] = field(default_factory=list)  # digest, rule, why
    accepted_there: int = 0
    released_there: int = 0
    duplicate_there: int = 0
    waiting_there: dict[bytes, Reported] = field(default_factory=dict)  # QUARANTINED or HELD
    evicted_there: list[bytes] = field(default_factory=list)
    rejected_there: list[Reported] = field(default_factory=list)  # digests filled in, REJECTED_AT too
    stored_there: set[bytes] = field(default_factory=set)  # digests the peer said it holds
    gone: list[bytes] = field(default_factory=list)  # digests the peer could no longer serve
    adopted: int = 0  # keys a base the peer sent added: its checkpoint, and records held as headers
    # reported stored (ACCEPTED, RELEASED, DUPLICATE) but named by no receipt: not confirmed
    unconfirmed: dict[bytes, UnconfirmedStoreError] = field(default_factory=dict)  # by digest
    statements: int = 0  # statements the peer signed about this conversation (one per reply section)
    gossip_dropped: int = 0  # gossiped statements that did not verify or were about another conversation
    findings: list[Finding] = field(default_factory=list)  # new findings (docs/integrity.md §6), this run
    pending: list[str] = field(default_factory=list)  # failures no bundle can prove yet (§4)
    signed: list[str] = field(default_factory=list)  # why the peer's statements deny convergence (§4)
    converged: bool = False

    def take(self, entries: Iterable[Reported], pushed: list[bytes]) -> None:
        """Count a reply's report on the records we `pushed` (digests, in the order sent)."""
        for entry in entries:
            e = entry
            if e.fate is Fate.REJECTED_AT:
                if e.index >= len(pushed):
                    raise ProtocolError(f"a report names record {e.index} of {len(pushed)} pushed")
                e = dataclasses.replace(e, digest=pushed[e.index])
            if e.fate in (Fate.ACCEPTED, Fate.RELEASED, Fate.DUPLICATE):
                self.stored_there.add(e.digest)
                self.waiting_there.pop(e.digest, None)
            self.accepted_there += e.fate is Fate.ACCEPTED
            self.released_there += e.fate is Fate.RELEASED
            self.duplicate_there += e.fate is Fate.DUPLICATE
            if e.fate in (Fate.QUARANTINED, Fate.HELD):
                self.waiting_there[e.digest] = e
            elif e.fate is Fate.EVICTED:
                self.waiting_there.pop(e.digest, None)
                self.evicted_there.append(e.digest)
            elif e.fate in (Fate.REJECTED, Fate.REJECTED_AT):
                self.rejected_there.append(e)

    def why_not(self) -> list[str]:
        """Why this conversation did not converge, as far as either side's reports tell."""
        if self.converged:
            return []
        waiting = list(self.waiting_there.values())
        quarantined = [e for e in waiting if e.fate is Fate.QUARANTINED]
        held = [e.retry_ms for e in waiting if e.fate is Fate.HELD]
        found = [
            (len(self.rejected_there), "rejected by the peer"),
            (len(quarantined), "waiting at the peer for parents it lacks"),
            (len(held), f"held by the peer until its clock reaches {max(held, default=0)} ms"),
            (len(self.evicted_there), "dropped from the peer's full quarantine (offer again)"),
            (len(self.rejected_here), "rejected here"),
            (self.quarantined_here, "waiting here for parents or for our clock"),
            (len(self.gone), "compacted at the peer, which can no longer serve them"),
            (len(self.unconfirmed), "reported stored by the peer but named by no receipt (offered again)"),
        ]
        reasons = [f"{n} record{'s' * (n != 1)} {what}" for n, what in found if n]
        reasons += [f"statement: {why}" for why in self.signed]
        return reasons or ["the two sets still differ when the sessions ended"]

    def statement(self) -> str:
        """`converged`, or `not converged: ` and every reason known."""
        return "converged" if self.converged else "not converged: " + "; ".join(self.why_not())


@dataclass
class _Conv:
    keys: KeySet
    queue: dict[Key, None] = field(default_factory=dict)  # pushes not yet sent, in arrival order
    sent: set[bytes] = field(default_factory=set)
    last_sent: list[bytes] = field(default_factory=list)  # digests of the last message's records
    accepted: list[bytes] = field(default_factory=list)
    base_sent: bool = False  # a session offers a conversation's base at most once
    theirs: tuple[int, bytes] | None = None  # the peer's last (count, strong fingerprint)
    matched: bool = False  # the strong fingerprints agreed at the end of the session
    report: ConvReport = field(default_factory=ConvReport)
    statements: list[Statement] = field(default_factory=list)  # the peer's, in the order received
    gossip: list[Statement] = field(default_factory=list)  # by other keys, as the peer relayed them


class Initiator:
    """One sync session, seen from the side that opens it."""

    def __init__(
        self, peer: SyncPeer, convs: Iterable[str], *, salt: bytes, budget: int = 4 << 20,
        limits: WireLimits = DEFAULT_LIMITS, max_rounds: int = MAX_ROUND_TRIPS,
        refused: set[bytes] | None = None, deferred: set[bytes] | None = None,
        peer_key: bytes | None = None, gossip: Mapping[str, Sequence[bytes]] | None = None,
    ) -> None:
        if len(salt) != SALT_LEN:
            raise ValueError(f"salt must be {SALT_LEN} bytes")
        self.peer, self.salt, self.budget, self.limits = peer, salt, budget, limits
        self.max_rounds = max_rounds
        # digests the peer rejected in an earlier session: they would only be rejected again
        self.refused = refused if refused is not None else set()
        # digests the peer holds back until its clock catches up: offered again in a later run
        self.deferred = deferred if deferred is not None else set()
        self.names = sorted(set(convs))
        # every statement of the session must be by this key; the first one sets it when unknown
        self.peer_key = peer_key
        self.gossip = gossip or {}  # what we tell the peer of other keys' statements, per conversation
        self._convs: dict[str, _Conv] = {}
        self.rounds = 0
        self.bytes_sent = 0
        self.bytes_received = 0

    def initiate(self) -> bytes:
        """The session's first message: each conversation's summary, tip and tail probes."""
        sections = []
        for name in self.names:
            keys = self.peer.keys(name)
            self._convs[name] = _Conv(keys)
            count, strong = reconcile.summary(keys)
            tip = keys.keys[-1] if keys.keys else None
            sections.append(Section(name, count, strong, tip, probes=reconcile.probes(keys),
                                    gossip=tuple(self.gossip.get(name, ()))[:MAX_GOSSIP]))
        return self._out(Message(Kind.INITIATE, self.salt, tuple(sections)))

    def receive(self, data: bytes) -> bytes | None:
        """Take in one reply; the next message, or None when the session is over."""
        self.bytes_received += len(data)
        self.rounds += 1
        _check_budget(self.rounds - 1, self.max_rounds)
        message = wire.decode(data, self.limits)
        if message.kind is not Kind.REPLY or message.salt != self.salt:
            raise ProtocolError("expected a reply to this session")
        answered = {s.conv: s for s in message.sections}
        if not answered.keys() <= self._convs.keys():
            extra = sorted(answered.keys() - self._convs.keys())
            raise ProtocolError(f"reply about conversations not asked for: {extra}")
        left, sections = [self.budget], []
        for name in self.names:
            conv = self._convs[name]
            s = answered.get(name)
            step = self._absorb(conv, s, first=self.rounds == 1) if s is not None else Step()
            fresh = (k for k in step.pushes
                     if k[1] not in conv.sent and k[1] not in self.refused and k[1] not in self.deferred)
            conv.queue.update((k, None) for k in fresh)
            records, base = self._take(name, conv, left)
            ranges = reconcile.cover(step)
            if ranges is not None or step.wants or records or base is not None:
                sections.append(Section(name, ranges=ranges, wants=tuple(step.wants), records=tuple(records),
                                        base=base))
        if not sections and not any(c.queue for c in self._convs.values()):
            for conv in self._convs.values():
                conv.matched = self._agrees(conv)
                conv.report.converged = conv.matched and not conv.report.unconfirmed
            return None
        return self._out(Message(Kind.CONTINUE, self.salt, tuple(sections)))

    def _absorb(self, conv: _Conv, s: Section, *, first: bool) -> Step:
        outcome = reconcile.take_in(self.peer, s, report=False)  # we send no report: skip its look-ups
        if outcome.adopted:
            # a base covers keys all over the set, in ranges still being compared: our set
            # must show them from now on, or we would ask for them (and the base) again
            conv.keys = conv.keys.adding(outcome.adopted)
            conv.report.adopted += len(outcome.adopted)
            based = {d for _, d in outcome.adopted}
            outcome.accepted = [d for d in outcome.accepted if d not in based]
        if s.records or s.base is not None:
            conv.report.received += len(s.records)
            conv.accepted += outcome.accepted
            conv.report.accepted_here += len(outcome.accepted)
            conv.report.quarantined_here += outcome.quarantined
            conv.report.rejected_here += outcome.rejected
        if s.count is not None:
            conv.theirs = (s.count, s.strong)
        statement = self._statement(s)
        conv.statements.append(statement)
        conv.report.statements += 1
        for data in s.gossip:
            try:
                gossiped = decode_statement(data)
            except StatementError:
                gossiped = None
            if gossiped is None or gossiped.conv != s.conv:
                conv.report.gossip_dropped += 1
            else:
                conv.gossip.append(gossiped)
        if s.report is not None:
            before = len(conv.report.rejected_there)
            stored_before = set(conv.report.stored_there)
            conv.report.take(s.report, conv.last_sent)
            self._confirm(conv.report, conv.report.stored_there - stored_before, statement)
            self.refused.update(e.digest for e in conv.report.rejected_there[before:])
            self.deferred.update(e.digest for e in s.report if e.fate is Fate.HELD)
        conv.report.gone += s.gone
        keys = conv.keys
        if first and conv.theirs is not None and conv.theirs[1] != reconcile.summary(keys)[1]:
            k = bisect_right(keys.keys, s.tip) if s.tip is not None else 0
            if k < len(keys) and keys.fingerprint(0, k, STRONG_LEN) == conv.theirs[1]:
                return Step(pushes=list(keys.keys[k:]))  # the peer holds a prefix of ours: send the rest
        received = reconcile.received_hashes(self.salt, s.records, outcome.adopted)
        return reconcile.answer(s, keys, self.salt, received)

    def _statement(self, s: Section) -> Statement:
        """The section's statement, verified, about its conversation, by the session's peer."""
        if s.statement is None:  # the decoder refuses a REPLY section without one
            raise ProtocolError(f"a reply section about {s.conv!r} carries no statement")
        try:
            statement = decode_statement(s.statement)
        except StatementError as exc:
            raise ProtocolError(f"the peer's statement about {s.conv!r} is invalid: {exc}") from exc
        if statement.conv != s.conv:
            raise ProtocolError(
                f"a reply section about {s.conv!r} carries a statement about {statement.conv!r}")
        if self.peer_key is None:
            self.peer_key = statement.key
        elif statement.key != self.peer_key:
            raise ProtocolError(f"a statement about {s.conv!r} is signed by {actor_text(statement.key)}, "
                                f"not by the peer's key {actor_text(self.peer_key)}")
        return statement

    def _confirm(self, report: ConvReport, stored: set[bytes], receipt: Statement) -> None:
        """Keep as stored at the peer only what its receipt names (docs/integrity.md §3)."""
        named = {c.digest for c in receipt.stored}
        for digest in sorted(stored - named):
            report.stored_there.discard(digest)
            report.unconfirmed[digest] = UnconfirmedStoreError(
                "the peer reported this record stored, but its receipt does not name it",
                cid=cid_of(digest), peer=actor_text(receipt.key))

    def _take(self, name: str, conv: _Conv, left: list[int]) -> tuple[list[bytes], Base | None]:
        records: list[bytes] = []
        base: Base | None = None
        conv.last_sent = []
        while conv.queue and left[0] > 0:
            chunk = list(itertools.islice(conv.queue, _FETCH))
            for key, data in zip(chunk, self.peer.fetch([k[1] for k in chunk]), strict=True):
                if data is None and not conv.base_sent:
                    base = self._base(name)
                    if base is not None and base.size() > left[0] and left[0] < self.budget:
                        return records, None  # sent first in a message of its own
                    conv.base_sent = True
                    left[0] -= base.size() if base is not None else 0
                if data is not None and len(data) > left[0] and left[0] < self.budget:
                    return records, base
                del conv.queue[key]
                conv.sent.add(key[1])
                if data is None:
                    continue  # held here as a header only: the base carries it, if we may send one
                records.append(data)
                conv.last_sent.append(key[1])
                left[0] -= len(data) + 4
                conv.report.sent += 1
                conv.report.sent_bytes += len(data)
        if base is not None:  # the base carries its checkpoint
            records = [r for r in records if r != base.checkpoint]
        return records, base

    def _base(self, name: str) -> Base | None:
        base = reconcile.base_for(self.peer, name, self.limits)
        if base is None or hashlib.sha256(base.checkpoint).digest() in self.refused:
            return None  # the peer refused it in an earlier session: it would only refuse it again
        return base

    def _agrees(self, conv: _Conv) -> bool:
        return conv.theirs is not None and reconcile.summary(conv.keys, conv.accepted) == conv.theirs

    def _out(self, message: Message) -> bytes:
        data = wire.encode(message)
        self.bytes_sent += len(data)
        return data

    def converged(self) -> bool:
        """Whether every conversation's set now equals the peer's, as of its last reply."""
        return all(c.report.converged for c in self._convs.values())

    @property
    def have(self) -> dict[str, set[bytes]]:
        """Per conversation, the digests of records we hold that the peer lacked (and was sent)."""
        return {name: set(c.sent) for name, c in self._convs.items()}

    @property
    def need(self) -> dict[str, set[bytes]]:
        """Per conversation, the digests of records the peer held that we lacked (and took in)."""
        return {name: set(c.accepted) for name, c in self._convs.items()}

    @property
    def reports(self) -> dict[str, ConvReport]:
        return {name: c.report for name, c in self._convs.items()}

    @property
    def matched(self) -> dict[str, bool]:
        """Per conversation, whether the strong fingerprints agreed when the session ended."""
        return {name: c.matched for name, c in self._convs.items()}

    @property
    def statements(self) -> dict[str, list[Statement]]:
        """Per conversation, every statement the peer signed in this session, in order."""
        return {name: list(c.statements) for name, c in self._convs.items()}

    @property
    def gossiped(self) -> dict[str, list[Statement]]:
        """Per conversation, the verified statements by other keys the peer gossiped."""
        return {name: list(c.gossip) for name, c in self._convs.items()}


_COUNTS = ("sent", "sent_bytes", "received", "accepted_here", "quarantined_here", "accepted_there",
           "released_there", "duplicate_there", "adopted")


@dataclass
class SyncReport:
    """What a run of sessions moved, and whether it ended with both sides in agreement."""

    sessions: int = 0
    failed_sessions: int = 0  # broken off by the network, then started over
    round_trips: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    converged: bool = False
    convs: dict[str, ConvReport] = field(default_factory=dict)
    peer_key: bytes | None = None  # the key that signed the peer's statements

    @property
    def findings(self) -> list[Finding]:
        """The findings this run raised (new ones only), over every conversation."""
        return [f for r in self.convs.values() for f in r.findings]

    def _add(self, session: Initiator) -> None:
        self.sessions += 1
        self.round_trips += session.rounds
        self.bytes_sent += session.bytes_sent
        self.bytes_received += session.bytes_received
        for name, r in session.reports.items():
            total = self.convs.setdefault(name, ConvReport())
            for f in _COUNTS:
                setattr(total, f, getattr(total, f) + getattr(r, f))
            total.rejected_here += r.rejected_here
            total.rejected_there += r.rejected_there
            total.evicted_there += r.evicted_there
            for d in r.stored_there:
                total.waiting_there.pop(d, None)
            total.waiting_there.update(r.waiting_there)
            total.stored_there |= r.stored_there
            total.gone += r.gone
            for d in r.stored_there:  # confirmed by a later session's receipt
                total.unconfirmed.pop(d, None)
            total.unconfirmed.update(r.unconfirmed)
            total.statements += r.statements
            total.gossip_dropped += r.gossip_dropped
            total.findings += r.findings
            total.pending = list(r.pending)
            total.signed = list(r.signed)
            total.converged = r.converged


def synchronize(
    peer: SyncPeer, transport: Transport | Remote, convs: Iterable[str], *, salts: Callable[[], bytes],
    max_sessions: int = 2, budget: int = 4 << 20, limits: WireLimits = DEFAULT_LIMITS,
    on_round: Callable[[Initiator], None] | None = None, retries: int = 2,
    timeout_s: float = DEFAULT_TIMEOUT_S, max_round_trips: int = MAX_ROUND_TRIPS,
    monotonic: Monotonic = time.monotonic, witness: Witness | None = None, peer_key: bytes | None = None,
    clock: Clock = system_clock,
) -> SyncReport:
    """Run sessions until both sides agree, a session moves nothing, or `max_sessions` ran.

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
    seen = _held_findings(witness, names)
    for _ in range(max_sessions + retries):
        if report.sessions >= max_sessions:
            break
        gossip = _gossip_out(witness, names, peer_key)
        session = Initiator(peer, names, salt=salts(), budget=budget, limits=limits, refused=refused,
                            deferred=deferred, max_rounds=max_round_trips, peer_key=peer_key, gossip=gossip)
        started_ms = clock()
        try:
            message: bytes | None = session.initiate()
            while message is not None:
                _check_budget(used + session.rounds, max_round_trips)
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
            _observe(witness, session, started_ms=started_ms, received_ms=clock())
            _landed(witness, session, seen)
        report._add(session)
        moved = any(r.accepted_here or r.accepted_there or r.released_there or r.adopted
                    for r in session.reports.values())
        if session.converged() or not moved:
            break
    report.converged = all(r.converged for r in report.convs.values())
    return report


def _gossip_out(witness: Witness | None, names: list[str], peer_key: bytes | None) -> dict[str, list[bytes]]:
    """Per conversation, the statements of other keys we hold, for the peer (docs/integrity.md §5)."""
    if witness is None:
        return {}
    exclude = {peer_key} if peer_key is not None else set()
    out = {name: [g.data for g in witness.gossip_for(name, exclude) if g.key not in exclude][:MAX_GOSSIP]
           for name in names}
    return {name: found for name, found in out.items() if found}


def _observe(witness: Witness, session: Initiator, *, started_ms: int, received_ms: int) -> None:
    """Hand a completed session's statements and gossip to the replica's memory (§4, §5)."""
    gossiped = session.gossiped
    for name, statements in session.statements.items():
        r = session.reports[name]
        if gossiped[name]:
            r.findings += witness.observe_gossip(name, gossiped[name])
        if not statements or session.peer_key is None:
            continue
        matched = session.matched[name]
        try:
            verdict = witness.observe_session(session.peer_key, name, statements, started_ms=started_ms,
                                              received_ms=received_ms, fingerprints_matched=matched)
        except SyncError as exc:  # a stale statement (§4 step 1): nothing is remembered
            r.signed.append(str(exc))
            r.converged = False
            continue
        r.findings += verdict.findings
        r.pending = list(verdict.pending)
        r.signed += verdict.reasons
        r.converged = r.converged and verdict.converged


def _held_findings(witness: Witness | None, names: list[str]) -> set[CID]:
    """The ids of the findings held before the run: only later ones are this run's."""
    return set() if witness is None else {f.id for name in names for f in witness.findings(name)}


def _landed(witness: Witness, session: Initiator, seen: set[CID]) -> None:
    """Add to each conversation's report the findings the session's ingest raised (a record
    equivocation, a false checkpoint, a divergent fork: docs/integrity.md §6.1), which no
    statement check returns; `seen` grows by every finding reported."""
    for name, r in session.reports.items():
        seen |= {f.id for f in r.findings}
        for f in witness.findings(name):
            if f.id not in seen:
                seen.add(f.id)
                r.findings.append(f)


def _check_budget(done: int, limit: int) -> None:
    # checked before sending, so a run never makes more than `limit` round trips
    if done >= limit:
        raise RoundTripLimitError(f"the peer did not finish within {limit} round trips", limit=limit)
