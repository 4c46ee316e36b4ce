"""The authority state: what the rules need of the records applied so far (`fold.apply` adds one).

Invariant: the state is a function of the set of records applied (parents before children);
caches (effective revocations, judges) are dropped whenever a grant or revocation arrives.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from convgraph.core.cid import CID
from convgraph.core.record import Record
from convgraph.projections.ancestry import Ancestry, Vector


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
        self._judges: dict[frozenset[CID] | None, Any] = {}  # judge.Judge, kept by `judge.judge_of`
        # the record `check` judged last and its parents' vector: `apply` then need not merge again
        self.checked: tuple[CID, Vector] | None = None
        self.version = 0  # bumped by every apply: answers cached under it stay valid until then
        self.cached: dict[str, tuple[int, Any]] = {}

    def forget_effective(self) -> None:
        """Drop the cached effective sets and judges: a grant or revocation was added."""
        self._effective.clear()
        self._judges.clear()

    def actor_of(self, cid: CID) -> bytes:
        return self.actor_keys[self.ancestry.nodes[cid].actor]
