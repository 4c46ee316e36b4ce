"""Re-checking a store from its bytes: what `Replica.verify` and `Replica.get` read.

Invariant: `verify_store` reports every stored record (and every compacted conversation's
snapshot) that fails a rule it was accepted under, every record whose turn index row
disagrees with it (docs/conversation.md §8.5), and every artifact block that does not hash to
its CID or is not the manifest it should be (docs/format.md §17.6); it never changes the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from convgraph.core.cid import CID
from convgraph.core.record import Limits, Record, decode_record, load_trusted
from convgraph.core.validation import check_causality
from convgraph.errors import CausalityError, CompactedError, ConvgraphError, NotFoundError, SnapshotError
from convgraph.projections import state as state_
from convgraph.replica import artifacts as replica_artifacts
from convgraph.replica import turn_index
from convgraph.replica.adoption import check_cover
from convgraph.store.base import Store


@dataclass
class VerifyReport:
    """The result of re-checking every stored record from its bytes.

    `headers_only` counts the records held without bytes (compacted here, or adopted with a
    checkpoint): their signatures cannot be re-checked, only that the signed checkpoint's
    snapshot and cover vouch for them.
    """

    checked: int = 0
    failures: list[tuple[CID, ConvgraphError]] = field(default_factory=list)
    headers_only: int = 0
    blocks_checked: int = 0
    missing_artifacts: dict[str, list[CID]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every stored record re-verified."""
        return not self.failures


def stored_record(store: Store, cid: CID) -> Record:
    """The stored record named `cid`; `CompactedError` when only its header is held."""
    data = store.get(cid)
    if data is None:
        if store.metas([cid]):
            raise CompactedError("the record was compacted behind a checkpoint: only its header is held",
                                 cid=str(cid))
        raise NotFoundError(f"no record {cid}", cid=str(cid))
    return load_trusted(data, cid)


def verify_store(store: Store, limits: Limits) -> VerifyReport:
    """Re-hash, re-verify and re-check the causal rules of every stored record, streaming."""
    report = VerifyReport()
    total = store.count()
    for cid, data in store.iter_all():
        report.checked += 1
        try:
            record = decode_record(data, limits=limits, expected_cid=cid)
            parents = store.metas(record.parents)
            if len(parents) != len(record.parents):
                raise CausalityError("a parent is missing from the store", cid=str(cid))
            check_causality(record, parents)
        except ConvgraphError as exc:
            report.failures.append((cid, exc))
    report.headers_only = max(0, total - report.checked)
    for conv in store.conversations():
        _verify_snapshot(store, conv, report)
    report.failures += turn_index.check(store)  # a cache of the fold, held to the records
    report.blocks_checked, rotten = replica_artifacts.verify_blocks(store)
    report.failures += rotten
    for conv in store.conversations():  # sync may still bring them: informational
        if missing := replica_artifacts.missing(store, conv):
            report.missing_artifacts[conv] = missing
    return report


def _verify_snapshot(store: Store, conv: str, report: VerifyReport) -> None:
    """A compacted conversation's snapshot must be the one its signed checkpoint names, and
    the headers held for its records must be its cover (`adoption.check_cover`)."""
    snap = store.snapshot(conv)
    if snap is None:
        return
    checkpoint, data = snap
    report.checked += 1
    try:
        record = stored_record(store, checkpoint)
        cids = list(state_.restore(data).entries)
        headers = store.metas(cids)
        if len(headers) != len(cids):
            raise SnapshotError("the snapshot holds a record held nowhere here", cid=checkpoint)
        check_cover(record, data, headers.values())
    except ConvgraphError as exc:
        report.failures.append((checkpoint, exc))
