"""What sync asks of a replica's witnessed-history memory (docs/integrity.md §4, §5).

The state machines only carry statements; judging them (remembered heads, receipts,
gossip, findings) is the replica's, behind the `Witness` protocol below. `witness_of`
gives a replica's, or None while the replica cannot judge (then statements are still
signed, sent and checked for authenticity, but nothing is remembered). Invariant: every
call into the replica's memory from sync goes through this module.
"""

from __future__ import annotations

import base64
from collections.abc import Collection, Sequence
from typing import Any, Protocol

from convgraph.integrity.statement import Statement


class FindingLike(Protocol):
    """The parts of a finding (docs/integrity.md §6) that a sync report shows."""

    @property
    def kind(self) -> str: ...

    @property
    def conv(self) -> str: ...

    @property
    def summary(self) -> str: ...


class VerdictLike(Protocol):
    """What a replica concluded from one session's statements of one conversation (§4)."""

    @property
    def findings(self) -> Sequence[Any]: ...

    @property
    def pending(self) -> Sequence[str]: ...

    @property
    def converged(self) -> bool: ...

    @property
    def reasons(self) -> Sequence[str]: ...


class Witness(Protocol):
    """A replica's memory of statements: it checks, remembers and gossips them."""

    def observe_session(
        self, peer: bytes, conv: str, statements: Sequence[Statement], *, started_ms: int,
        received_ms: int, fingerprints_matched: bool,
    ) -> VerdictLike:
        """§4 checks 1-5 on every statement `peer` sent about `conv` in one session."""
        ...

    def observe_gossip(self, conv: str, statements: Sequence[Statement]) -> Sequence[Any]:
        """§5: keep gossiped statements and check each pair; the new findings."""
        ...

    def gossip_for(self, conv: str, exclude: Collection[bytes]) -> Sequence[Statement]:
        """The statements to gossip about `conv`: latest per key not in `exclude`, newest first."""
        ...


def findings_of(replica: object, conv: str | None = None) -> list[Any]:
    """The findings the replica holds (docs/integrity.md §6), of `conv` or of all; none while
    it keeps none."""
    found = getattr(replica, "findings", None)
    return list(found(conv)) if callable(found) else []


def finding_json(finding: Any) -> dict[str, Any]:
    """A finding as the HTTP API and `--json` show it: its bundle in base64 (docs/sync.md)."""
    return {
        "id": str(finding.id), "kind": finding.kind, "conv": finding.conv, "summary": finding.summary,
        "found_ms": finding.found_ms, "cites": [str(c) for c in finding.cites],
        "bundle": base64.b64encode(finding.bundle).decode(),
    }


def witness_of(replica: object) -> Witness | None:
    """The replica's memory of statements, or None when it has none to offer yet."""
    needed = ("observe_session", "observe_gossip", "gossip_for")
    if all(callable(getattr(replica, name, None)) for name in needed):
        return replica  # type: ignore[return-value]
    return None
