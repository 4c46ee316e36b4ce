"""Ingest planning: decide, for a batch of foreign record bytes, what the store must change.

`plan_ingest` reads the store through the `Store` protocol and returns a `WriteSet` and an
`IngestReport`; it writes nothing, reads no clock (the time is passed in) and raises only
for store failures: every bad record becomes a `Rejection` and never stops the rest.
Invariants: a record is accepted only when all its parents are stored or accepted before
it in the same plan; a rejected record leaves no trace, and nothing that names it as a
parent is ever placed; a record waiting for parents or for our clock goes to quarantine
and is placed the moment what it waits for arrives.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc, too_far_ahead
from convgraph.core.record import (
    DEFAULT_LIMITS,
    Limits,
    Record,
    RecordMeta,
    decode_record,
    load_trusted,
)
from convgraph.core.validation import check_causality, missing_parents
from convgraph.errors import (
    CausalityError,
    CidMismatchError,
    ConvgraphError,
    ForbiddenError,
    ForgottenConversationError,
    ParentRejectedError,
)
from convgraph.projections import authority as authority_
from convgraph.replica.adoption import Adoption
from convgraph.store.base import Store
from convgraph.store.rows import Pending, WriteSet

AuthorityOf = Callable[[str], "authority_.AuthorityState | None"]
"""The authority state of a conversation (None: legacy, no authority), brought up to date."""

Item = bytes | tuple[bytes, CID] | Record
"""Record bytes, optionally with the CID a peer claims they hash to, or a record `decoded`
already checked against every intrinsic rule (`prepared`): planning then skips the signature."""


@dataclass(frozen=True)
class Rejection:
    """A record refused on ingest, with the typed error naming the broken rule."""

    cid: CID | None
    error: ConvgraphError

    @property
    def rule(self) -> str:
        """The broken rule's stable name (`signature`, `seq`, `canonical`, …)."""
        return self.error.rule


@dataclass
class IngestReport:
    """What one ingest did with each record it was handed (and with what it woke up).

    A CID is in at most one of `accepted`, `quarantined`, `held`, `rejected` and `evicted`:
    where the record stands when the ingest ends. `duplicates` lists the handed-in copies
    that were already stored, already waiting, or repeated; `released` is the part of
    `accepted` that had been waiting in the stored quarantine.
    """

    accepted: list[CID] = field(default_factory=list)
    duplicates: list[CID] = field(default_factory=list)
    quarantined: list[CID] = field(default_factory=list)
    held: list[CID] = field(default_factory=list)
    released: list[CID] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    evicted: list[CID] = field(default_factory=list)
    equivocations: list[tuple[CID, CID]] = field(default_factory=list)
    adopted: list[CID] = field(default_factory=list)  # checkpoints adopted (they are accepted too)
    accepted_hlcs: list[Hlc] = field(default_factory=list)

    def evict(self, evicted: list[CID]) -> None:
        """Record what the quarantine bounds evicted: those records are no longer waiting."""
        self.evicted = evicted
        gone = set(evicted)
        self.quarantined = [c for c in self.quarantined if c not in gone]
        self.held = [c for c in self.held if c not in gone]

    def merge(self, later: IngestReport) -> None:
        """Add the report of the next part of one ingest landed in parts (`merged`)."""
        self.__dict__.update(IngestReport.merged([self, later]).__dict__)

    @staticmethod
    def merged(parts: Iterable[IngestReport]) -> IngestReport:
        """The reports of the parts of one ingest landed in parts, in order, as one: each CID
        stands where the last part left it, as one ingest of every part together would report it.

        A record this ingest put in the quarantine and a later part placed is `accepted`, not
        `released` (it never waited for anything but the rest of this ingest). Linear in the
        parts' entries: each part costs what it reports, not what the parts before it did.
        """
        out = IngestReport()
        quarantined: dict[CID, None] = {}
        held: dict[CID, None] = {}
        evicted: dict[CID, None] = {}
        for part in parts:
            decided = [*part.accepted, *part.evicted, *(r.cid for r in part.rejected if r.cid is not None)]
            out.released += [c for c in part.released if c not in quarantined and c not in held]
            for cid in decided:
                quarantined.pop(cid, None)
                held.pop(cid, None)
                evicted.pop(cid, None)
            quarantined.update(dict.fromkeys(part.quarantined))
            held.update(dict.fromkeys(part.held))
            evicted.update(dict.fromkeys(part.evicted))
            for name in ("accepted", "duplicates", "rejected", "equivocations", "adopted", "accepted_hlcs"):
                getattr(out, name).extend(getattr(part, name))
        out.quarantined, out.held, out.evicted = list(quarantined), list(held), list(evicted)
        return out


