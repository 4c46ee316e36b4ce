"""Witnessed history and checkpoints in the SQL stores: remembered statements, receipts,
gossip, pending checks, findings, and the snapshots compaction keeps.

Invariant: compaction drops the bytes of covered records only, never of a record a finding
cites or an equivocation names; a finding is added once, with every CID it cites.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from convgraph.core.cid import CID
from convgraph.errors import StoreError
from convgraph.integrity.statement import Statement
from convgraph.store.rows import GOSSIP_KEEP, FindingRow, PendingCheck, finding_cids, unique_checks
from convgraph.store.sql.quarantine import Quarantine
from convgraph.store.sql_rows import decode_blobs, encode_blobs, finding_of_row


class Witness(Quarantine):
    """The witnessed-history tables and `snapshots`."""

    def compact(self, conv: str, covered: Iterable[CID], checkpoint: CID, snapshot: bytes) -> None:
        with self.transaction():
            wanted = {bytes(c) for c in covered}
            found = {bytes(m.cid) for m in self.metas(map(CID._trusted, wanted)).values() if m.conv == conv}
            if found != wanted:
                raise StoreError("compaction names a record this conversation does not hold")
            self._bump(conv)
            dropped = wanted - {bytes(c) for c in self._evidence(conv)}
            self._xm("UPDATE {s}.records SET data = %s WHERE conv = %s AND cid = %s",
                     [(b"", conv, c) for c in dropped])
            self._x("INSERT INTO {s}.snapshots VALUES (%s, %s, %s) ON CONFLICT (conv)"
                    " DO UPDATE SET checkpoint = excluded.checkpoint, data = excluded.data",
                    conv, bytes(checkpoint), snapshot)
            self._index_snapshot(conv, snapshot)  # rows of an adopted conversation's records

    def snapshot(self, conv: str) -> tuple[CID, bytes] | None:
        rows = self._q("SELECT checkpoint, data FROM {s}.snapshots WHERE conv = %s", conv)
        return (CID(rows[0][0]), rows[0][1]) if rows else None

    def _evidence(self, conv: str) -> set[CID]:
        """Records whose bytes compaction keeps: cited by a finding, or equivocating."""
        rows = self._q("SELECT cid FROM {s}.finding_cites WHERE conv = %s UNION SELECT a FROM"
                       " {s}.equivocations WHERE conv = %s UNION SELECT b FROM {s}.equivocations"
                       " WHERE conv = %s", conv, conv, conv)
        return {CID(r[0]) for r in rows}

    def _write(self, text: str, rows: list[tuple[Any, ...]], convs: Iterable[str]) -> None:
        # naming the conversations: the schema's lock shared and their rows held, so a sync's
        # witness writes wait for no other conversation's writers (naming none took it exclusively)
        if rows:
            with self.transaction(*convs):
                self._xm(text, rows)

    def remember(self, statement: Statement) -> None:
        self._write("INSERT INTO {s}.remembered VALUES (%s, %s, %s) ON CONFLICT (conv, peer)"
                    " DO UPDATE SET statement = excluded.statement",
                    [(statement.key, statement.conv, statement.data)], [statement.conv])

    def remembered(self, peer: bytes, conv: str) -> bytes | None:
        rows = self._q("SELECT statement FROM {s}.remembered WHERE peer = %s AND conv = %s", peer, conv)
        return bytes(rows[0][0]) if rows else None

    def remembered_in(self, conv: str) -> list[bytes]:
        rows = self._q("SELECT statement FROM {s}.remembered WHERE conv = %s ORDER BY peer", conv)
        return [bytes(r[0]) for r in rows]

    def add_receipts(self, receipts: Iterable[Statement]) -> None:
        rows = [(r.key, r.conv, bytes(r.cid), r.time_ms, r.data) for r in receipts]
        self._write("INSERT INTO {s}.receipts VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    rows, sorted({str(r[1]) for r in rows}))

    def open_receipts(self, peer: bytes, conv: str) -> list[bytes]:
        rows = self._q("SELECT statement FROM {s}.receipts WHERE peer = %s AND conv = %s"
                       " ORDER BY time_ms, cid", peer, conv)
        return [bytes(r[0]) for r in rows]

    def close_receipts(self, peer: bytes, conv: str, cids: Iterable[CID]) -> None:
        self._write("DELETE FROM {s}.receipts WHERE peer = %s AND conv = %s AND cid = %s",
                    [(peer, conv, bytes(c)) for c in cids], [conv])

    def add_gossip(self, statement: Statement) -> None:
        with self.transaction(statement.conv):
            where = (statement.conv, statement.key)
            self._x("INSERT INTO {s}.gossip VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    *where, bytes(statement.cid), statement.time_ms, statement.data)
            self._x("DELETE FROM {s}.gossip WHERE conv = %s AND key = %s AND cid NOT IN"
                    " (SELECT cid FROM {s}.gossip WHERE conv = %s AND key = %s"
                    " ORDER BY time_ms DESC, cid DESC LIMIT %s)"
                    " AND cid NOT IN (SELECT cid FROM {s}.finding_cites WHERE conv = %s)",
                    *where, *where, GOSSIP_KEEP, statement.conv)

    def gossip(self, conv: str) -> list[bytes]:
        rows = self._q("SELECT statement FROM {s}.gossip WHERE conv = %s"
                       " ORDER BY time_ms DESC, cid DESC", conv)
        return [bytes(r[0]) for r in rows]

    def pending_checks(self, peer: bytes, conv: str) -> list[PendingCheck]:
        rows = self._q("SELECT reason, statements FROM {s}.pending_checks WHERE conv = %s AND peer = %s"
                       " ORDER BY pos", conv, peer)
        return [PendingCheck(reason, decode_blobs(bytes(data))) for reason, data in rows]

    def set_pending_checks(self, peer: bytes, conv: str, checks: Sequence[PendingCheck]) -> None:
        with self.transaction(conv):
            self._x("DELETE FROM {s}.pending_checks WHERE peer = %s AND conv = %s", peer, conv)
            self._xm("INSERT INTO {s}.pending_checks (peer, conv, reason, statements, pos)"
                     " VALUES (%s, %s, %s, %s, %s)",
                     [(peer, conv, c.reason, encode_blobs(c.statements), i)
                      for i, c in enumerate(unique_checks(checks))])

    def add_finding(self, finding: FindingRow) -> bool:
        f = finding
        with self.transaction():
            added = self._x(
                "INSERT INTO {s}.findings VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                bytes(f.id), f.conv, f.kind, f.found_ms, f.summary, b"".join(map(bytes, f.cites)),
                encode_blobs(f.statements), f.bundle,
            ).rowcount == 1
            if added:
                self._xm("INSERT INTO {s}.finding_cites VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                         [(f.conv, bytes(c), bytes(f.id)) for c in finding_cids(f)])
            return bool(added)

    def findings(self, conv: str | None = None) -> list[FindingRow]:
        select = "SELECT id, kind, conv, bundle, cites, statements, summary, found FROM {s}.findings"
        if conv is None:
            rows = self._q(select + " ORDER BY found, id")
        else:
            rows = self._q(select + " WHERE conv = %s ORDER BY found, id", conv)
        return [finding_of_row(r) for r in rows]

    def cited(self, conv: str) -> set[CID]:
        return {CID(bytes(r[0])) for r in self._q("SELECT cid FROM {s}.finding_cites WHERE conv = %s", conv)}
