"""One sync session, seen from the side that opens it (docs/sync.md).

`Initiator.initiate()` opens a session over the conversations the client names;
`receive(reply)` ingests what the reply brought and returns the next message, or None when
nothing is left to ask or send. `converged()` then compares the strong fingerprint of our
set (as it now is) with the one the peer sent last. Every reply section carries the peer's
signed statement (docs/integrity.md §2, checked by `sync.statements`): the session keeps
them per conversation, and takes a record as stored at the peer only when a receipt names
it (§3). Invariant: the initiator never pushes one record twice in a session, and never
sends more than `budget` bytes of records in one message (plus one record, when that
record alone is larger); every statement it keeps verified, is about its section's
conversation and is signed by the session's one peer key.
"""

from __future__ import annotations

import hashlib
import itertools
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from convgraph.core.cid import CID
from convgraph.errors import ProtocolError, RoundTripLimitError
from convgraph.integrity.statement import Statement
from convgraph.sync import reconcile
from convgraph.sync.artifact_exchange import Track, artifacts_of
from convgraph.sync.decoder import decode
from convgraph.sync.encoder import encode
from convgraph.sync.keyset import STRONG_LEN, Key, KeySet
from convgraph.sync.messages import (
    DEFAULT_LIMITS,
    MAX_GOSSIP,
    MAX_NEEDS,
    SALT_LEN,
    Base,
    Fate,
    Kind,
    Message,
    Section,
    WireLimits,
)
from convgraph.sync.reconcile import Step, SyncPeer
from convgraph.sync.reports import ConvReport
from convgraph.sync.statements import confirm, gossip_in, section_statement

_FETCH = 256  # records read per store look-up
MAX_ROUND_TRIPS = 10_000


@dataclass
class _Conv:
    keys: KeySet
    queue: dict[Key, None] = field(default_factory=dict)  # pushes not yet sent, in arrival order
    sent: set[bytes] = field(default_factory=set)
    last_sent: list[bytes] = field(default_factory=list)  # digests of the last message's records
    accepted: list[bytes] = field(default_factory=list)
    base_sent: bool = False  # a session offers a conversation's base at most once
    base_offered: bool = False  # and did: the keys the peer adopts from it are in no report
    theirs: tuple[int, bytes] | None = None  # the peer's last (count, strong fingerprint)
    first_count: int | None = None  # the peer's count in its first reply
    brought: set[bytes] = field(default_factory=set)  # ACCEPTED or RELEASED there after the first reply
    matched: bool = False  # the strong fingerprints agreed at the end of the session
    report: ConvReport = field(default_factory=ConvReport)
    statements: list[Statement] = field(default_factory=list)  # the peer's, in the order received
    gossip: list[Statement] = field(default_factory=list)  # by other keys, as the peer relayed them
    artifacts: Track = field(default_factory=Track)


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
        self.artifacts = artifacts_of(peer)  # None: a peer without artifacts syncs records only
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
        check_budget(self.rounds - 1, self.max_rounds)
        message = decode(data, self.limits)
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
            reconciled = ranges is None and not step.wants and not records and base is None and not conv.queue
            needs, blocks = self._artifacts(name, conv, s, left, ask=reconciled)
            if ranges is not None or step.wants or records or base is not None or needs or blocks:
                sections.append(Section(name, ranges=ranges, wants=tuple(step.wants), records=tuple(records),
                                        base=base, needs=needs, blocks=tuple(blocks)))
            conv.artifacts.expect_needs = bool(records or base is not None or needs or blocks)
        if not sections and not any(c.queue or c.artifacts.queue for c in self._convs.values()):
            for name, conv in self._convs.items():
                conv.matched = self._agrees(conv)
                conv.report.converged = conv.matched and not conv.report.unconfirmed
                conv.report.behind = self._behind(conv)
                if self.artifacts is not None:
                    conv.report.missing_here = self.artifacts.missing_artifacts(name)
                    conv.report.missing_there = list(conv.artifacts.theirs)
                    conv.report.refused_there = conv.artifacts.refused_there()
            return None
        return self._out(Message(Kind.CONTINUE, self.salt, tuple(sections)))

    def _artifacts(self, name: str, conv: _Conv, s: Section | None, left: list[int], *,
                   ask: bool) -> tuple[tuple[CID, ...], list[tuple[CID, bytes]]]:
        """Take in the reply's blocks and the peer's needs; what to ask for (once the records
        are reconciled) and the blocks to push in what is `left` of the budget."""
        art, track, report = self.artifacts, conv.artifacts, conv.report
        if art is None:
            return (), []
        got = track.absorb(art, name, s.blocks if s is not None else (), s.needs if s is not None else ())
        report.blocks_received += len(got.stored)
        report.blocks_received_bytes += sum(len(d) for c, d in (s.blocks if s is not None else ())
                                            if c in set(got.stored))
        report.blocks_refused_here += got.refused
        needs = track.ask(art, name, MAX_NEEDS) if ask else ()
        blocks = track.push(art, name, left, self.budget)
        report.blocks_sent += len(blocks)
        report.blocks_sent_bytes += sum(len(d) for _, d in blocks)
        return needs, blocks

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
            if first:
                conv.first_count = s.count
        if s.report is not None and not first:  # the first count is taken after its own report
            conv.brought.update(e.digest for e in s.report if e.fate in (Fate.ACCEPTED, Fate.RELEASED))
        statement = section_statement(s, self.peer_key)
        if self.peer_key is None:  # the first statement sets the session's key
            self.peer_key = statement.key
        conv.statements.append(statement)
        conv.report.statements += 1
        gossiped, dropped = gossip_in(s)
        conv.gossip += gossiped
        conv.report.gossip_dropped += dropped
        if s.report is not None:
            before = len(conv.report.rejected_there)
            stored_before = set(conv.report.stored_there)
            conv.report.take(s.report, conv.last_sent)
            confirm(conv.report, conv.report.stored_there - stored_before, statement)
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
                    conv.base_offered = base is not None
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

    def _behind(self, conv: _Conv) -> int:
        """How many records the peer holds past ours at the end, when its set grew by at least
        that many during the session that the session did not bring (docs/sync.md, step 7)."""
        if conv.theirs is None or conv.first_count is None or conv.base_offered:
            return 0  # a base the peer adopted adds keys no report counts
        grew = conv.theirs[0] - conv.first_count - len(conv.brought)  # records others landed there
        gap = conv.theirs[0] - (len(conv.keys) + len(conv.accepted))
        return gap if 0 < gap <= grew else 0

    def _out(self, message: Message) -> bytes:
        data = encode(message)
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


def check_budget(done: int, limit: int) -> None:
    """`RoundTripLimitError` when `done` round trips reach `limit`."""
    # checked before sending, so a run never makes more than `limit` round trips
    if done >= limit:
        raise RoundTripLimitError(f"the peer did not finish within {limit} round trips", limit=limit)
