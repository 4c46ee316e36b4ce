"""What each record kind asks of its author (docs/authority.md §3).

Invariant: `record_needs(state, record)` is the set of capabilities the author must hold at the
record's causal position; only the owner may write a genesis, which needs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from convgraph.core.record import Record
from convgraph.projections.authority.state import AuthorityState

ADMIN: Final = "admin"

READ: Final = "read"

WRITE_KINDS: Final = frozenset({
    "user_message", "agent_message", "tool_invocation", "tool_result", "code_snapshot", "patch",
    "decision_request", "branch", "checkpoint", "routing_observation", "system_prompt",
})

_REVIEW_KINDS: Final = frozenset({"review_comment", "attestation", "audit"})

WRITE: Final = frozenset({"write"})

_REVIEW: Final = frozenset({"review"})

_ADMIN: Final = frozenset({ADMIN})

_SIMPLE: Final[Mapping[str, frozenset[str]]] = {
    "genesis": frozenset(),
    "decision": frozenset({"decide"}), "merge": frozenset({"merge"}), "pin": _ADMIN,
    "supersession": WRITE,
}

def record_needs(state: AuthorityState, record: Record) -> frozenset[str]:
    if record.kind == "genesis":
        return frozenset()
    return needs_of(state, record.actor, record.kind, record.payload)

def needs_of(state: AuthorityState, actor: bytes, kind: str, p: Mapping[str, Any]) -> frozenset[str]:
    """docs/authority.md §3: what the author of such a record must hold."""
    if kind in WRITE_KINDS:
        return WRITE
    if kind in _REVIEW_KINDS:
        return _REVIEW
    if kind in ("grant", "revocation"):
        return frozenset({ADMIN, *p["rights"]})
    if kind == "retraction":
        target = p["target"]
        own = target in state.ancestry and state.actor_of(target) == actor
        return WRITE if own else _ADMIN
    return _SIMPLE.get(kind, WRITE)
