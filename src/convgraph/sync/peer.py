"""A replica as a sync peer: the shell between the state machine and a store.

Key sets and heads come from the store's process-wide `ConvCache` (`sync/conv_cache.py`),
kept per conversation behind its change token and grown by the keys that arrive, so every
peer over one store, in every session and request, shares one copy and an unchanged
conversation costs one token read. Ingest restricts every batch to the conversation its section
names. A base (a compacted conversation's checkpoint, snapshot and cover) is adopted only
when the adoption policy trusts its checkpoint's signer for that conversation: by default
only our own key. Invariant: `keys(conv)` is always the store's current set for `conv`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence

from convgraph.core.cid import CID
from convgraph.core.keys import actor_text
from convgraph.core.record import decode_record
from convgraph.errors import ConvgraphError, ForbiddenError, UntrustedCheckpointError
from convgraph.replica import Replica, artifact_checks
from convgraph.replica.adoption import compaction_of
from convgraph.replica.ingest import IngestReport, Item
from convgraph.sync import artifact_scope, conv_cache
from convgraph.sync.artifact_exchange import BlockOutcome
from convgraph.sync.fates import fates
from convgraph.sync.keyset import KeySet
from convgraph.sync.messages import Base, Fate, Reported
from convgraph.sync.reconcile import Outcome, cid_of, refusal

__all__ = ["AdoptionPolicy", "ReplicaPeer", "cid_of", "trusting"]

AdoptionPolicy = Callable[[str, bytes], bool]
"""Whether to adopt a checkpoint of conversation `conv` (first argument) signed by the key
(second): adopting takes every record it covers on that signer's word (docs/format.md 11.5)."""

def trusting(keys: Iterable[bytes]) -> AdoptionPolicy:
    """A policy that adopts checkpoints signed by any of `keys`, in any conversation."""
    trusted = frozenset(keys)
    return lambda _conv, signer: signer in trusted