@dataclass
class _Plan:
    store: Store
    now_ms: int
    max_drift_ms: int
    report: IngestReport = field(default_factory=IngestReport)
    writes: WriteSet = field(default_factory=WriteSet)
    known: dict[CID, RecordMeta | Record] = field(default_factory=dict)
    pending: dict[CID, Pending | None] = field(default_factory=dict)  # None: leaves quarantine
    was_pending: set[CID] = field(default_factory=set)
    waiting: defaultdict[CID, list[Record]] = field(default_factory=lambda: defaultdict(list))
    decided: set[CID] = field(default_factory=set)
    rejected: set[CID] = field(default_factory=set)
    chain: dict[tuple[bytes, str, int], list[CID]] = field(default_factory=dict)
    work: deque[Record] = field(default_factory=deque)
    top_seq: dict[tuple[bytes, str], int] = field(default_factory=dict)
    store_waits: bool = True  # False when the stored quarantine is empty: skip its look-ups
    batch: set[CID] = field(default_factory=set)  # the CIDs this batch brings, not yet stored
    authority: AuthorityOf | None = None

    def place(self, rec: Record) -> None:
        if rec.cid in self.decided:
            return
        if too_far_ahead(rec.hlc, self.now_ms, self.max_drift_ms):
            self.pending[rec.cid] = Pending(rec.cid, rec.data, "clock", rec.hlc.wall_ms)
            return
        if self.rejected and any(p in self.rejected for p in rec.parents):
            self._reject(rec, ParentRejectedError("a parent was rejected", cid=str(rec.cid)))
            return
        missing = missing_parents(rec, self.known)
        # a parent coming later in this same batch is not in the store: don't ask it
        unasked = [p for p in missing if p not in self.batch]
        if unasked:
            self.known.update(self.store.metas(unasked))
            missing = missing_parents(rec, self.known)
        if missing:
            self.pending[rec.cid] = Pending(rec.cid, rec.data, "parents", rec.hlc.wall_ms, tuple(missing))
            for parent in missing:
                self.waiting[parent].append(rec)
            return
        try:
            check_causality(rec, self.known)
            state = None if self.authority is None else self.authority(rec.conv)
            if state is not None:
                authority_.check(state, rec)  # docs/authority.md §4 and §8, in its causal past
        except CausalityError as exc:
            self._reject(rec, exc)
            return
        if state is not None:
            authority_.apply(state, rec)
        self._accept(rec)

    def _reject(self, rec: Record, error: ConvgraphError) -> None:
        self.decided.add(rec.cid)
        self.rejected.add(rec.cid)
        self.report.rejected.append(Rejection(rec.cid, error))
        self.pending[rec.cid] = None  # `run` turns this into a removal if it was stored
        self._wake(rec.cid)

    def _accept(self, rec: Record) -> None:
        cid = rec.cid
        self.decided.add(cid)
        self.known[cid] = rec  # a record holds every field of its header: no `RecordMeta` needed
        self.writes.records.append(rec)
        self.report.accepted.append(cid)
        self.report.accepted_hlcs.append(rec.hlc)
        # both are empty in the common case
        if self.was_pending and cid in self.was_pending:
            self.pending[cid] = None  # `run` turns this into a removal from the stored quarantine
            self.report.released.append(cid)
        elif self.pending and cid in self.pending:
            self.pending[cid] = None  # it waited in this plan: it is placed now, not put
        key = (rec.actor, rec.conv, rec.seq)
        same = self.chain.get(key)
        if same is None:
            self.chain[key] = same = []
        stored = self.store.at_seq(*key) if rec.seq <= self._top_seq(rec.actor, rec.conv) else ()
        if stored or same:  # rare: another record already holds this author's seq
            for rival in sorted({*stored, *same} - {cid}):
                self.writes.equivocations.append((rival, cid))
                self.report.equivocations.append((rival, cid))
        same.append(cid)
        self._wake(cid)

    def _top_seq(self, actor: bytes, conv: str) -> int:
        """The author's highest stored seq: above it no stored rival can exist."""
        if (actor, conv) not in self.top_seq:
            last = self.store.last_own(actor, conv)
            self.top_seq[(actor, conv)] = 0 if last is None else last.seq
        return self.top_seq[(actor, conv)]

    def _wake(self, cid: CID) -> None:
        if self.waiting:
            self.work.extend(self.waiting.pop(cid, ()))
        if self.store_waits:
            self._wake_stored([cid])

    def _wake_stored(self, cids: list[CID]) -> None:
        if not self.store_waits:
            return
        for entry in self.store.pending_waiting_on(cids):
            if entry.cid not in self.decided and entry.cid not in self.pending:
                self.was_pending.add(entry.cid)
                self.work.append(load_trusted(entry.data, entry.cid))

    def adopt(self, adoption: Adoption) -> None:
        """Hold the cover's headers as compaction leaves them, then place the checkpoint on them."""
        for header in adoption.headers:
            self.known[header.cid] = header
            self.chain.setdefault((header.actor, header.conv, header.seq), []).append(header.cid)
        self.writes.headers.extend(adoption.headers)
        checkpoint = adoption.checkpoint
        if self.store_waits and self.store.pending_get([checkpoint.cid]):
            self.was_pending.add(checkpoint.cid)
        self.report.adopted.append(checkpoint.cid)
        self.work.append(checkpoint)
        self._wake_stored([h.cid for h in adoption.headers])

    def refuse(self, cid: CID) -> None:
        """`cid` failed the intrinsic checks: whatever names it as a parent is rejected too."""
        self.rejected.add(cid)
        self._wake(cid)  # stored waiters come back to be rejected; batch ones check at placing

    def run(self) -> None:
        while self.work:
            self.place(self.work.popleft())
        for cid, entry in self.pending.items():
            if entry is None:
                if cid in self.was_pending:
                    self.writes.pending_remove.append(cid)
                continue
            self.writes.pending_put.append(entry)
            if cid not in self.was_pending:  # reported once, by where it ended: not if placed later
                (self.report.held if entry.reason == "clock" else self.report.quarantined).append(cid)


