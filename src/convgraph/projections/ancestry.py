"""Causal precedence between records of one conversation, answered without walking history.

Each record gets a version vector: for every actor, the highest `seq` of that actor's records in
the record's causal past or the record itself. Because a record names its author's previous
record as a parent (format.md §11.2), an actor's records form a chain, so `y ≼ x` exactly when
`vv(x)[actor(y)] ≥ seq(y)`. An actor that equivocated (two records at one seq) has a fork
instead of a chain; precedence of its records falls back to a walk over parents, pruned by hlc.
Invariant: `precedes(y, x)` is true exactly when `y` is in the strict causal past of `x`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc

Vector = tuple[int, ...]


class Node(NamedTuple):
    """What precedence needs of one record."""

    actor: int  # index into Ancestry.actors
    seq: int
    hlc: Hlc
    parents: tuple[CID, ...]
    vv: Vector


_new_node = tuple.__new__  # a Node without the Python-level __new__ of NamedTuple: one per record


class Ancestry:
    """The version vector of every added record; records are added parents first."""

    def __init__(self) -> None:
        self.actors: dict[bytes, int] = {}
        self.nodes: dict[CID, Node] = {}
        self._at: dict[tuple[int, int], CID] = {}
        self._forked: set[int] = set()

    @property
    def forked(self) -> bool:
        """Whether any actor equivocated, so version vectors alone do not decide precedence."""
        return bool(self._forked)

    def __contains__(self, cid: object) -> bool:
        return cid in self.nodes

    def add(self, cid: CID, actor: bytes, seq: int, hlc: Hlc, parents: Iterable[CID], *,
            parents_vv: Vector | None = None) -> None:
        """Index a record whose parents are all indexed already (a known CID is ignored);
        `parents_vv`, when the caller has it, is `vector_of(parents)`."""
        if cid in self.nodes:
            return
        index = self.actors.setdefault(actor, len(self.actors))
        parent_list = tuple(parents)
        vv = self.vector_of(parent_list) if parents_vv is None else parents_vv
        if len(vv) <= index:
            vv += (0,) * (index + 1 - len(vv))
        vv = (*vv[:index], max(vv[index], seq), *vv[index + 1:])
        self.nodes[cid] = _new_node(Node, (index, seq, hlc, parent_list, vv))
        # `cid` is new to `nodes`, so the one held at (index, seq) is `cid` itself or a rival
        if self._at.setdefault((index, seq), cid) is not cid:
            self._forked.add(index)

    def vector_of(self, cids: Iterable[CID]) -> Vector:
        """The element-wise maximum of these records' vectors: the vector of a record naming them."""
        if type(cids) is tuple and len(cids) == 1:  # the common case: a record on its author's previous one
            return self.nodes[cids[0]].vv
        vectors = [self.nodes[cid].vv for cid in cids]
        if len(vectors) <= 1:
            return vectors[0] if vectors else ()
        width = max(map(len, vectors))
        return tuple(map(max, zip(*(v + (0,) * (width - len(v)) for v in vectors), strict=True)))

    def _covers(self, vv: Vector, y: CID) -> bool:
        """For `y` by an actor without a fork: whether a record with vector `vv` is `y` or after it."""
        node = self.nodes[y]
        return node.actor < len(vv) and vv[node.actor] >= node.seq

    def precedes(self, y: CID, x: CID) -> bool:
        """Whether `y` is in the strict causal past of `x` (both indexed)."""
        if y == x:
            return False
        node = self.nodes[y]
        if node.actor in self._forked:
            return self._walk(y, x)
        return self._covers(self.nodes[x].vv, y)

    def precedes_vector(self, y: CID, vv: Vector, parents: Iterable[CID]) -> bool:
        """Whether `y` is in the causal past of a not-yet-indexed record with these parents."""
        node = self.nodes[y]
        if node.actor not in self._forked:
            return self._covers(vv, y)
        return any(p == y or self._walk(y, p) for p in parents)

    def _walk(self, y: CID, x: CID) -> bool:
        """Exact search from `x` down to `y`; records older than `y` by hlc cannot lead to it."""
        floor = self.nodes[y].hlc
        stack, seen = [x], {x}
        while stack:
            for parent in self.nodes[stack.pop()].parents:
                if parent == y:
                    return True
                if parent not in seen and self.nodes[parent].hlc > floor:
                    seen.add(parent)
                    stack.append(parent)
        return False
