"""What one CAR import did (`sync.carfile.import_car`): counts, the first rejections and
skipped blocks, artifacts, adoptions, what waits, and the problems that decide its exit code.

Invariant: `problems` is empty exactly when every block of the file was imported, or was
an artifact block its records name, and every root is held (docs/sync.md, CAR files).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.errors import CarError, ConvgraphError
from convgraph.replica.ingest import IngestReport

MAX_SHOWN: Final = 1000  # rejections and skipped blocks listed: past this only the counts grow


@dataclass
class ImportSummary:
    """What one `import` did: counts over every batch, the first rejections and skipped
    blocks, the checkpoints adopted, what was left waiting, and the roots."""

    file: str
    blocks: int = 0
    accepted: int = 0
    duplicates: int = 0
    released: int = 0
    quarantined: int = 0  # left waiting for parents when the import ended
    held: int = 0  # left waiting for the clock
    evicted: int = 0
    rejected_total: int = 0
    rejected: list[dict[str, str | None]] = field(default_factory=list)
    skipped_total: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    artifacts: int = 0  # artifact blocks the file's records name, stored (or already held)
    artifacts_refused: list[dict[str, str | None]] = field(default_factory=list)  # hash, manifest
    missing_artifacts: list[CID] = field(default_factory=list)  # named by the file's records, not held
    adopted: list[dict[str, Any]] = field(default_factory=list)
    roots: list[CID] = field(default_factory=list)
    missing_roots: list[CID] = field(default_factory=list)
    error: CarError | None = None

    def add(self, report: IngestReport) -> None:
        self.accepted += len(report.accepted)
        self.duplicates += len(report.duplicates)
        self.released += len(report.released)
        self.evicted += len(report.evicted)
        for r in report.rejected:
            self.reject(r.cid, r.error)

    def reject(self, cid: object, error: ConvgraphError, rule: str | None = None) -> None:
        """A block refused: a record that broke a rule, a tampered block, a cover not adopted."""
        self.rejected_total += 1
        if len(self.rejected) < MAX_SHOWN:
            self.rejected.append({"cid": None if cid is None else str(cid), "rule": rule or error.rule,
                                  "error": error.message})

    def skip(self, cid: str, reason: str) -> None:
        """A well-framed block that is no record: read past, never ingested."""
        self.skipped_total += 1
        if len(self.skipped) < MAX_SHOWN:
            self.skipped.append({"cid": cid, "reason": reason})

    @property
    def problems(self) -> list[str]:
        """What keeps this import from being complete; empty means exit 0."""
        found = [
            (self.rejected_total, "block(s) rejected"),
            (self.skipped_total, "block(s) that are no records, named by no record's refs"),
            (len(self.artifacts_refused), "artifact block(s) refused"),
            (self.quarantined, "record(s) left in quarantine, waiting for parents"),
            (self.held, "record(s) held, timestamped ahead of this machine's clock"),
            (self.evicted, "record(s) evicted from a full quarantine"),
            (len(self.missing_roots), "root(s) missing"),
        ]
        problems = [f"{n} {what}" for n, what in found if n]
        return [*problems, f"malformed file: {self.error}"] if self.error is not None else problems

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file, "blocks": self.blocks, "accepted": self.accepted,
            "duplicates": self.duplicates, "released": self.released, "quarantined": self.quarantined,
            "held": self.held, "evicted": self.evicted, "rejected_total": self.rejected_total,
            "rejected": self.rejected, "skipped_total": self.skipped_total, "skipped": self.skipped,
            "artifacts": self.artifacts, "artifacts_refused": self.artifacts_refused,
            "missing_artifacts": [str(c) for c in self.missing_artifacts[:MAX_SHOWN]],
            "missing_artifacts_total": len(self.missing_artifacts), "adopted": self.adopted,
            "roots": [str(c) for c in self.roots], "roots_held": not self.missing_roots,
            "missing_roots": [str(c) for c in self.missing_roots],
            "error": None if self.error is None else str(self.error),
            "problems": self.problems, "ok": not self.problems,
        }
