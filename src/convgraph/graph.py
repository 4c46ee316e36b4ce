"""DAG algorithms over a `parents_of` lookup, so they run on any store or on plain dicts.

All walks are iterative (no recursion limit) and visit each record at most once, so they
are linear in the records walked. Where an `hlc_of` lookup is given, walks that search for
targets stop descending below the oldest target: a record's hlc exceeds its parents', so
nothing older than a target can have it as an ancestor.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc

ParentsOf = Callable[[CID], Iterable[CID] | None]
"""The parents of a record, or None when the record is unknown."""
HlcOf = Callable[[CID], Hlc | None]


class _Ordered(Protocol):
    @property
    def order_key(self) -> tuple[int, int, bytes, bytes]: ...


_R = TypeVar("_R", bound=_Ordered)


def canonical_order(records: Iterable[_R]) -> list[_R]:
    """Records sorted by `(wall_ms, counter, actor, cid)`; also a topological order."""
    return sorted(records, key=lambda r: r.order_key)


def heads(cids: Collection[CID], parents_of: ParentsOf) -> set[CID]:
    """The members of `cids` that no other member names as a parent."""
    named: set[CID] = set()
    for cid in cids:
        named.update(parents_of(cid) or ())
    return set(cids) - named


def ancestors(start: Iterable[CID], parents_of: ParentsOf) -> set[CID]:
    """Every held record reachable through parents from `start`, `start` excluded.

    Parents that are named but not held (per `parents_of`) are left out: see `missing_ancestors`.
    """
    seen: set[CID] = set()
    stack = [p for c in start for p in parents_of(c) or ()]
    while stack:
        cid = stack.pop()
        if cid in seen:
            continue
        parents = parents_of(cid)
        if parents is None:
            continue  # unknown: the walk reports what it can reach
        seen.add(cid)
        stack.extend(p for p in parents if p not in seen)
    return seen


@dataclass(frozen=True, slots=True)
class Closure:
    """What a walk down the parents from some records reached: `held`, the records reached
    that `parents_of` knows; `missing`, those it does not; `parents`, every CID a held record
    names as a parent. A start member is reached too, so it is in `held` or in `missing`."""

    held: frozenset[CID]
    missing: frozenset[CID]
    parents: frozenset[CID]


def closure(start: Iterable[CID], parents_of: ParentsOf) -> Closure:
    """Everything reachable from `start` through parents (members of `start` included)."""
    held: set[CID] = set()
    missing: set[CID] = set()
    named: set[CID] = set()
    stack = list(start)
    while stack:
        cid = stack.pop()
        if cid in held or cid in missing:
            continue
        parents = parents_of(cid)
        if parents is None:
            missing.add(cid)
            continue
        held.add(cid)
        named.update(parents)
        stack.extend(parents)
    return Closure(frozenset(held), frozenset(missing), frozenset(named))


def missing_ancestors(start: Iterable[CID], parents_of: ParentsOf) -> set[CID]:
    """CIDs reachable from `start` (members of `start` included) that `parents_of` does not know."""
    return set(closure(start, parents_of).missing)


def reaches(
    sources: Iterable[CID],
    targets: Collection[CID],
    parents_of: ParentsOf,
    hlc_of: HlcOf | None = None,
) -> set[CID]:
    """The members of `targets` equal to, or ancestors of, some member of `sources`.

    A target counts as reached when a walked record names it, even if it is not held.
    """
    remaining = set(targets)
    found: set[CID] = set()
    floor = _Floor(remaining, hlc_of)
    seen: set[CID] = set()
    stack = list(sources)
    while stack and remaining:
        cid = stack.pop()
        if cid in seen:
            continue
        seen.add(cid)
        if cid in remaining:
            remaining.discard(cid)
            found.add(cid)
        if hlc_of is not None and floor.below(cid, remaining, hlc_of):
            continue
        stack.extend(p for p in parents_of(cid) or () if p not in seen)
    return found


def is_ancestor(a: CID, b: CID, parents_of: ParentsOf, hlc_of: HlcOf | None = None) -> bool:
    """True when `a` is a strict ancestor of `b`."""
    if a == b:
        return False
    return bool(reaches(parents_of(b) or (), {a}, parents_of, hlc_of))


def extends(
    new: Collection[CID], old: Collection[CID], parents_of: ParentsOf, hlc_of: HlcOf | None = None
) -> bool:
    """True when head set `new` contains or descends from every head in `old`."""
    return len(reaches(new, old, parents_of, hlc_of)) == len(set(old))


class _Floor:
    """The oldest stamp among the targets still sought, kept in a heap (lazy deletion)."""

    def __init__(self, targets: set[CID], hlc_of: HlcOf | None) -> None:
        stamps = [(hlc_of(t), t) for t in targets] if hlc_of else []
        # an unknown target could be anywhere: then no pruning at all
        self._usable = hlc_of is not None and all(s is not None for s, _ in stamps)
        self._heap = [(s, t) for s, t in stamps if s is not None]
        heapq.heapify(self._heap)

    def below(self, cid: CID, remaining: set[CID], hlc_of: HlcOf) -> bool:
        """True when `cid` is no later than every remaining target, so none is beneath it."""
        if not self._usable:
            return False
        while self._heap and self._heap[0][1] not in remaining:
            heapq.heappop(self._heap)
        if not self._heap:
            return False
        stamp = hlc_of(cid)
        return stamp is not None and stamp <= self._heap[0][0]
