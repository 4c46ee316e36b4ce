"""Checkpoints a replica holds, checked against its records (docs/integrity.md §7.2, §7.3):
the imperative shell around `integrity.checkpoints`.

A checkpoint is checked when it lands (ingest or adoption), again when a record it waited
for lands, and on demand (`status`, `rescan`). A false one becomes an
`unverifiable_checkpoint` finding; two by one author, or cosigned by one witness, neither of
which extends the other, a `divergent_fork`; each only when its bundle proves it (the
builders of `integrity.evidence` return nothing else). Invariant: a checkpoint this
instance settled (verified, partly verified, false) is not checked again; an unverified one
is remembered with the records it waits for.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from convgraph.core.cid import CID
from convgraph.core.hlc import Clock, Hlc
from convgraph.core.record import Record, load_trusted
from convgraph.errors import ConvgraphError, IntegrityError, NoteError, NotFoundError
from convgraph.integrity import cosignature as cosignature_
from convgraph.integrity.builders import divergent_fork_finding, unverifiable_checkpoint_finding
from convgraph.integrity.checkpoints import Checkpoint, CheckResult, Status, causal_past, check, divergent
from convgraph.integrity.consistency import Verdict
from convgraph.integrity.findings import Finding
from convgraph.projections import state as state_
from convgraph.projections.state import ConvState, Entry
from convgraph.store.base import Store
from convgraph.store.rows import FindingRow

_CID_PREFIX = bytes((0x01, 0x71, 0x12, 0x20))  # CIDv1 dag-cbor sha2-256, as every record's
Entries = Callable[[str], Iterable[Entry]]
"""The folded entries of a conversation (header fields and payload of every record, compacted ones too)."""


@dataclass
class Watch:
    """What one replica instance knows of its checkpoints between calls."""

    settled: set[CID] = field(default_factory=set)
    waiting: dict[CID, frozenset[CID]] = field(default_factory=dict)  # unverified -> records it waits for
    scanned: dict[str, object] = field(default_factory=dict)  # conv -> change token of its last rescan


class ConvView:
    """One conversation as the checks read it: every header at once, bytes on demand."""

    def __init__(self, store: Store, conv: str) -> None:
        self.store, self.conv = store, conv
        metas = store.metas(CID(_CID_PREFIX + digest) for _, digest in store.sync_keys(conv))
        self._metas: dict[CID, tuple[Hlc, tuple[CID, ...]]] = {
            c: (m.hlc, m.parents) for c, m in metas.items() if m.conv == conv}
        self._bytes: dict[CID, bytes | None] = {}

    def lookup(self, cid: CID) -> tuple[Hlc, tuple[CID, ...]] | None:
        """(hlc, parents) of a record of the conversation held with bytes or as a header."""
        return self._metas.get(cid)

    def fetch(self, cid: CID) -> bytes | None:
        """The bytes of a held record, None for a header only."""
        if cid not in self._bytes:
            self.prefetch([cid])
        return self._bytes[cid]

    def prefetch(self, cids: Iterable[CID]) -> None:
        """Read the bytes of `cids` in one look-up."""
        wanted = [c for c in cids if c not in self._bytes]
        got = self.store.get_many(wanted)
        for c in wanted:
            self._bytes[c] = got.get(c)

    def checkpoint(self, cid: CID) -> Checkpoint | None:
        """The claim of checkpoint `cid` when it is held with bytes."""
        data = self.fetch(cid) if cid in self._metas else None
        if data is None:
            return None
        record = load_trusted(data, cid)
        return Checkpoint.of(record) if record.kind == "checkpoint" else None

    def record(self, cid: CID) -> Record | None:
        """The record `cid` of the conversation, when held with bytes."""
        data = self.fetch(cid) if cid in self._metas else None
        return None if data is None else load_trusted(data, cid)

    def check(self, cp: Checkpoint) -> CheckResult:
        """§7.2 over the records held, their bytes read in one look-up."""
        self.prefetch_past(cp)
        return check(cp, self.lookup, self.fetch)

    def prefetch_past(self, cp: Checkpoint) -> None:
        """Read the bytes of `cp`'s causal past in one look-up, when all of it is held."""
        past = causal_past(cp.heads, self.lookup)
        if not past.missing:
            self.prefetch(past.held)


def conv_of(store: Store, cid: CID) -> str:
    """The conversation of a held record, or `NotFoundError`."""
    meta = store.metas([cid]).get(cid)
    if meta is None:
        raise NotFoundError(f"no record {cid} here", cid=cid)
    return meta.conv


