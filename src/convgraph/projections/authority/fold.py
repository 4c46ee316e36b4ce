"""`apply` and `fold`: the authority state of a set of records, one record at a time.

Invariant: `fold` of any delivery order of one set gives the same state as `apply` in a
topological order; a known CID is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from convgraph.core.record import Record
from convgraph.projections.authority.judge import order_key
from convgraph.projections.authority.needs import WRITE, record_needs
from convgraph.projections.authority.state import AuthorityState

KEPT: Final = frozenset({
    "genesis", "grant", "revocation", "pin", "audit", "decision_request", "decision",
    "review_comment", "attestation", "branch",
})


def apply(state: AuthorityState, record: Record) -> AuthorityState:
    """Add a record whose parents were applied (and which `check` accepted); a known CID is ignored."""
    if record.cid in state.ancestry.nodes:
        return state
    checked, state.checked = state.checked, None
    same = checked is not None and checked[0] == record.cid
    parents_vv = checked[1] if checked is not None and same else None
    state.ancestry.add(record.cid, record.actor, record.seq, record.hlc, record.parents,
                       parents_vv=parents_vv)
    state.version += 1
    if len(state.actor_keys) < len(state.ancestry.actors):
        state.actor_keys.append(record.actor)
    cid, kind = record.cid, record.kind
    state.by_actor[record.actor].append(cid)
    if record.branch is not None:
        state.branch_of[cid] = record.branch
    needs = record_needs(state, record)
    if needs is not WRITE:  # most records need `write`: only the others are kept
        state.needs[cid] = needs
    p = record.payload
    if kind in ("patch", "code_snapshot"):
        path = p.get("path")
        state.subjects[cid] = (kind, p.get("result" if kind == "patch" else "blob"), p.get("base"),
                               path if isinstance(path, str) else None)
    if kind not in KEPT:
        return state
    state.records[cid] = record
    state.kept[kind].append(cid)
    if kind == "genesis":
        # every genesis of one id has the same actor (format.md §15.2); keeping the earliest
        # rather than the first applied keeps the answers independent of delivery order
        state.geneses.append(cid)
        if state.genesis is None or record.order_key < order_key(state, state.genesis):
            state.genesis, state.owner = cid, record.actor
    elif kind in ("grant", "revocation"):
        (state.grants_to if kind == "grant" else state.revocations_of)[p["grantee"]].append(cid)
        if kind == "revocation":
            state.revocations.append(cid)
        index = state.ancestry.nodes[cid].actor
        state.authority_tips[index] = max(state.authority_tips.get(index, 0), record.seq)
        state.forget_effective()
    elif kind == "branch":
        state.branches[p["name"]].append(cid)
    elif kind == "review_comment" and p.get("verdict") == "approve":
        state.reviews_of[p["target"]].append(cid)
    elif kind == "attestation":
        state.reviews_of[p["subject"]].append(cid)
    return state

def fold(records: Iterable[Record]) -> AuthorityState:
    """The state of these records, taken in canonical order (a topological order)."""
    state = AuthorityState()
    for record in sorted(records, key=lambda r: r.order_key):
        apply(state, record)
    return state
