"""What the memory store remembers of its peers' statements, and the findings it made.

Remembered statements, open receipts, gossip, pending checks and findings (docs/integrity.md
§4-§6), each table replaced whole per key so `_set` can undo it. Invariant: the gossip of a
(key, conversation) holds at most `GOSSIP_KEEP` latest statements besides those a finding cites.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from convgraph.core.cid import CID
from convgraph.integrity.statement import Statement
from convgraph.store.memory_journal import MemoryJournal
from convgraph.store.rows import GOSSIP_KEEP, FindingRow, PendingCheck, finding_cids, unique_checks

_Held = dict[CID, tuple[int, bytes]]  # statement CID -> (time, bytes)


def _newest_first(held: _Held) -> list[bytes]:
    return [data for _, _, data in sorted(((t, bytes(c), d) for c, (t, d) in held.items()), reverse=True)]


class MemoryWitness(MemoryJournal):
    """The witnessed-history tables and their methods of the `Store` protocol."""

    def __init__(self) -> None:
        super().__init__()
        self._remembered: dict[tuple[bytes, str], bytes] = {}
        self._receipts: dict[tuple[bytes, str], _Held] = {}
        self._gossip: dict[tuple[bytes, str], _Held] = {}
        self._checks: dict[tuple[bytes, str], tuple[PendingCheck, ...]] = {}
        self._findings: dict[CID, FindingRow] = {}
        self._cited: dict[str, frozenset[CID]] = {}

    def remember(self, statement: Statement) -> None:
        with self.transaction():
            self._set(self._remembered, (statement.key, statement.conv), statement.data)

    def remembered(self, peer: bytes, conv: str) -> bytes | None:
        with self._lock:
            return self._remembered.get((peer, conv))

    def remembered_in(self, conv: str) -> list[bytes]:
        with self._lock:
            return [data for (_, c), data in sorted(self._remembered.items()) if c == conv]

    def add_receipts(self, receipts: Iterable[Statement]) -> None:
        with self.transaction():
            for r in receipts:
                held = dict(self._receipts.get((r.key, r.conv), {}))
                held[r.cid] = (r.time_ms, r.data)
                self._set(self._receipts, (r.key, r.conv), held)

    def open_receipts(self, peer: bytes, conv: str) -> list[bytes]:
        with self._lock:
            return _newest_first(self._receipts.get((peer, conv), {}))[::-1]

    def close_receipts(self, peer: bytes, conv: str, cids: Iterable[CID]) -> None:
        with self.transaction():
            gone = set(cids)
            held = {c: v for c, v in self._receipts.get((peer, conv), {}).items() if c not in gone}
            self._set(self._receipts, (peer, conv), held)

    def add_gossip(self, statement: Statement) -> None:
        with self.transaction():
            where = (statement.key, statement.conv)
            held = {**self._gossip.get(where, {}), statement.cid: (statement.time_ms, statement.data)}
            cited = self._cited.get(statement.conv, frozenset())
            latest = sorted(held, key=lambda c: (held[c][0], bytes(c)), reverse=True)[:GOSSIP_KEEP]
            self._set(self._gossip, where, {c: v for c, v in held.items() if c in cited or c in latest})

    def gossip(self, conv: str) -> list[bytes]:
        with self._lock:
            merged: _Held = {}
            for (_, c), held in self._gossip.items():
                if c == conv:
                    merged.update(held)
            return _newest_first(merged)

    def pending_checks(self, peer: bytes, conv: str) -> list[PendingCheck]:
        with self._lock:
            return list(self._checks.get((peer, conv), ()))

    def set_pending_checks(self, peer: bytes, conv: str, checks: Sequence[PendingCheck]) -> None:
        with self.transaction():
            self._set(self._checks, (peer, conv), tuple(unique_checks(checks)))

    def add_finding(self, finding: FindingRow) -> bool:
        with self.transaction():
            if finding.id in self._findings:
                return False
            self._set(self._findings, finding.id, finding)
            cited = self._cited.get(finding.conv, frozenset())
            self._set(self._cited, finding.conv, cited | finding_cids(finding))
            return True

    def findings(self, conv: str | None = None) -> list[FindingRow]:
        with self._lock:
            rows = [f for f in self._findings.values() if conv in (None, f.conv)]
            return sorted(rows, key=lambda f: (f.found_ms, bytes(f.id)))

    def cited(self, conv: str) -> set[CID]:
        with self._lock:
            return set(self._cited.get(conv, ()))

    def _forget_witness(self, conv: str) -> None:
        self._drop(conv, ("_cited",), (("_remembered", 1), ("_receipts", 1), ("_gossip", 1), ("_checks", 1)))
        self._replace("_findings", {k: f for k, f in self._findings.items() if f.conv != conv})
