"""What a replica is opened with: its record limits, clock drift, quarantine bounds, whether it
may author in legacy conversations, and the largest artifact it stores."""

from __future__ import annotations

from dataclasses import dataclass, field

from convgraph.artifacts.blocks import MAX_ARTIFACT_SIZE
from convgraph.core.hlc import DEFAULT_MAX_DRIFT_MS
from convgraph.core.record import DEFAULT_LIMITS, Limits
from convgraph.store.rows import QuarantineBounds


@dataclass(frozen=True)
class Config:
    """Policy a replica applies to what it ingests and writes.

    `legacy_writes` lets it author records in legacy conversations (ids that name no owner,
    docs/authority.md §2); without it a local write there raises `LegacyConversationError`.
    What it ingests and syncs never depends on it. `max_artifact_bytes` bounds what `put`
    stores (at most `artifacts.MAX_ARTIFACT_SIZE`, 1 GiB).
    """

    limits: Limits = DEFAULT_LIMITS
    max_drift_ms: int = DEFAULT_MAX_DRIFT_MS
    quarantine: QuarantineBounds = field(default_factory=QuarantineBounds)
    legacy_writes: bool = False
    max_artifact_bytes: int = MAX_ARTIFACT_SIZE