class ReplicaPeer:
    """`SyncPeer` over a `Replica`; safe to share between threads.

    `adopt_from` decides whose checkpoints a base may bring; by default only the replica's
    own key, so a peer can never hand us history on its own word unless we say so.
    """

    def __init__(self, replica: Replica, *, adopt_from: AdoptionPolicy | None = None) -> None:
        self.replica = replica
        self.adopt_from = adopt_from if adopt_from is not None else trusting([replica.actor])
        self.cache = conv_cache.of(replica.store)
        # per thread: the state `keys` last gave, which `heads` and `missing_artifacts` answer
        # from until this peer writes (a responder asks for all three about one section)
        self._last = threading.local()

    def share_cache(self, other: ReplicaPeer) -> None:
        """Use `other`'s cache: a no-op over one store, whose cache every peer already shares."""
        self.cache = other.cache

    def keys(self, conv: str) -> KeySet:
        state = self.cache.state(conv)
        self._last.state = (conv, state)
        return state.keys

    def fetch(self, digests: Sequence[bytes]) -> list[bytes | None]:
        cids = [cid_of(d) for d in digests]
        found = self.replica.store.get_many(cids)
        return [found.get(c) for c in cids]

    def heads(self, conv: str) -> list[CID]:
        # the heads of the state `keys` just gave (a responder asks for both in a row): one
        # token read for the two, and heads and count of one state in the statement they sign
        last = getattr(self._last, "state", None)
        if last is not None and last[0] == conv:
            return list(last[1].heads)
        return self.cache.heads(conv)

    def ingest(self, conv: str, records: Sequence[bytes], *, report: bool = True) -> Outcome:
        return self.outcome(conv, records, self.take(conv, records), report=report)

    def take(self, conv: str, records: Sequence[Item], *, refused: Iterable[CID] = ()) -> IngestReport:
        """Ingest `records` (or one part of a push, `refused` naming what earlier parts rejected)."""
        self._last.state = None  # what `keys` gave before is no state to sign after this
        return self.replica.ingest(records, conversations={conv}, refused=refused)

    def outcome(self, conv: str, records: Sequence[bytes], ingested: IngestReport, *,
                report: bool = True) -> Outcome:
        """The outcome of the push of `records` that `ingested` reports (merged, if taken in parts)."""
        entries = self._fates(conv, records, ingested) if report else ()
        return Outcome(
            accepted=[c.digest for c in ingested.accepted],
            quarantined=len(ingested.quarantined) + len(ingested.held),
            rejected=[(r.cid.digest if r.cid else None, r.rule, str(r.error)) for r in ingested.rejected],
            report=entries,
        )

    def _fates(self, conv: str, records: Sequence[bytes], report: IngestReport) -> tuple[Reported, ...]:
        """The report part of a reply on `records`, as `report` and the quarantine tell."""
        store, config = self.replica.store, self.replica.config
        # each record hashed once here, for the quarantine look-up and the report alike
        digests = [hashlib.sha256(d).digest() if len(d) <= config.limits.max_record_bytes else None
                   for d in records]
        pushed = {cid_of(d) for d in digests if d is not None}
        # only these can be waiting now: read the quarantine for them alone
        waiting = store.pending_get(pushed & {*report.quarantined, *report.held, *report.duplicates})
        elsewhere = [c for c in report.released if c not in pushed]
        # a release in another conversation is not this peer's to know of
        metas = store.metas(elsewhere) if elsewhere else {}
        return fates(
            digests, report, {c.digest: p for c, p in waiting.items()},
            [c for c in elsewhere if c in metas and metas[c].conv == conv], max_drift_ms=config.max_drift_ms,
        )

    def missing_artifacts(self, conv: str) -> list[CID]:
        # what `conv` spans and is not admitted for it: a block held only for another
        # conversation is asked for again, so its bytes prove the sender had them
        last = getattr(self._last, "state", None)  # the section's state, when `keys` gave it
        named = (self.cache.has_artifacts(conv) if last is None or last[0] != conv
                 else self.cache.names_artifacts(conv, last[1]))
        if not named:  # nothing named: nothing to ask for
            return []
        return artifact_scope.unadmitted(self.replica.store, conv)

    def artifact_blocks(self, conv: str, cids: Sequence[CID]) -> Iterator[tuple[CID, bytes]]:
        return artifact_scope.serve(self.replica.store, conv, cids)

    def take_blocks(self, conv: str, blocks: Sequence[tuple[CID, bytes]]) -> BlockOutcome:
        self._last.state = None
        outcome = artifact_scope.take(self.replica.store, conv, blocks)
        if outcome.stored:  # claims that waited for these blocks can be judged now (integrity.md §6.4)
            artifact_checks.check_conversation(self.replica.store, conv, outcome.stored,
                                               self.replica.clock())
        return outcome

    def base(self, conv: str) -> Base | None:
        found = compaction_of(self.replica.store, conv)
        return None if found is None else Base(found.record, found.snapshot, found.cover)

    def adopt(self, conv: str, base: Base) -> Outcome:
        digest = CID.of_record(base.checkpoint).digest
        before = self.keys(conv)
        self._last.state = None
        try:
            record = decode_record(base.checkpoint, limits=self.replica.config.limits)
            if record.conv != conv:
                raise ForbiddenError(f"checkpoint of conversation {record.conv!r}, which this section "
                                     "does not cover", cid=record.cid)
        except ConvgraphError as exc:
            return refusal(digest, exc.rule, str(exc))
        # outside the `try`: a policy that must ask the network may fail as a transport does
        if not self.adopt_from(conv, record.actor):
            untrusted = UntrustedCheckpointError(
                f"checkpoints of {conv!r} by {actor_text(record.actor)} are not adopted here",
                checkpoint=record.cid, signer=actor_text(record.actor))
            return refusal(digest, untrusted.rule, str(untrusted))
        try:
            report = self.replica.adopt(base.checkpoint, base.snapshot, base.cover)
        except ConvgraphError as exc:
            return refusal(digest, exc.rule, str(exc))
        held = set(before.keys)
        added = [k for k in self.keys(conv).keys if k not in held]
        fate = Fate.DUPLICATE if report.duplicates else Fate.ACCEPTED
        return Outcome(accepted=[d for _, d in added], quarantined=len(report.quarantined) + len(report.held),
                       adopted=added, report=(Reported(fate, digest),))
