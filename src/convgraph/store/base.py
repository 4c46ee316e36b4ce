"""The `Store` protocol: records and indexes only, every derived view rebuildable from them.

A store holds verified records (with their header indexed), the heads of each
conversation, the quarantine of records that wait for parents or for our clock, and the
equivocation pairs seen. All writes go through `commit(WriteSet)`, which is atomic;
`transaction()` holds the write lock across reads and a commit, so a read-then-write
(the next seq, the current heads) cannot race another writer, in this process or another.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import Record, RecordMeta

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
class QuarantineBounds:
    """How much the quarantine may hold before its oldest entries are evicted."""

    max_count: int = 10_000
    max_bytes: int = 64 << 20


class Store(Protocol):
    """What every store implements; `tests/store/test_contract.py` holds them to it."""

    def transaction(self) -> AbstractContextManager[None]:
        """Hold the exclusive write lock; commits made inside land together at exit."""
        ...

    def commit(self, writes: WriteSet) -> None:
        """Apply `writes` atomically (idempotent for records already stored).

        Precondition: every parent of a record or header is stored or precedes it in
        `writes.headers` + `writes.records` (ingest guarantees it), which is what lets heads
        be maintained incrementally.
        """
        ...

    def in_transaction(self) -> bool:
        """Whether this connection holds an open transaction (its writes may yet roll back)."""
        ...

    def change_token(self) -> object:
        """A value that differs after any commit lands, from this or another connection.

        Read inside a transaction it stays put until that transaction commits, which is
        what lets a writer trust state it cached at its own last commit.
        """
        ...

    def since(self, cursor: int, conv: str) -> tuple[list[tuple[CID, bytes]], int]:
        """Records of `conv` that arrived after `cursor` (0: from the start), in arrival
        order, and the cursor to pass next time. Compacted records are left out."""
        ...

    def arrivals(self, cursor: int, limit: int) -> tuple[list[tuple[str, CID, bytes]], int]:
        """At most `limit` records of any conversation that arrived after `cursor`, each with
        its conversation, in arrival order, and the cursor to pass next (`since`'s cursors).
        Compacted records are left out (they still move the cursor)."""
        ...

    def sync_keys(self, conv: str) -> list[tuple[int, bytes]]:
        """Every stored record of `conv` as (wall_ms, sha2-256 digest of its CID), sorted:
        the set sync reconciles. Compacted records stay in it (we hold them, headers only)."""
        ...

    def cursor(self) -> int:
        """The `since` cursor as of now: passing it on yields only records that arrive later."""
        ...

    def compact(self, conv: str, covered: Iterable[CID], checkpoint: CID, snapshot: bytes) -> None:
        """Drop the bytes of `covered` records of `conv` (their headers stay, so causal
        checks and dedup still work) and keep `snapshot` as the conversation's latest."""
        ...

    def snapshot(self, conv: str) -> tuple[CID, bytes] | None:
        """The (checkpoint CID, snapshot bytes) of the conversation's latest compaction."""
        ...

    def evict_pending(self, bounds: QuarantineBounds) -> list[CID]:
        """Drop the oldest quarantined entries until within `bounds`; return what went."""
        ...

    def has(self, cid: CID) -> bool: ...

    def get(self, cid: CID) -> bytes | None:
        """The record's bytes; None when unknown or compacted (then `metas` still has it)."""
        ...

    def get_many(self, cids: Iterable[CID]) -> dict[CID, bytes]:
        """The bytes of those of `cids` that are stored and not compacted, in one look-up."""
        ...

    def metas(self, cids: Iterable[CID]) -> dict[CID, RecordMeta]:
        """Headers of those of `cids` that are stored."""
        ...

    def heads(self, conv: str) -> list[CID]:
        """The conversation's records that no stored record names as parent, sorted."""
        ...

    def at_seq(self, actor: bytes, conv: str, seq: int) -> list[CID]: ...

    def last_own(self, actor: bytes, conv: str) -> RecordMeta | None:
        """The author's stored record with the highest seq in `conv`."""
        ...

    def records(self, conv: str, last: int | None = None) -> list[tuple[CID, bytes]]:
        """The conversation's records in canonical order; with `last`, only the final ones."""
        ...

    def conversations(self) -> list[str]: ...

    def count(self, conv: str | None = None) -> int: ...

    def iter_all(self) -> Iterator[tuple[CID, bytes]]:
        """Every stored record, streamed in insertion order (constant memory)."""
        ...

    def max_hlc(self) -> Hlc: ...

    def pending_get(self, cids: Iterable[CID]) -> dict[CID, Pending]: ...

    def pending_waiting_on(self, cids: Iterable[CID]) -> list[Pending]:
        """Quarantined entries that name any of `cids` as a missing parent."""
        ...

    def pending_due(self, wall_ms: int) -> list[Pending]:
        """Entries held for the clock whose wall time is now at most `wall_ms`."""
        ...

    def pending_stats(self) -> tuple[int, int]:
        """(entries, bytes) in quarantine."""
        ...

    def equivocations(self, conv: str | None = None) -> list[tuple[CID, CID]]: ...

    def close(self) -> None: ...


CID_LEN: Final = 36


def split_cids(blob: bytes) -> tuple[CID, ...]:
    """CIDs stored back to back in one column (how the SQL stores keep parents and missing)."""
    return tuple(CID(blob[i : i + CID_LEN]) for i in range(0, len(blob), CID_LEN))


def meta_of_row(row: tuple[bytes, str, bytes, int, int, int, bytes]) -> RecordMeta:
    """A `RecordMeta` from the SQL stores' `cid, conv, actor, seq, wall, counter, parents` columns."""
    cid, conv, actor, seq, wall, counter, parents = row
    return RecordMeta(CID(cid), conv, actor, seq, Hlc(wall, counter), split_cids(parents))


def pending_of_row(row: tuple[bytes, str, int, bytes, bytes]) -> Pending:
    """A `Pending` from the SQL stores' `cid, reason, wall, missing, data` columns."""
    cid, reason, wall, missing, data = row
    why: PendingReason = "clock" if reason == "clock" else "parents"
    return Pending(CID(cid), data, why, wall, split_cids(missing))


def header_row(meta: RecordMeta) -> tuple[bytes, str, bytes, int, int, int, bytes, bytes]:
    """The SQL stores' `records` row of a header-only record: every column, empty `data`."""
    return (bytes(meta.cid), meta.conv, meta.actor, meta.seq, meta.hlc.wall_ms, meta.hlc.counter,
            b"".join(map(bytes, meta.parents)), b"")


def sort_pairs(pairs: Sequence[tuple[CID, CID]]) -> list[tuple[CID, CID]]:
    """Equivocation pairs normalised: each pair ordered, the list sorted and unique."""
    return sorted({(min(a, b), max(a, b)) for a, b in pairs})
