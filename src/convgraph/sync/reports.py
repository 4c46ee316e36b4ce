"""What a sync run reports: per conversation (`ConvReport`) and over the whole run (`SyncReport`).

A conversation's report counts what moved each way, keeps the peer's report on what we
pushed (stored, waiting, refused) and the statement checks' outcome, and says why it did
not converge. Invariant: `SyncReport` sums its sessions' counts, and a record a later
session reported stored is no longer waiting or unconfirmed in it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from convgraph.core.cid import CID
from convgraph.errors import ProtocolError, UnconfirmedStoreError
from convgraph.integrity.findings import Finding
from convgraph.sync.messages import Fate, Reported


class Session(Protocol):
    """What a sync report takes from one finished session (`initiator_session.Initiator`)."""

    @property
    def rounds(self) -> int: ...
    @property
    def bytes_sent(self) -> int: ...
    @property
    def bytes_received(self) -> int: ...
    @property
    def reports(self) -> dict[str, ConvReport]: ...


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
    # records the peer held past ours when the session ended, all landed there by others during it
    # (docs/sync.md, step 7): left for the next sync, 0 when the peer's set did not grow so
    behind: int = 0
    # artifacts (docs/sync.md, Artifacts): never part of `converged`, which is about records
    blocks_sent: int = 0
    blocks_sent_bytes: int = 0
    blocks_received: int = 0  # stored here, new
    blocks_received_bytes: int = 0
    blocks_refused_here: list[tuple[CID, str, str]] = field(default_factory=list)  # cid, rule, why
    missing_here: list[CID] = field(default_factory=list)  # named by the records, not held whole here
    missing_there: list[CID] = field(default_factory=list)  # the peer's last stated needs
    refused_there: list[CID] = field(default_factory=list)  # pushed, yet still among its needs

    def artifacts(self) -> str:
        """A line on the artifacts that moved and those still missing; empty when nothing did."""
        parts = [f"{n} {what}" for n, what in (
            (self.blocks_received, "blocks received"), (self.blocks_sent, "blocks sent"),
            (len(self.blocks_refused_here), "blocks refused here"),
            (len(self.refused_there), "blocks refused by the peer"),
            (len(self.missing_here), "artifact blocks missing here"),
            (len(self.missing_there), "artifact blocks missing at the peer")) if n]
        return ", ".join(parts)

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
            (self.behind, "stored by the peer from others during the session (the next sync takes them)"),
        ]
        reasons = [f"{n} record{'s' * (n != 1)} {what}" for n, what in found if n]
        reasons += [f"statement: {why}" for why in self.signed]
        return reasons or ["the two sets still differ when the sessions ended"]

    def caught_up(self) -> bool:
        """Whether a further session of the run would only chase the peer: the session converged,
        or it is behind only by records others landed there meanwhile, with nothing of ours left
        to confirm or offer again and nothing waiting for parents on either side."""
        if self.converged:
            return True
        unfinished = (self.unconfirmed or self.evicted_there or self.quarantined_here or self.signed
                      or any(e.fate is Fate.QUARANTINED for e in self.waiting_there.values()))
        return self.behind > 0 and not unfinished

    def statement(self) -> str:
        """`converged`, or `not converged: ` and every reason known."""
        return "converged" if self.converged else "not converged: " + "; ".join(self.why_not())



_COUNTS = ("sent", "sent_bytes", "received", "accepted_here", "quarantined_here", "accepted_there",
           "released_there", "duplicate_there", "adopted", "blocks_sent", "blocks_sent_bytes",
           "blocks_received", "blocks_received_bytes")


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

    def _add(self, session: Session) -> None:
        self.sessions += 1
        self.round_trips += session.rounds
        self.bytes_sent += session.bytes_sent
        self.bytes_received += session.bytes_received
        for name, r in session.reports.items():
            total = self.convs.setdefault(name, ConvReport())
            for f in _COUNTS:
                setattr(total, f, getattr(total, f) + getattr(r, f))
            # a record sent again by a later session is refused again: it is one rejection
            here, there = set(total.rejected_here), set(total.rejected_there)
            total.rejected_here += [x for x in r.rejected_here if x not in here]
            total.rejected_there += [x for x in r.rejected_there if x not in there]
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
            total.behind = r.behind
            total.blocks_refused_here += r.blocks_refused_here
            # the last session's view: what is still missing after it
            total.missing_here, total.missing_there = list(r.missing_here), list(r.missing_there)
            total.refused_there = list(r.refused_there)