def status(store: Store, watch: Watch, cid: CID, *, now_ms: int) -> CheckResult:
    """§7.2's verdict on checkpoint `cid`, recording the finding of a false one."""
    view = ConvView(store, conv_of(store, cid))
    cp = view.checkpoint(cid)
    if cp is None:
        raise NotFoundError(f"record {cid} is not a checkpoint held with its bytes", cid=cid)
    result = view.check(cp)
    with store.transaction():
        _settle(store, watch, view, cp, result=result, now_ms=now_ms)
    return result


def compact_behind(store: Store, cid: CID, folded: ConvState) -> None:
    """Drop the bytes of the records checkpoint `cid` covers, keeping its snapshot (the store
    keeps what findings cite); `IntegrityError` when its snapshot is not their fold."""
    view = ConvView(store, conv_of(store, cid))
    cp = view.checkpoint(cid)
    if cp is None:
        raise NotFoundError(f"record {cid} is not a checkpoint held with its bytes", cid=cid)
    past = causal_past(cp.heads, view.lookup)
    if past.missing:
        raise IntegrityError(f"{len(past.missing)} records the checkpoint covers are not held", cid=cid)
    covered = ConvState()
    for c in sorted(past.held):  # as `checkpoints.check` folds them; entries of compacted records included
        if c not in folded.entries:
            raise IntegrityError(f"record {c} the checkpoint covers is not in the folded state", cid=cid)
        state_.apply(covered, folded.entries[c])
    data = state_.snapshot(covered)
    if state_.snapshot_cid(data) != cp.snapshot:
        raise IntegrityError("the checkpoint's snapshot is not the fold of the records it covers", cid=cid)
    store.compact(view.conv, past.held, cid, data)


def landed(
    store: Store, watch: Watch, records: Sequence[Record], entries: Entries, *, now_ms: int
) -> list[Finding]:
    """Check the checkpoints and cosignatures in `records` (just stored), and the checkpoints
    that waited for any of them; the new findings. Called inside the storing transaction."""
    convs = {r.conv for r in records if r.kind in ("checkpoint", "attestation")}
    cids: set[CID] = set()
    if watch.waiting:  # most batches land with no checkpoint waiting: skip the set of their CIDs
        cids = {r.cid for r in records}
        convs |= {r.conv for r in records if any(cids & missing for missing in watch.waiting.values())}
    if not convs:
        return []
    new: list[Finding] = []
    for conv in sorted(convs):
        view = ConvView(store, conv)
        mine = [r for r in records if r.conv == conv]
        woken = [c for c, missing in watch.waiting.items() if missing & cids]
        for cid in [*(r.cid for r in mine if r.kind == "checkpoint"), *woken]:
            cp = view.checkpoint(cid)
            if cp is not None:
                new += _settle(store, watch, view, cp, result=view.check(cp), now_ms=now_ms)
        new += _forks(store, view, mine, list(entries(conv)), now_ms)
    return new


def rescan(store: Store, watch: Watch, conv: str, entries: Iterable[Entry], *, now_ms: int) -> list[Finding]:
    """Check every unsettled checkpoint of `conv` and every pair that could fork, once per
    change of the store; the new findings."""
    token = store.change_token()
    if watch.scanned.get(conv, object()) == token:
        return []
    view, held = ConvView(store, conv), list(entries)
    new: list[Finding] = []
    with store.transaction():
        for e in held:
            if e.kind == "checkpoint" and e.cid not in watch.settled:
                cp = view.checkpoint(e.cid)
                if cp is not None:
                    new += _settle(store, watch, view, cp, result=view.check(cp), now_ms=now_ms)
        signed = (e.cid for e in held if e.kind in ("checkpoint", "attestation"))
        records = [r for r in map(view.record, signed) if r is not None]
        new += _forks(store, view, records, held, now_ms)  # every member fresh: every neighbour pair
    watch.scanned[conv] = store.change_token()
    return new


def rescan_each(store: Store, watch: Watch, convs: Iterable[str], entries: Entries, clock: Clock) -> None:
    """`rescan` each of `convs`, skipping one whose records cannot be read (`verify` reports those)."""
    for conv in convs:
        try:
            rescan(store, watch, conv, entries(conv), now_ms=clock())
        except ConvgraphError:
            continue  # the findings stored already stand