def prepared(items: Iterable[Item], limits: Limits = DEFAULT_LIMITS) -> list[Item]:
    """`items` with each one that passes every intrinsic rule decoded (its signature checked):
    the costly, store-free part of judging, done before any lock. Bytes that fail stay bytes,
    so planning refuses them exactly as it would have."""
    out: list[Item] = []
    for item in items:
        if isinstance(item, Record):
            out.append(item)
            continue
        data, claimed = (item, None) if isinstance(item, bytes) else item
        try:
            out.append(decode_record(bytes(data), limits=limits, expected_cid=claimed))
        except ConvgraphError:
            out.append(item)
    return out


def _decoded(plan: _Plan, item: Item, limits: Limits) -> Record | None:
    """The record `item` encodes, or None with its rejection in `plan` (and what names it refused)."""
    if isinstance(item, Record):
        return item
    data, claimed = (item, None) if isinstance(item, bytes) else item
    try:
        return decode_record(bytes(data), limits=limits, expected_cid=claimed)
    except ConvgraphError as exc:
        # bytes that break an intrinsic rule name an invalid record forever, unless they
        # were offered under another CID or were too big to hash (then nothing is known)
        if not isinstance(exc, CidMismatchError) and len(data) <= limits.max_record_bytes:
            claimed = claimed or CID.of_record(bytes(data))
            plan.refuse(claimed)
        plan.report.rejected.append(Rejection(claimed, exc))
        return None


def plan_ingest(
    items: Iterable[Item],
    store: Store,
    *,
    now_ms: int,
    max_drift_ms: int,
    limits: Limits = DEFAULT_LIMITS,
    conversations: Container[str] | None = None,
    adoption: Adoption | None = None,
    authority: AuthorityOf | None = None,
    refused: Iterable[CID] = (),
) -> tuple[WriteSet, IngestReport]:
    """Validate `items` and plan their placement against what `store` holds.

    With `conversations`, a record of any other conversation is rejected (`ForbiddenError`):
    a sync peer admitted to some conversations cannot smuggle records into others. With an
    `adoption` (checked by `plan_adoption`), its headers and checkpoint are placed first.
    With `authority`, each record of a rooted conversation is judged by its authority state,
    which accepted records are added to (the caller drops that state if the plan is not landed).
    `refused` are CIDs rejected by an earlier part of the same ingest: what names them is rejected.
    """
    plan = _Plan(store, now_ms, max_drift_ms, store_waits=store.pending_any(),
                 authority=authority)
    plan.writes.fresh = True  # only records found absent below are ever accepted
    plan.rejected.update(refused)
    if adoption is not None:
        plan.adopt(adoption)
    fresh: dict[CID, Record] = {}
    for item in items:
        rec = _decoded(plan, item, limits)
        if rec is None:
            continue
        if conversations is not None and rec.conv not in conversations:
            error = ForbiddenError(f"record of conversation {rec.conv!r}, which this exchange does not cover",
                                   cid=rec.cid)
            plan.report.rejected.append(Rejection(rec.cid, error))
        elif rec.cid in fresh:
            plan.report.duplicates.append(rec.cid)
        else:
            fresh[rec.cid] = rec
    if forgotten := store.forgotten({r.conv for r in fresh.values()}):  # never brought back by sync
        for cid in [c for c, r in fresh.items() if r.conv in forgotten]:
            conv = fresh.pop(cid).conv
            forgot = ForgottenConversationError(f"record of conversation {conv!r}, which this replica forgot",
                                                conv=conv, cid=cid)
            plan.report.rejected.append(Rejection(cid, forgot))
    # one read for both: which records are stored already, and the metas of their parents
    # (a tiny push's parents are a few heads: one statement, not two)
    found = store.metas({*fresh, *(p for r in fresh.values() for p in r.parents if p not in fresh)})
    stored = {c for c in fresh if c in found}
    queued = set(store.pending_get(c for c in fresh if c not in stored)) if plan.store_waits else set()
    for cid, rec in fresh.items():
        if (stored and cid in stored) or (queued and cid in queued):
            plan.report.duplicates.append(cid)
        else:
            plan.work.append(rec)
            plan.batch.add(cid)
    # a parent this batch brings is not stored (`batch` holds only CIDs found absent)
    plan.known.update({p: found[p] for r in plan.work for p in r.parents
                       if p not in plan.batch and p in found})
    for entry in store.pending_due(now_ms + max_drift_ms) if plan.store_waits else ():
        plan.was_pending.add(entry.cid)
        plan.work.append(load_trusted(entry.data, entry.cid))
    plan.run()
    return plan.writes, plan.report
