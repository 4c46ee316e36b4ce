"""Artifact blocks in the SQL stores: the blocks by CID, the manifest links between them, the
records that name them and the conversations that admitted them.

Invariant: a block is stored once, by its CID; blocks change no view of the records, so
writing them never moves the change token.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from convgraph.core.cid import CID
from convgraph.store.rows import manifest_links
from convgraph.store.sql.core import PAGE
from convgraph.store.sql.witness import Witness
from convgraph.store.sql_rows import group


class Blocks(Witness):
    """The `blocks`, `block_links`, `artifact_refs` and `block_admitted` tables."""

    def put_blocks(self, blocks: Iterable[tuple[CID, bytes]]) -> None:
        # no `_bump`: blocks change no view of the records, so caches keyed on the token hold
        blocks = list(blocks)
        if not blocks:
            return
        with self.transaction():
            self._batch([
                ("INSERT INTO {s}.blocks (cid, data) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                 [(self._blob(c), d) for c, d in blocks]),
                ("INSERT INTO {s}.block_links VALUES (%s, %s) ON CONFLICT DO NOTHING",
                 manifest_links(blocks)),
            ])

    def get_block(self, cid: CID) -> bytes | None:
        # binary results: in text format a bytea crosses the wire as hex, twice its size
        rows = self._q("SELECT data FROM {s}.blocks WHERE cid = %s", bytes(cid), binary=True)
        return bytes(rows[0][0]) if rows else None

    def has_blocks(self, cids: Iterable[CID]) -> set[CID]:
        wanted = {bytes(c): c for c in cids}
        rows = self._any("SELECT cid FROM {s}.blocks WHERE cid {in}", wanted)
        return {wanted[bytes(r[0])] for r in rows}

    def block_cids(self) -> Iterator[CID]:
        after = b""  # below every CID; the unique index on cid pages in binary order
        page = "SELECT cid FROM {s}.blocks WHERE cid > %s ORDER BY cid LIMIT %s"
        while rows := self._q(page, after, PAGE):
            yield from (CID(bytes(r[0])) for r in rows)
            after = bytes(rows[-1][0])

    def artifact_refs(self, conv: str) -> set[CID]:
        rows = self._q("SELECT DISTINCT cid FROM {s}.artifact_refs WHERE conv = %s", conv)
        return {CID(bytes(r[0])) for r in rows}

    def records_naming(self, conv: str, cids: Iterable[CID]) -> dict[CID, set[CID]]:
        sql = "SELECT cid, record FROM {s}.artifact_refs WHERE conv = %s AND cid {in}"
        return group(self._any(sql, set(map(bytes, cids)), conv))

    def conversations_naming(self, cids: Iterable[CID]) -> set[str]:
        sql = "SELECT DISTINCT conv FROM {s}.artifact_refs WHERE cid {in}"
        return {r[0] for r in self._any(sql, set(map(bytes, cids)))}

    def admit_blocks(self, conv: str, cids: Iterable[CID]) -> None:
        params = [(conv, self._blob(c)) for c in set(cids)]
        if params:
            with self.transaction():
                self._xm("INSERT INTO {s}.block_admitted VALUES (%s, %s) ON CONFLICT DO NOTHING", params)

    def admitted(self, conv: str, cids: Iterable[CID]) -> set[CID]:
        wanted = {bytes(c): c for c in cids}
        rows = self._any("SELECT cid FROM {s}.block_admitted WHERE conv = %s AND cid {in}", wanted, conv)
        return {wanted[bytes(r[0])] for r in rows}

    def admitting(self, cids: Iterable[CID]) -> set[str]:
        sql = "SELECT DISTINCT conv FROM {s}.block_admitted WHERE cid {in}"
        return {r[0] for r in self._any(sql, set(map(bytes, cids)))}

    def chunks_of(self, manifests: Iterable[CID]) -> dict[CID, set[CID]]:
        sql = "SELECT manifest, chunk FROM {s}.block_links WHERE manifest {in}"
        return group(self._any(sql, set(map(bytes, manifests))))

    def manifests_of(self, chunks: Iterable[CID]) -> dict[CID, set[CID]]:
        sql = "SELECT chunk, manifest FROM {s}.block_links WHERE chunk {in}"
        return group(self._any(sql, set(map(bytes, chunks))))
