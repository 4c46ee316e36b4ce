"""The artifact blocks of the memory store (docs/format.md §17), and which records name them.

Blocks are kept by CID beside the records, with the manifest-chunk links `put_blocks` derives,
the artifacts each conversation's records name, and the conversations each block was admitted
for. Invariant: the naming tables hold exactly the `artifact_links` of the stored records.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from convgraph.core.cid import CID
from convgraph.core.record import Record
from convgraph.store.memory_journal import MemoryJournal
from convgraph.store.rows import manifest_links


class MemoryBlocks(MemoryJournal):
    """The block and artifact tables and their methods of the `Store` protocol."""

    def __init__(self) -> None:
        super().__init__()
        self._blocks: dict[CID, bytes] = {}
        self._artifact_refs: dict[str, set[CID]] = {}
        self._admitted: dict[CID, frozenset[str]] = {}  # block -> conversations it came for
        self._namers: dict[tuple[str, CID], set[CID]] = {}  # (conv, artifact) -> records naming it
        self._naming: dict[CID, set[str]] = {}  # artifact -> conversations naming it
        self._chunks: dict[CID, frozenset[CID]] = {}  # held manifest -> its chunks
        self._manifests: dict[CID, set[CID]] = {}  # chunk -> held manifests listing it

    def _name(self, record: Record, links: frozenset[CID]) -> None:
        self._own(self._artifact_refs, record.conv, set).update(links)
        for cid in links:
            self._own(self._namers, (record.conv, cid), set).add(record.cid)
            self._own(self._naming, cid, set).add(record.conv)

    def put_blocks(self, blocks: Iterable[tuple[CID, bytes]]) -> None:
        with self.transaction():
            for cid, data in blocks:
                if cid not in self._blocks:
                    self._set(self._blocks, cid, bytes(data))
                    if chunks := frozenset(CID._trusted(c) for _, c in manifest_links([(cid, data)])):
                        self._set(self._chunks, cid, chunks)
                        for chunk in chunks:
                            self._own(self._manifests, chunk, set).add(cid)

    # reads take the lock like the others: a put in another thread's open transaction may
    # still roll back, and must not be seen before it commits
    def get_block(self, cid: CID) -> bytes | None:
        with self._lock:
            return self._blocks.get(cid)

    def has_blocks(self, cids: Iterable[CID]) -> set[CID]:
        with self._lock:
            return {c for c in cids if c in self._blocks}

    def block_cids(self) -> Iterator[CID]:
        with self._lock:
            cids = sorted(self._blocks)
        yield from cids

    def artifact_refs(self, conv: str) -> set[CID]:
        with self._lock:
            return set(self._artifact_refs.get(conv, ()))

    def admit_blocks(self, conv: str, cids: Iterable[CID]) -> None:
        with self.transaction():
            for cid in set(cids):
                if conv not in (had := self._admitted.get(cid, frozenset())):
                    self._set(self._admitted, cid, had | {conv})

    def admitted(self, conv: str, cids: Iterable[CID]) -> set[CID]:
        with self._lock:
            return {c for c in set(cids) if conv in self._admitted.get(c, ())}

    def admitting(self, cids: Iterable[CID]) -> set[str]:
        with self._lock:
            return {conv for c in set(cids) for conv in self._admitted.get(c, ())}

    def records_naming(self, conv: str, cids: Iterable[CID]) -> dict[CID, set[CID]]:
        with self._lock:
            return {c: set(self._namers[conv, c]) for c in set(cids) if (conv, c) in self._namers}

    def conversations_naming(self, cids: Iterable[CID]) -> set[str]:
        with self._lock:
            return {conv for c in set(cids) for conv in self._naming.get(c, ())}

    def chunks_of(self, manifests: Iterable[CID]) -> dict[CID, set[CID]]:
        with self._lock:
            return {m: set(self._chunks[m]) for m in set(manifests) if m in self._chunks}

    def manifests_of(self, chunks: Iterable[CID]) -> dict[CID, set[CID]]:
        with self._lock:
            return {c: set(self._manifests[c]) for c in set(chunks) if c in self._manifests}

    def _forget_blocks(self, conv: str, dropped: set[CID]) -> None:
        """Drop `conv`'s naming and admissions, and the blocks `dropped` (`unshared_blocks`)."""
        keep = self._replace
        self._drop(conv, ("_artifact_refs",), (("_namers", 0),))
        keep("_admitted", {c: left for c, convs in self._admitted.items() if (left := convs - {conv})})
        keep("_naming", {c: named for c, convs in self._naming.items() if (named := convs - {conv})})
        keep("_blocks", {c: d for c, d in self._blocks.items() if c not in dropped})
        keep("_chunks", {m: cs for m, cs in self._chunks.items() if m not in dropped})
        keep("_manifests", {c: listing for c, ms in self._manifests.items() if (listing := ms - dropped)})
