"""Extends, covered and consistency of statements (docs/integrity.md §2.4, §2.5), three-valued.

Every check runs over a `Lookup` giving the `(hlc, parents)` of the records the checker
holds, so one code path serves a replica's store and an evidence bundle's records.
Invariant: a `YES` or `NO` is the same over any larger set of held records (with the same
bytes per CID); only `UNDECIDED` can change as more records become known.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Final

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.errors import IntegrityError
from convgraph.integrity.statement import Statement

Lookup = Callable[[CID], tuple[Hlc, tuple[CID, ...]] | None]
"""The `(hlc, parents)` of a held record, or None when the record is not held."""


class Verdict(enum.Enum):
    """A decided answer, or `UNDECIDED` when a record the decision needs is not held."""

    YES = "yes"
    NO = "no"
    UNDECIDED = "undecided"

    def negate(self) -> Verdict:
        """NOT in three-valued logic: `UNDECIDED` stays undecided."""
        if self is Verdict.UNDECIDED:
            return self
        return Verdict.NO if self is Verdict.YES else Verdict.YES


_TOP: Final = Hlc(1 << 64, 0)  # above every record's hlc: the level of a head


@dataclass(frozen=True, slots=True)
class _Walk:
    """The covered-walks from a set of heads towards several targets at once; see `_walk`.

    `level[c]` is the greatest L such that `c` is reached in the walk of every target whose
    hlc is below L; `gap` the greatest such level of a gap (None: no gap met).
    """

    level: dict[CID, Hlc]
    gap: Hlc | None


def _walk(heads: Iterable[CID], floor: Hlc, lookup: Lookup) -> _Walk:
    # The walk of one target x (§2.4) expands exactly the reached records with hlc > x's.
    # So a CID is reached in x's walk iff some path to it from a head has all its expanded
    # records above x's hlc: a widest-path problem over "level" = the least hlc along the
    # path, solved best-first (a max-heap on level). With honest data the level of a parent
    # is simply its child's hlc; computing it in general keeps a bundle of records that
    # break docs/format.md §11.2 decided exactly as the one-target walk of the spec decides it.
    level: dict[CID, Hlc] = {}
    meta_of: dict[CID, tuple[Hlc, tuple[CID, ...]] | None] = {}
    gap: Hlc | None = None
    heap: list[tuple[int, int, bytes, CID]] = []
    for h in set(heads):
        level[h] = _TOP
        heapq.heappush(heap, (-_TOP.wall_ms, -_TOP.counter, bytes(h), h))
    done: set[CID] = set()
    while heap:
        _w, _c, _raw, cid = heapq.heappop(heap)
        if cid in done:
            continue
        done.add(cid)
        at = level[cid]
        meta = meta_of[cid] if cid in meta_of else meta_of.setdefault(cid, lookup(cid))
        if meta is None:
            gap = at if gap is None else max(gap, at)
            continue
        hlc, parents = meta
        below = min(at, hlc)  # the level every parent is reached at through this record
        if below <= floor:
            continue  # no target is an ancestor of a record whose hlc is at most every target's
        for p in parents:
            parent = meta_of[p] if p in meta_of else meta_of.setdefault(p, lookup(p))
            if parent is not None and parent[0] >= hlc:
                gap = below if gap is None else max(gap, below)  # the hlc order is broken here
            if p not in done and (p not in level or level[p] < below):
                level[p] = below
                heapq.heappush(heap, (-below.wall_ms, -below.counter, bytes(p), p))
    return _Walk(level, gap)


def _verdicts(heads: Iterable[CID], xs: Collection[CID], lookup: Lookup) -> dict[CID, Verdict]:
    heads = set(heads)
    result: dict[CID, Verdict] = {}
    stamps: dict[CID, Hlc] = {}
    for x in xs:
        if x in heads:
            result[x] = Verdict.YES
            continue
        meta = lookup(x)
        if meta is None:
            result[x] = Verdict.UNDECIDED  # the walk needs x's hlc (§2.4)
        else:
            stamps[x] = meta[0]
    if not stamps:
        return result
    walk = _walk(heads, min(stamps.values()), lookup)
    for x, stamp in stamps.items():
        if x in walk.level and walk.level[x] > stamp:
            result[x] = Verdict.YES
        elif walk.gap is not None and walk.gap > stamp:
            result[x] = Verdict.UNDECIDED
        else:
            result[x] = Verdict.NO
    return result


def covered(x: CID, heads: Iterable[CID], lookup: Lookup) -> Verdict:
    """Whether `x` is among `heads` or an ancestor of one (§2.4 covered-walk).

    `NO` only when `x` is held and every record the walk reaches is held with an hlc below
    the record that named it; a YES never needs `x` itself to be held beyond its hlc.
    """
    return _verdicts(heads, (x,), lookup)[x]


def covered_each(xs: Iterable[CID], heads: Iterable[CID], lookup: Lookup) -> dict[CID, Verdict]:
    """`covered(x, heads)` for every `x` of `xs`, decided by one walk (§2.4): a receipt naming
    n records costs one walk, not n."""
    return _verdicts(heads, set(xs), lookup)


def region(heads: Iterable[CID], x_set: Iterable[CID], lookup: Lookup) -> set[CID]:
    """The CIDs the covered-walks for `x_set` from `heads` reach, `x_set` included.

    Exactly these records (those that are held) make the walks decide over a bundle as they
    do over `lookup`: what an evidence bundle must carry.
    """
    xs = set(x_set)
    heads = set(heads)
    stamps = [m[0] for m in map(lookup, xs - heads) if m is not None]
    if not stamps:
        return heads | xs  # no walk runs: each x is a head or undecided
    return set(_walk(heads, min(stamps), lookup).level) | xs


def _check_pair(a: Statement, b: Statement) -> None:
    if a.key != b.key or a.conv != b.conv:
        raise IntegrityError(
            "statements by different keys or about different conversations are not comparable"
        )


def missing(a: Statement, b: Statement, lookup: Lookup) -> tuple[frozenset[CID], bool]:
    """`missing(A, B)` of §2.4: the members of A's heads and stored that B does not cover.

    Returns `(missing, decided)`; `decided` is False when some member is undecided, in which
    case `missing` holds only the members decided not covered.
    """
    _check_pair(a, b)
    verdicts = _verdicts(b.heads, set(a.heads) | set(a.stored), lookup)
    gone = frozenset(x for x, v in verdicts.items() if v is Verdict.NO)
    return gone, all(v is not Verdict.UNDECIDED for v in verdicts.values())


def extends(later: Statement, earlier: Statement, lookup: Lookup) -> Verdict:
    """Whether `later` extends `earlier` (§2.4): count not smaller and nothing missing."""
    _check_pair(later, earlier)
    if later.count < earlier.count:
        return Verdict.NO
    gone, decided = missing(earlier, later, lookup)
    if gone:
        return Verdict.NO
    return Verdict.YES if decided else Verdict.UNDECIDED


def inconsistent(a: Statement, b: Statement, lookup: Lookup) -> Verdict:
    """Whether two statements by one key about one conversation are inconsistent (§2.5).

    Symmetric in `a` and `b`: the times decide which, if either, is the later one.
    """
    _check_pair(a, b)
    if b.is_later_than(a):
        return extends(b, a, lookup).negate()
    if a.is_later_than(b):
        return extends(a, b, lookup).negate()
    forward = extends(b, a, lookup)
    if forward is Verdict.YES:
        return Verdict.NO
    backward = extends(a, b, lookup)
    if backward is Verdict.YES:
        return Verdict.NO
    if forward is Verdict.NO and backward is Verdict.NO:
        return Verdict.YES
    return Verdict.UNDECIDED


def self_inconsistent(s: Statement, lookup: Lookup) -> Verdict:
    """Whether `s` names as stored a record its own heads do not cover (§2.5)."""
    gone, decided = missing(s, s, lookup)
    if gone:
        return Verdict.YES
    return Verdict.NO if decided else Verdict.UNDECIDED
