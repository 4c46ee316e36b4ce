"""Findings: a detected lie, with the evidence bundle that proves it (docs/integrity.md §6).

Invariant: a `Finding` is only built around a bundle that verifies (`evidence.verify_bundle`),
and its `id` is the CID of that bundle, so one piece of evidence found twice is one finding.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.integrity.statement import Statement

ROLLBACK: Final = "rollback"
DELETION: Final = "deletion"
WITHHOLDING: Final = "withholding"
SERVER_EQUIVOCATION: Final = "server_equivocation"
RECORD_EQUIVOCATION: Final = "record_equivocation"
DIVERGENT_FORK: Final = "divergent_fork"
UNVERIFIABLE_CHECKPOINT: Final = "unverifiable_checkpoint"
FALSE_PATCH: Final = "false_patch"
FALSE_SNAPSHOT: Final = "false_snapshot"

FINDING_KINDS: Final = (
    ROLLBACK, DELETION, WITHHOLDING, SERVER_EQUIVOCATION,
    RECORD_EQUIVOCATION, DIVERGENT_FORK, UNVERIFIABLE_CHECKPOINT,
    FALSE_PATCH, FALSE_SNAPSHOT,
)
"""The kinds of §6.1, in the order of its table."""

ARTIFACT_KINDS: Final = {FALSE_PATCH: "patch", FALSE_SNAPSHOT: "code_snapshot"}
"""The kinds about a record's claim on artifacts (§6.4), with the record kind each is about;
their bundles carry `blocks`."""

STATEMENT_KINDS: Final = (ROLLBACK, DELETION, WITHHOLDING, SERVER_EQUIVOCATION)
"""The kinds whose claim is a pair of statements `{"earlier": i, "later": j}`."""


def reason(kind: str, summary: str) -> str:
    """What a finding's `summary` says after its kind (`deletion: X` gives `X`), for a line that
    names the kind already; a summary that does not begin with its kind is returned whole."""
    return summary.removeprefix(f"{kind}: ")


@dataclass(frozen=True, slots=True)
class Finding:
    """One finding: what kind of lie, about which conversation, and the bundle proving it.

    `cites` are the records the bundle carries (a store never compacts them away);
    `statements` are the bundle's statements, decoded; `found_ms` is when this replica found it.
    """

    id: CID
    kind: str
    conv: str
    bundle: bytes
    cites: tuple[CID, ...]
    statements: tuple[Statement, ...]
    summary: str
    found_ms: int

    def to_json(self) -> dict[str, Any]:
        """The finding as `convgraph findings --json` and `GET /v1/findings` show it: CIDs as
        text, the bundle in base64 (docs/sync.md)."""
        return {
            "id": str(self.id), "kind": self.kind, "conv": self.conv, "summary": self.summary,
            "found_ms": self.found_ms, "cites": [str(c) for c in self.cites],
            "statements": [str(s.cid) for s in self.statements],
            "bundle": base64.b64encode(self.bundle).decode(),
        }
