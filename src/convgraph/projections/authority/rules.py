"""The graph kinds mean what they say (docs/authority.md §8): checked against the causal past.

Invariant: each rule reads only the record and what precedes it, so every replica agrees.
"""

from __future__ import annotations

from typing import Final

from convgraph.core.cid import CID
from convgraph.core.keys import actor_text
from convgraph.core.record import Record
from convgraph.errors import (
    AuthorityError,
    BranchOriginError,
    FloatingDecisionError,
    ForgedMergeError,
    RetractionTargetError,
)
from convgraph.projections.authority.judge import Use, precedes
from convgraph.projections.authority.state import AuthorityState

_GRAPH_KINDS: Final = frozenset({"merge", "branch", "decision", "retraction", "supersession"})


def check_graph(state: AuthorityState, record: Record, use: Use) -> None:
    """§8: the graph kinds name only what the record's causal past holds."""
    if record.kind not in _GRAPH_KINDS:
        return  # most records: nothing here to check
    kind, p, cid = record.kind, record.payload, record.cid

    def seen(target: CID) -> bool:
        return target in state.ancestry and precedes(state, target, use)

    if kind == "merge":
        name = p["branch"]
        if not any(seen(b) for b in state.branches.get(name, ())):
            raise ForgedMergeError(f"merge of branch {name[:64]!r}, which is not in its causal past", cid=cid)
        if not set(p["heads"]) <= set(record.parents):
            raise ForgedMergeError("a merge's heads must be among its parents", cid=cid)
        for a in p["accepted"]:
            if not seen(a) or state.branch_of.get(a) != name:
                raise ForgedMergeError(
                    f"accepted record {a} is not on branch {name[:64]!r} in its past", cid=cid)
    elif kind == "branch" and not seen(p["from"]):
        raise BranchOriginError("a branch's `from` must be in its causal past", cid=cid)
    elif kind == "decision":
        request = state.records.get(p["request"])
        if request is None or request.kind != "decision_request" or not seen(request.cid):
            raise FloatingDecisionError(
                "a decision's request must be a decision_request in its past", cid=cid)
    elif kind in ("retraction", "supersession"):
        if not seen(p["target"]):
            raise RetractionTargetError(f"a {kind}'s target must be in its causal past", cid=cid)
        if kind == "supersession" and state.actor_of(p["target"]) != record.actor:
            raise AuthorityError("only a record's author may supersede it", capability="write",
                                 actor=actor_text(record.actor), cid=cid)
