"""The authority state: what the rules need of the records applied so far, and `apply`/`fold`.

Invariant: the state is a function of the set of records applied (parents before children);
caches (effective revocations, judges) are dropped whenever a grant or revocation arrives.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.core.record import Record
from convgraph.projections.ancestry import Ancestry, Vector
from convgraph.projections.authority.judge import Judge, order_key
from convgraph.projections.authority.needs import WRITE, record_needs

KEPT: Final = frozenset({
    "genesis", "grant", "revocation", "pin", "audit", "decision_request", "decision",
    "review_comment", "attestation", "branch",
})

class AuthorityState:
    """Everything the rules need of the records applied so far (parents before children)."""

    def __init__(self) -> None:
        self.ancestry = Ancestry()
        self.genesis: CID | None = None  # the earliest genesis in canonical order
        self.geneses: list[CID] = []  # more than one only if the owner equivocated at seq 1
        self.owner: bytes | None = None
        self.records: dict[CID, Record] = {}
        self.needs: dict[CID, frozenset[str]] = {}
        self.branch_of: dict[CID, str] = {}
        self.grants_to: defaultdict[bytes, list[CID]] = defaultdict(list)
        self.revocations_of: defaultdict[bytes, list[CID]] = defaultdict(list)
        self.revocations: list[CID] = []
        self.by_actor: defaultdict[bytes, list[CID]] = defaultdict(list)
        self.branches: defaultdict[str, list[CID]] = defaultdict(list)
        self.reviews_of: defaultdict[CID, list[CID]] = defaultdict(list)
        self.kept: defaultdict[str, list[CID]] = defaultdict(list)
        # patches and snapshots as decision subjects (§8.7): (kind, result or blob, base, path);
        # a slim tuple, since snapshots can be large (LangGraph checkpoints are snapshots)
        self.subjects: dict[CID, tuple[str, CID | None, CID | None, str | None]] = {}
        self.actor_keys: list[bytes] = []
        # the highest seq of each author's grants and revocations: a record whose vector
        # reaches all of them has every authority record in its past (the common case)
        self.authority_tips: dict[int, int] = {}
        self._effective: dict[frozenset[CID] | None, frozenset[CID]] = {}
        self._judges: dict[frozenset[CID] | None, Judge] = {}
        # the record `check` judged last and its parents' vector: `apply` then need not merge again
        self.checked: tuple[CID, Vector] | None = None
        self.version = 0  # bumped by every apply: answers cached under it stay valid until then
        self.cached: dict[str, tuple[int, Any]] = {}

    def forget_effective(self) -> None:
        """Drop the cached effective sets and judges: a grant or revocation was added."""
        self._effective.clear()
        self._judges.clear()

    def judge(self, within: frozenset[CID] | None = None) -> Judge:
        """A judge over the effective revocations; its memos hold until a grant or revocation is added."""
        judge = self._judges.get(within)
        if judge is None:
            judge = self._judges[within] = Judge(self, self.effective(within))
        return judge

    def actor_of(self, cid: CID) -> bytes:
        return self.actor_keys[self.ancestry.nodes[cid].actor]

    def effective(self, within: frozenset[CID] | None = None) -> frozenset[CID]:
        """The effective revocations (§6.1) among all records, or among the authority records `within`."""
        cached = self._effective.get(within)
        if cached is None:
            k = frozenset(u for u in self.revocations if within is None or u in within)
            while True:
                judge = Judge(self, k)
                kept = frozenset(u for u in k if judge.authorized(u))
                if kept == k:
                    break
                k = kept
            cached = self._effective[within] = k
        return cached

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
