"""Extends, covered and consistency of statements (docs/integrity.md §2.4, §2.5), three-valued.

Every check runs over a `Lookup` giving the `(hlc, parents)` of the records the checker
holds, so one code path serves a replica's store and an evidence bundle's records.
Invariant: a `YES` or `NO` is the same over any larger set of held records (with the same
bytes per CID); only `UNDECIDED` can change as more records become known.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class _Walk:
    """One covered-walk from a set of heads towards targets; see `_walk`."""

    found: frozenset[CID]
    # For each CID the walk reached but could not use (not held, or an hlc not below its
    # child's), the highest hlc of a record that named it; None = it is a head itself.
    blocked: dict[CID, Hlc | None]
    visited: frozenset[CID]


def _walk(heads: Iterable[CID], floor: Hlc, targets: Collection[CID], lookup: Lookup) -> _Walk:
    # The covered-walk of §2.4 for every target at once: a record is expanded to its
    # parents only while its hlc is above `floor` (the least target hlc), and a record
    # reached from a child at hlc h lies in target x's own walk iff h > x's hlc, because
    # hlcs fall strictly along every parent link. So per-target answers follow from one walk.
    found: set[CID] = set()
    blocked: dict[CID, Hlc | None] = {}
    visited: set[CID] = set()
    stack: list[tuple[CID, Hlc | None]] = [(h, None) for h in heads]
    while stack:
        cid, via = stack.pop()
        if cid in targets:
            found.add(cid)
        meta = lookup(cid)
        if meta is None or (via is not None and meta[0] >= via):
            _block(blocked, cid, via)
            if meta is None:
                continue
        if cid in visited:
            continue
        visited.add(cid)
        hlc, parents = meta
        if hlc <= floor:
            continue  # no target is an ancestor of a record whose hlc is at most every target's
        stack.extend((p, hlc) for p in parents)
    return _Walk(frozenset(found), blocked, frozenset(visited))


def _block(blocked: dict[CID, Hlc | None], cid: CID, via: Hlc | None) -> None:
    if cid not in blocked:
        blocked[cid] = via
        return
    known = blocked[cid]
    if known is not None and (via is None or via > known):
        blocked[cid] = via


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
    walk = _walk(heads, min(stamps.values()), stamps.keys(), lookup)
    for x, stamp in stamps.items():
        if x in walk.found:
            result[x] = Verdict.YES  # reached through signed parent links: ancestry is a fact
        elif any(via is None or via > stamp for via in walk.blocked.values()):
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
    walk = _walk(heads, min(stamps), xs, lookup)
    return set(walk.visited) | set(walk.blocked) | xs


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
