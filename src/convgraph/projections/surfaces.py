"""Every record kind's surface, declared in one table, and the folds that are not turns.

A surface fixes what folding a kind means. *Event stream*: a multiset keyed by op id
(turns and other events; may be windowed). *Replay stream*: path-dependent, folded in
canonical order (a late, older record changes every later value), so no retention rule
may ever trim it. *Entity*: keyed state where the last writer in canonical order wins.
*Control*: records that shape other views (branch, merge, retraction, supersession,
checkpoint). *Authority*: grants, revocations, pins and audits. Invariant: every kind in
`core.kinds.ROOTED_SCHEMAS` (a superset of the legacy table) has exactly one surface here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from convgraph.core.kinds import ROOTED_SCHEMAS
from convgraph.errors import RetentionRefusedError


class Surface(StrEnum):
    """How a kind folds."""

    EVENT = "event_stream"
    REPLAY = "replay_stream"
    ENTITY = "entity"
    CONTROL = "control"
    AUTHORITY = "authority"


SURFACES: Final[Mapping[str, Surface]] = {
    "user_message": Surface.EVENT,
    "agent_message": Surface.EVENT,
    "tool_invocation": Surface.EVENT,
    "tool_result": Surface.EVENT,
    "patch": Surface.EVENT,
    "review_comment": Surface.EVENT,
    "decision_request": Surface.EVENT,
    "attestation": Surface.EVENT,
    "routing_observation": Surface.REPLAY,
    "code_snapshot": Surface.ENTITY,
    "decision": Surface.ENTITY,
    "system_prompt": Surface.ENTITY,
    "branch": Surface.CONTROL,
    "merge": Surface.CONTROL,
    "retraction": Surface.CONTROL,
    "supersession": Surface.CONTROL,
    "checkpoint": Surface.CONTROL,
    "genesis": Surface.AUTHORITY,
    "pin": Surface.AUTHORITY,
    "grant": Surface.AUTHORITY,
    "audit": Surface.AUTHORITY,
    "revocation": Surface.AUTHORITY,
}
assert SURFACES.keys() == ROOTED_SCHEMAS.keys(), "every kind needs a surface"

ENTITY_KEYS: Final[Mapping[str, Callable[[Mapping[str, Any]], Any]]] = {
    "code_snapshot": lambda p: p.get("path", ""),
    "decision": lambda p: p["request"],  # a later decision on one request overrides
    "system_prompt": lambda _: "",  # one per conversation (docs/conversation.md §9)
}
"""The key an entity record writes; the last writer per (kind, key) wins."""

EMA_ALPHA: Final = 0.2


@dataclass(frozen=True)
class RouteStats:
    """One model's routing state after folding its observations in canonical order."""

    model: str
    observations: int
    latency_ema_ms: float
    ok_ema: float


def routing_stats(observations: Iterable[Mapping[str, Any]]) -> dict[str, RouteStats]:
    """Fold `{model, latency_ms, ok}` payloads, given in canonical order, into per-model EMAs."""
    out: dict[str, RouteStats] = {}
    for p in observations:
        model, latency, ok = p["model"], float(p["latency_ms"]), 1.0 if p["ok"] else 0.0
        prev = out.get(model)
        if prev is None:
            out[model] = RouteStats(model, 1, latency, ok)
        else:
            out[model] = RouteStats(
                model,
                prev.observations + 1,
                EMA_ALPHA * latency + (1 - EMA_ALPHA) * prev.latency_ema_ms,
                EMA_ALPHA * ok + (1 - EMA_ALPHA) * prev.ok_ema,
            )
    return out


def check_retention(surface: Surface) -> None:
    """Raise `RetentionRefusedError` when no retention rule may apply to `surface`."""
    if surface is Surface.REPLAY:
        raise RetentionRefusedError(
            "a replay stream is never trimmed: every value depends on all earlier records"
        )
