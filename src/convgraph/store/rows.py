"""The values every store keeps and hands back, and the pure rules all three apply to them.

The dataclasses are what `Store` takes and returns (a quarantined record, one atomic write, a
stored finding, an undecided check, the quarantine's bounds); the functions normalise them the
same way in every store. Invariant: nothing here does I/O or knows a table's layout, so the
memory store and the SQL stores agree by construction on what they normalise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from convgraph.artifacts.blocks import decode_manifest
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.core.record import Record, RecordMeta
from convgraph.errors import ConvgraphError

PendingReason = Literal["parents", "clock"]


@dataclass(frozen=True)
class Pending:
    """A verified record held back: its parents are missing, or its clock is ahead of ours."""

    cid: CID
    data: bytes
    reason: PendingReason
    wall_ms: int
    missing: tuple[CID, ...] = ()


@dataclass
class WriteSet:
    """Everything one ingest or append changes, applied atomically by `Store.commit`."""

    records: list[Record] = field(default_factory=list)
    pending_put: list[Pending] = field(default_factory=list)  # replaces an entry by CID
    pending_remove: list[CID] = field(default_factory=list)
    equivocations: list[tuple[CID, CID]] = field(default_factory=list)
    # none of the records is stored: just signed, or checked inside this same transaction
    fresh: bool = False
    # compacted records adopted from a checkpoint's cover: stored as headers, without bytes,
    # before `records` (a record may name them); one already stored is left as it is
    headers: list[RecordMeta] = field(default_factory=list)


@dataclass(frozen=True)
class FindingRow:
    """A finding as stored (docs/integrity.md §6): its bundle and what it cites, by CID.

    `id` is the bundle's CID; `cites` the records it cites; `statements` the statement
    bytes it rests on (their CIDs are cited too, so gossip keeps them).
    """

    id: CID
    kind: str
    conv: str
    bundle: bytes
    cites: tuple[CID, ...]
    statements: tuple[bytes, ...]
    summary: str
    found_ms: int


@dataclass(frozen=True)
class PendingCheck:
    """A §4 or §5 check that its bundle could not prove yet, kept with the statements involved."""

    reason: str
    statements: tuple[bytes, ...]


GOSSIP_KEEP: Final = 8  # statements kept per (key, conversation), besides those a finding cites


@dataclass(frozen=True)
class QuarantineBounds:
    """How much the quarantine may hold before its oldest entries are evicted."""

    max_count: int = 10_000
    max_bytes: int = 64 << 20



def manifest_links(blocks: Iterable[tuple[CID, bytes]]) -> list[tuple[bytes, bytes]]:
    """The stores' `block_links` rows (`manifest, chunk`) of the manifests among `blocks`: a
    dag-cbor block that does not decode as one links nothing (`verify` reports it)."""
    links: list[tuple[bytes, bytes]] = []
    for cid, data in blocks:
        if cid.codec != DAG_CBOR:
            continue
        try:
            chunks = decode_manifest(data).chunks
        except ConvgraphError:
            continue
        links.extend((bytes(cid), bytes(c)) for c in chunks)
    return links



def finding_cids(finding: FindingRow) -> set[CID]:
    """What a finding cites: its records, and its statements by their CIDs."""
    return {*finding.cites, *map(CID.of_record, finding.statements)}


def unique_checks(checks: Iterable[PendingCheck]) -> list[PendingCheck]:
    """`checks` without repeats, first occurrence kept."""
    return list(dict.fromkeys(checks))


def sort_pairs(pairs: Sequence[tuple[CID, CID]]) -> list[tuple[CID, CID]]:
    """Equivocation pairs normalised: each pair ordered, the list sorted and unique."""
    return sorted({(min(a, b), max(a, b)) for a, b in pairs})


def key_summary(keys: Iterable[tuple[int, bytes]]) -> tuple[int, int]:
    """`Store.key_summary` of these sync keys: their digests' sum mod 2**256, and their count."""
    total = count = 0
    for _, digest in keys:
        total += int.from_bytes(digest, "little")
        count += 1
    return total % (1 << 256), count

