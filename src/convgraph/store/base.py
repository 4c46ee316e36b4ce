"""The `Store` protocol: records and their indexes, every derived view rebuildable from them.

A store holds verified records (with their header indexed), the turn index of each
conversation (docs/conversation.md §8: rows derived from the records in the same commit), the
heads of each conversation, the quarantine of records that wait for parents or for our clock, and the
equivocation pairs seen; beside them, what the replica remembers of its peers' signed
statements and the findings it made (docs/integrity.md §4-§6), which no record rebuilds.
Record writes go through `commit(WriteSet)`, which is atomic; the witnessed-history writes
through their own methods, each joining an open transaction. `transaction()` holds the
write lock across reads and writes, so a read-then-write (the next seq, the current heads)
cannot race another writer, in this process or another. The values the protocol takes and
returns live in `store.rows`; how the SQL stores lay them out in columns, in `store.sql_rows`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import RecordMeta
from convgraph.integrity.statement import Statement
from convgraph.projections.index_rows import BranchRow, LineRow, OrderKey, Row, TargetRow
from convgraph.store.rows import FindingRow, Pending, PendingCheck, QuarantineBounds, WriteSet


class Store(Protocol):
    """What every store implements; `tests/store/test_contract.py` holds them to it."""

    def transaction(self, *convs: str) -> AbstractContextManager[None]:
        """Hold the write lock; commits made inside land together at exit. Naming `convs`, the
        lock holds off only the writers of those conversations (where the store can tell them
        apart: PostgreSQL); naming none, every writer."""
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
        what lets a writer trust state it cached at its own last commit; after a rollback it
        matches no value read inside, so state cached there is never trusted.
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

    def cursor(self, conv: str | None = None) -> int:
        """The cursor as of now: passing it on yields only records that arrive later; of `conv`,
        for `since` and `keys_since` (a count of the conversation's arrivals in the SQL
        stores), else for `arrivals` (the store-wide feed)."""
        ...

    def conv_token(self, conv: str) -> object:
        """A value that differs after any commit that changed `conv` lands (its records, heads,
        turn index, snapshot or hidden set), with `change_token`'s rules inside a transaction.

        It may also move when only other conversations changed; it never stays put when `conv` did.
        """
        ...

    def keys_since(self, conv: str, cursor: int) -> tuple[list[tuple[int, bytes]], int]:
        """The `sync_keys` of `conv`'s records that arrived after `cursor` (`since`'s cursors,
        0: from the start), compacted ones included, unsorted; and the cursor to pass next."""
        ...

    def key_summary(self, conv: str) -> tuple[int, int]:
        """(sum of the `sync_keys` digests as little-endian integers mod 2**256, how many):
        what the whole conversation's sync fingerprint is made of (`sync/keyset.py`)."""
        ...

    def compact(self, conv: str, covered: Iterable[CID], checkpoint: CID, snapshot: bytes) -> None:
        """Drop the bytes of `covered` records of `conv` (their headers stay, so causal
        checks and dedup still work) and keep `snapshot` as the conversation's latest.

        Records a finding cites (`cited`) or that equivocate keep their bytes: they are evidence.
        """
        ...

    def snapshot(self, conv: str) -> tuple[CID, bytes] | None:
        """The (checkpoint CID, snapshot bytes) of the conversation's latest compaction."""
        ...

    def evict_pending(self, bounds: QuarantineBounds) -> list[CID]:
        """Drop the oldest quarantined entries until within `bounds`; return what went."""
        ...

    def evict_pending_held(self, bounds: QuarantineBounds) -> list[CID] | None:
        """`evict_pending` inside the open transaction, if every entry that goes is of a
        conversation whose writers it holds off (None, and nothing done, if not: then
        `evict_pending` after it). Saves a landing that grew the quarantine a transaction."""
        ...

    def has(self, cid: CID) -> bool: ...

    def cids_like(self, head: bytes, tail: bytes, limit: int) -> list[CID]:
        """Up to `limit` stored records' CIDs whose binary form starts with `head` and ends with
        `tail`, sorted (what a short CID may name, `core/short_cid.py`)."""
        ...

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

    def records_after(self, conv: str, after: OrderKey | None, limit: int) -> list[tuple[CID, bytes]]:
        """Up to `limit` of the conversation's records held with bytes, in canonical order,
        strictly after the one whose order key is `after` (from the start when None): a page of
        a stream that never holds the whole conversation."""
        ...

    def first(self, conv: str) -> tuple[CID, bytes] | None:
        """The conversation's earliest record held with bytes, in canonical order (a rooted
        conversation's genesis, unless compaction dropped its bytes); None when there is none."""
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

    def pending_any(self) -> bool:
        """Whether anything is in quarantine (cheaper than `pending_stats`: no count)."""
        return self.pending_stats()[0] > 0

    def equivocations(self, conv: str | None = None) -> list[tuple[CID, CID]]: ...

    # ---- the turn index (docs/conversation.md §8): `commit` and `compact` keep its rows

    def reading(self) -> AbstractContextManager[None]:
        """Make the reads inside see one committed state (within a transaction: its own)."""
        ...

    def line(self, conv: str, line: str, below: OrderKey | None, limit: int) -> list[LineRow]:
        """Up to `limit` rows of `line` of `conv` strictly before `below` (None: from the end),
        last first (their records' bytes: `get_many`)."""
        ...

    def targets(self, conv: str, targets: Iterable[CID]) -> list[tuple[TargetRow, bytes]]:
        """The retraction and supersession rows of `conv` naming any of `targets`, each with
        its record's bytes (empty when compacted)."""
        ...

    def branch_rows(self, conv: str, name: str) -> list[BranchRow]:
        """The `branch` rows of `conv` naming `name`, in canonical order."""
        ...

    def index_rows(self, conv: str) -> list[Row]:
        """Every turn index row of `conv` (what `verify` compares with the records)."""
        ...

    def reindex(self, conv: str, rows: Iterable[Row]) -> None:
        """Replace every turn index row of `conv` with `rows` (a repair; joins an open transaction)."""
        ...

    def hidden(self, conv: str) -> frozenset[CID] | None:
        """The records the views of `conv` hide, as last set; None unless it is current (set,
        and no record of `conv` stored since)."""
        ...

    def set_hidden(self, conv: str, cids: Iterable[CID]) -> None:
        """Set what the views of `conv` hide, current as of the records stored now."""
        ...

    # ---- witnessed history (docs/integrity.md §4-§6); every write joins an open transaction

    def remember(self, statement: Statement) -> None:
        """Make `statement` the remembered one of its (key, conv), replacing any before it."""
        ...

    def remembered(self, peer: bytes, conv: str) -> bytes | None:
        """The remembered statement of `peer` about `conv`, as bytes."""
        ...

    def remembered_in(self, conv: str) -> list[bytes]:
        """Every peer's remembered statement about `conv`."""
        ...

    def add_receipts(self, receipts: Iterable[Statement]) -> None:
        """Keep `receipts` open (idempotent by statement CID)."""
        ...

    def open_receipts(self, peer: bytes, conv: str) -> list[bytes]:
        """The open receipts of `peer` about `conv`, oldest first (by time, then CID)."""
        ...

    def close_receipts(self, peer: bytes, conv: str, cids: Iterable[CID]) -> None:
        """Close the open receipts named by statement CID; unknown ones are ignored."""
        ...

    def add_gossip(self, statement: Statement) -> None:
        """Keep a gossiped statement: at most `GOSSIP_KEEP` latest per (key, conv), plus
        any a finding cites (a statement that would be pruned at once is not kept)."""
        ...

    def gossip(self, conv: str) -> list[bytes]:
        """The gossiped statements about `conv`, newest first (by time, then CID)."""
        ...

    def pending_checks(self, peer: bytes, conv: str) -> list[PendingCheck]:
        """The checks kept undecided about `peer`'s statements of `conv`, in the order set."""
        ...

    def set_pending_checks(self, peer: bytes, conv: str, checks: Sequence[PendingCheck]) -> None:
        """Replace the pending checks of (`peer`, `conv`) with `checks` (duplicates dropped)."""
        ...

    def add_finding(self, finding: FindingRow) -> bool:
        """Store a finding; False when one with its id is stored already (then nothing changes)."""
        ...

    def findings(self, conv: str | None = None) -> list[FindingRow]:
        """The stored findings (of `conv`), by found time, then id."""
        ...

    def cited(self, conv: str) -> set[CID]:
        """The CIDs of records and statements that findings about `conv` cite: `compact`
        keeps their bytes (and those of equivocating records), gossip pruning keeps them."""
        ...

    # artifacts (docs/format.md §17): blocks beside the records, checked by the caller

    def put_blocks(self, blocks: Iterable[tuple[CID, bytes]]) -> None:
        """Store blocks whose bytes the caller checked against their CIDs; a block already held
        is left as it is. Atomic; inside an open `transaction` it lands with it."""
        ...

    def get_block(self, cid: CID) -> bytes | None:
        """A block's bytes as stored (the caller checks them: storage can rot), or None."""
        ...

    def has_blocks(self, cids: Iterable[CID]) -> set[CID]:
        """Those of `cids` held as blocks."""
        ...

    def block_cids(self) -> Iterator[CID]:
        """Every held block's CID, in binary order, streamed (constant memory)."""
        ...

    def artifact_refs(self, conv: str) -> set[CID]:
        """Every CID that the conversation's stored records name as artifacts
        (`artifacts.artifact_links`), held or not; kept by `commit` for each record it stores."""
        ...

    def admit_blocks(self, conv: str, cids: Iterable[CID]) -> None:
        """Note that these held blocks' bytes came to this replica for `conv` (a peer sent
        them in its section, a file's records name them, or this replica wrote a record naming
        them): only then may `conv`'s readers fetch them here (docs/sync.md, *Artifacts*)."""
        ...

    def admitted(self, conv: str, cids: Iterable[CID]) -> set[CID]:
        """Those of `cids` admitted for `conv`."""
        ...

    def admitting(self, cids: Iterable[CID]) -> set[str]:
        """The conversations any of `cids` was admitted for."""
        ...

    def records_naming(self, conv: str, cids: Iterable[CID]) -> dict[CID, set[CID]]:
        """For each of `cids` that the conversation's stored records name as an artifact, the
        records naming it (kept by `commit` beside `artifact_refs`); one look-up per call."""
        ...

    def conversations_naming(self, cids: Iterable[CID]) -> set[str]:
        """The conversations whose stored records name any of `cids` as an artifact."""
        ...

    def chunks_of(self, manifests: Iterable[CID]) -> dict[CID, set[CID]]:
        """For each held manifest among `manifests`, the chunks it lists: links `put_blocks`
        keeps for every dag-cbor block that decodes as a §17 manifest, so no caller decodes."""
        ...

    def manifests_of(self, chunks: Iterable[CID]) -> dict[CID, set[CID]]:
        """For each of `chunks` that a held manifest lists, the manifests listing it."""
        ...

    # forgetting (docs/conversation.md, *Forgetting a conversation*): this replica's disk only

    def forget(self, conv: str) -> None:
        """Drop `conv` from this store in one transaction: its records (compacted ones too), its
        quarantined records, every row kept per conversation (heads, snapshot, turn index, hidden
        set, artifact rows, statements, receipts, gossip, checks, findings, equivocations), and
        the blocks `unshared_blocks` picks, then remember `conv` as forgotten. Nothing is signed:
        other replicas keep the conversation whole. Outside an open transaction, the file (if
        any) shrinks by what was dropped."""
        ...

    def forgotten(self, convs: Iterable[str]) -> set[str]:
        """Those of `convs` this store forgot: it neither stores nor syncs their records again."""
        ...

    def vacuum(self) -> None:
        """Hand the space of deleted rows back to the file system (outside any transaction)."""
        ...

    def close(self) -> None: ...


def unshared_blocks(store: Store, conv: str) -> set[CID]:
    """The held blocks that forgetting `conv` may drop: those its records name, with the chunks
    of such manifests, unless another conversation names or admitted one (a chunk stays while a
    manifest that stays lists it). Invariant: no block that another
    conversation's records name, or that was admitted for it, is ever among them."""
    candidates = store.artifact_refs(conv)
    candidates |= {c for chunks in store.chunks_of(candidates).values() for c in chunks}
    held = store.has_blocks(candidates)

    def shared(cids: set[CID]) -> set[CID]:
        others = (store.conversations_naming(cids) | store.admitting(cids)) - {conv}
        if not others:
            return set()
        return {c for c in cids if (store.conversations_naming({c}) | store.admitting({c})) - {conv}}

    keep = shared(held)
    lists = store.manifests_of(held)
    doomed = held - keep
    while True:  # a chunk stays while any manifest listing it stays
        staying = {c for c in doomed if any(m not in doomed for m in lists.get(c, ()))}
        if not staying:
            return doomed
        doomed -= staying
