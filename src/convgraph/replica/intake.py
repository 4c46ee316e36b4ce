"""Records from elsewhere: ingest and adoption into a replica's store, and what follows a landing.

Each batch is decoded first, signatures and all, outside any transaction (`prepared`: that
costly part of judging holds no store lock), then planned by the ingest rules (`plan_ingest`),
in a rooted conversation against its authority state brought up to date once per batch, and
committed with what its landing settles in the same transaction: the finding of an
equivocation, the checks of a checkpoint or cosignature that landed or that waited for a
record, the quarantine's bounds. Invariant:
the store only ever holds records that passed every ingest rule, and no equivocation is
stored without its finding.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import TYPE_CHECKING

from convgraph.core.cid import CID
from convgraph.core.hlc import Clock
from convgraph.core.record import Record, load_trusted
from convgraph.core.rooted import is_rooted
from convgraph.errors import ForgottenConversationError, LockOrderError
from convgraph.projections import authority as authority_
from convgraph.projections import state as state_
from convgraph.projections.authority import AuthorityState
from convgraph.replica import artifact_checks, checkpointing, collector, turn_index, witnessing
from convgraph.replica.adoption import plan_adoption
from convgraph.replica.folds import Folds, authority_from
from convgraph.replica.ingest import IngestReport, Item, plan_ingest, prepared
from convgraph.replica.writes import Writer
from convgraph.store.base import Store
from convgraph.store.rows import WriteSet

if TYPE_CHECKING:
    from convgraph.replica.config import Config


class Intake:
    """Ingest and adoption through one store, keeping its folds, checkpoint watch and clock current."""

    def __init__(
        self, store: Store, folds: Folds, watch: checkpointing.Watch, writer: Writer,
        entries: checkpointing.Entries,
    ) -> None:
        self.store, self.folds, self.watch, self.writer, self.entries = store, folds, watch, writer, entries

    def ingest(
        self, items: Iterable[Item], *, config: Config, clock: Clock, conversations: Container[str] | None,
        refused: Iterable[CID] = (),
    ) -> IngestReport:
        """Validate and store foreign records; a bad one is reported, never fatal to the rest."""
        # the batch's records, plans and decoded maps die when `_ingest` returns, before the
        # collector resumes: it then traces only what outlives the batch, not the whole batch
        with collector.paused():
            items = prepared(items, config.limits)  # before the transaction: no lock held meanwhile
            return self._ingest(items, config=config, clock=clock, conversations=conversations,
                                refused=refused)

    def _ingest(
        self, items: Iterable[Item], *, config: Config, clock: Clock, conversations: Container[str] | None,
        refused: Iterable[CID],
    ) -> IngestReport:
        items, refused = list(items), list(refused)
        convs = _convs_of(items, conversations)
        while True:
            try:
                return self._ingest_holding(convs, items, config=config, clock=clock,
                                            conversations=conversations, refused=refused)
            except LockOrderError as exc:
                # a release into another conversation needed its lock out of order: rolled back,
                # run again holding it from the start (what folds took in is noticed rolled back)
                if self.store.in_transaction() or set(exc.convs) <= set(convs):
                    raise
                convs = sorted({*convs, *exc.convs})

    def _ingest_holding(
        self, convs: list[str], items: list[Item], *, config: Config, clock: Clock,
        conversations: Container[str] | None, refused: list[CID],
    ) -> IngestReport:
        with self.store.transaction(*convs):
            now = clock()
            states: dict[str, AuthorityState | None] = {}

            def authority(conv: str) -> AuthorityState | None:  # brought up to date once per ingest
                if conv not in states:
                    states[conv] = self.folds.authority(conv)
                return states[conv]

            writes, report = plan_ingest(
                items, self.store, now_ms=now, max_drift_ms=config.max_drift_ms,
                limits=config.limits, conversations=conversations, authority=authority, refused=refused,
            )
            judged: dict[str, list[CID]] = {}
            for record in writes.records:
                if states.get(record.conv) is not None:
                    judged.setdefault(record.conv, []).append(record.cid)
            for conv, cids in judged.items():
                self.folds.added(conv, cids)
            self._land(writes, clock=clock)
            turn_index.keep_hidden(self.store, ((conv, states[conv]) for conv in judged))
            if judged:  # what this commit stored of them was added to their states while planning
                for conv in judged:
                    self.folds.caught_up_to([conv], self.store.cursor(conv))
            # in the same transaction when what goes is of conversations it holds: one commit
            evicted = self.store.evict_pending_held(config.quarantine) if writes.pending_put else []
        self.folds.confirmed(states)
        if evicted is None:
            self._evict(writes, report, config)
        elif evicted:
            report.evict(evicted)
        self.writer.received(report.accepted_hlcs, now)
        return report

    def adopt(self, checkpoint: bytes, snapshot: bytes, cover: bytes, *, config: Config,
              clock: Clock) -> IngestReport:
        """Take a compacted conversation on its checkpoint signer's word (docs/format.md 11.5)."""
        with self.store.transaction():
            now = clock()
            adoption = plan_adoption(checkpoint, snapshot, cover, self.store, now_ms=now,
                                     max_drift_ms=config.max_drift_ms, limits=config.limits)
            if adoption is None:
                return IngestReport(duplicates=[CID.of_record(checkpoint)])
            record = adoption.checkpoint
            if store_forgot := self.store.forgotten([record.conv]):
                raise ForgottenConversationError(f"a base of conversation {record.conv!r}, which this "
                                                 "replica forgot", conv=min(store_forgot), cid=record.cid)
            adopted: AuthorityState | None = None
            if is_rooted(record.conv):  # the base's records, then what the base lets in, are judged
                held = self.store.metas(e for e in state_.restore(snapshot).entries)
                adopted = authority_from(record.conv, snapshot,
                                         {**held, **{h.cid: h for h in adoption.headers}})
                for cid, data in self.store.since(0, record.conv)[0]:
                    authority_.apply(adopted, load_trusted(data, cid))

            def authority(conv: str) -> AuthorityState | None:
                return adopted if conv == record.conv else self.folds.authority(conv)

            writes, report = plan_ingest(
                (), self.store, now_ms=now, max_drift_ms=config.max_drift_ms,
                limits=config.limits, adoption=adoption, authority=authority,
            )
            self._land(writes, clock=clock)
            # the snapshot the plan checked; compacting drops nothing here, it only keeps the snapshot
            self.store.compact(record.conv, (), record.cid, adoption.snapshot)
        # the folded view lacks what only the snapshot holds; authority is rebuilt from it and the headers
        self.folds.drop(record.conv)
        self._evict(writes, report, config)
        self.writer.received(report.accepted_hlcs, now)
        return report

    def _land(self, writes: WriteSet, *, clock: Clock) -> None:
        self.store.commit(writes)
        if writes.equivocations:  # in the same transaction: no equivocation without its finding
            witnessing.record_equivocations(self.store, writes.equivocations, now_ms=clock())
        if writes.records:  # a checkpoint or cosignature that landed, or a record one waited for
            checkpointing.landed(self.store, self.watch, writes.records, self.entries, now_ms=clock())
            # a patch or snapshot whose blocks are held already is checked now; others when
            # their blocks arrive (docs/integrity.md §6.4)
            artifact_checks.check_records(self.store, writes.records, clock())

    def _evict(self, writes: WriteSet, report: IngestReport, config: Config) -> None:
        """Hold the quarantine to its bounds after a landing that grew it. The bounds are
        store-wide: an ingest evicts inside its own transaction only entries of the
        conversations it holds (`evict_pending_held`); if older entries of others must go,
        this is a transaction of its own naming no conversation (inside the landing's, two
        evictions could lock each other's conversation rows). Between the two commits the
        quarantine may be over its bounds by one landing; nothing it holds is acknowledged,
        so nothing is lost."""
        if writes.pending_put:  # only a growing quarantine can exceed its bounds
            report.evict(self.store.evict_pending(config.quarantine))


def _convs_of(items: Iterable[Item], conversations: Container[str] | None) -> list[str]:
    """The conversations an ingest of `items` writes: their writers alone wait for it. Bytes that
    did not decode write nothing; none at all, and the lock is on every writer (naming none)."""
    named = {item.conv for item in items if isinstance(item, Record)}
    if isinstance(conversations, (set, frozenset)):
        named = (named & conversations) or set(conversations)
    return sorted(named)