def cosignatures_of(view: ConvView, entries: Iterable[Entry], checkpoint: CID | None = None) -> Iterator[
        tuple[CID, cosignature_.Cosignature]]:
    """(attestation CID, cosignature) of each valid cosignature the conversation holds, of
    `checkpoint` only when given; valid: it verifies against the checkpoint, held with bytes."""
    for e in entries:
        if e.kind != "attestation" or e.payload.get("statement") != cosignature_.COSIGNATURE_STATEMENT:
            continue
        try:
            c = cosignature_.cosignature_of_payload(e.payload, cid=e.cid)
        except NoteError:
            continue
        if checkpoint is not None and c.checkpoint != checkpoint:
            continue
        record = view.record(c.checkpoint)
        if record is not None and cosignature_.verify(c, record):
            yield e.cid, c


# ------------------------------------------------------------ helpers


def _settle(store: Store, watch: Watch, view: ConvView, cp: Checkpoint, *, result: CheckResult,
            now_ms: int) -> list[Finding]:
    if result.status is Status.UNVERIFIED:
        watch.waiting[cp.cid] = result.missing
        return []
    watch.waiting.pop(cp.cid, None)
    if result.status is not Status.FALSE:
        watch.settled.add(cp.cid)
        return []
    finding = unverifiable_checkpoint_finding(cp.cid, view.conv, view.fetch, now_ms)
    if finding is None:  # false, but over records held as headers only: nothing proves it to others
        watch.settled.add(cp.cid)
        return []
    watch.settled.add(cp.cid)
    return [finding] if store.add_finding(finding_row(finding)) else []


def _forks(store: Store, view: ConvView, records: Sequence[Record], entries: Sequence[Entry],
           now_ms: int) -> list[Finding]:
    """The forks among one author's checkpoints, and among one witness's cosigned ones, that
    a checkpoint or cosignature in `records` takes part in.

    Each set is sorted by count; it is a chain (no fork) exactly when every two neighbours
    are ordered by extension, because extension is transitive. So only a new member's
    neighbours are compared: O(k) walks, not O(k²).
    """
    fresh = {r.cid for r in records}
    chains: list[tuple[list[CID], dict[CID, cosignature_.Cosignature]]] = []
    by_actor: dict[bytes, list[Entry]] = {}
    for e in entries:
        if e.kind == "checkpoint":
            by_actor.setdefault(e.actor, []).append(e)
    for mine in by_actor.values():
        chains.append(([e.cid for e in sorted(mine, key=lambda e: (e.payload["count"], e.order_key))], {}))
    if any(r.kind == "attestation" for r in records):
        by_key: dict[bytes, dict[CID, cosignature_.Cosignature]] = {}
        for at, c in cosignatures_of(view, entries):
            by_key.setdefault(c.key, {}).setdefault(c.checkpoint, c)
            if at in fresh:
                fresh.add(c.checkpoint)
        for signed in by_key.values():
            claims = [cp for cp in map(view.checkpoint, signed) if cp is not None]
            chains.append(([cp.cid for cp in sorted(claims, key=lambda cp: (cp.count, cp.hlc))], signed))
    new: list[Finding] = []
    for chain, signed in chains:
        for a, b in itertools.pairwise(chain):
            if a in fresh or b in fresh:
                both = tuple(signed[c] for c in (a, b) if c in signed)
                new += _fork(store, view, (a, b), both, now_ms=now_ms)
    return new


def _fork(store: Store, view: ConvView, pair: tuple[CID, CID],
          cosignatures: tuple[cosignature_.Cosignature, ...], *, now_ms: int) -> list[Finding]:
    a, b = pair
    first, second = view.checkpoint(a), view.checkpoint(b)
    if first is None or second is None or divergent(first, second, view.lookup) is not Verdict.YES:
        return []  # decided over the headers first: the builder re-verifies every record it reads
    finding = divergent_fork_finding(a, b, view.conv, view.fetch, now_ms, cosignatures=cosignatures)
    return [finding] if finding is not None and store.add_finding(finding_row(finding)) else []


def _pair(a: CID, b: CID) -> tuple[CID, CID]:
    return (a, b) if bytes(a) < bytes(b) else (b, a)


def finding_row(f: Finding) -> FindingRow:
    """A finding as the store keeps it."""
    return FindingRow(f.id, f.kind, f.conv, f.bundle, tuple(f.cites), tuple(s.data for s in f.statements),
                      f.summary, f.found_ms)
