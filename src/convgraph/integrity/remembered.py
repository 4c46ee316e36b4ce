"""The remembered-heads checks of docs/integrity.md §4, on values: no store, no clock.

`check_session` takes what a replica remembers of one peer and conversation, the statements
the peer sent in one session, and a `Lookup` over the records the replica holds; it returns
the findings the checks decided (`Claim`s, each still to be proven by its bundle), the
checks left undecided, and what to remember. Invariant: a `Claim` is only ever made for a
pair the §6.2 condition of its kind holds for under `lookup` (the later statement later than
the earlier by more than the slack, and not extending it), so its bundle proves it whenever
the bundle carries the records `lookup` read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from convgraph.core.cid import CID
from convgraph.errors import ProtocolError, StaleStatementError
from convgraph.integrity.consistency import Lookup, Verdict, covered_each, extends, missing, self_inconsistent
from convgraph.integrity.findings import DELETION, ROLLBACK, WITHHOLDING
from convgraph.integrity.statement import FRESHNESS_MS, Statement

MAX_PENDING: Final = 32  # per peer and conversation: the newest are kept, an undecided lie cannot grow it
_T = TypeVar("_T")


@dataclass(frozen=True)
class Claim:
    """A finding the checks decided: `later` does not extend `earlier` (the same statement
    twice for a self-inconsistent receipt)."""

    kind: str
    earlier: Statement
    later: Statement


@dataclass(frozen=True)
class Undecided:
    """A check its bundle cannot prove yet, kept with the statements involved, oldest first."""

    reason: str
    statements: tuple[Statement, ...]


@dataclass(frozen=True)
class Memory:
    """What a replica holds about one peer's statements of one conversation before a session."""

    remembered: Statement | None = None
    receipts: tuple[Statement, ...] = ()  # open receipts
    pending: tuple[Undecided, ...] = ()


@dataclass(frozen=True)
class Session:
    """One session's statements from the peer for one conversation, in order, and its context.

    `own_count` and `own_heads` are the checker's state of the conversation after the session.
    """

    statements: tuple[Statement, ...]
    started_ms: int
    received_ms: int
    own_count: int
    own_heads: tuple[CID, ...]
    fingerprints_matched: bool


@dataclass(frozen=True)
class Outcome:
    """What the checks decided: findings to prove, checks still pending, and what to remember.

    When `advance`, `latest` becomes the remembered statement and the receipts in `close`
    are closed; `open` are this session's receipts, kept open in any case.
    """

    claims: tuple[Claim, ...]
    pending: tuple[Undecided, ...]
    latest: Statement
    advance: bool
    open: tuple[Statement, ...]
    close: tuple[CID, ...]
    converged: bool
    reasons: tuple[str, ...]


class _Pending:
    """`_compare`'s answer when the pair cannot be proven yet."""


_PENDING: Final = _Pending()


def check_session(peer: bytes, conv: str, memory: Memory, session: Session, lookup: Lookup) -> Outcome:
    """Run §4 checks 1-5: 1, 4 and 5 on the session's last statement, 2 on each receipt, 3 on
    each statement in order against the one before it (the remembered one first); raises
    `StaleStatementError` (1)."""
    statements = session.statements
    if not statements:
        raise ProtocolError(f"the peer sent no statement about {conv[:64]!r}", reason="peer")
    for s in statements:
        if s.key != peer or s.conv != conv:
            raise ProtocolError(f"a statement in the session about {conv[:64]!r} is another key's "
                                f"or another conversation's ({s.cid})", reason="peer")
    latest = statements[-1]
    _check_fresh(latest, session)
    claims: list[Claim] = []
    pending: list[Undecided] = []
    receipts = _unique(s for s in statements if s.stored)
    for r in receipts:  # 2
        verdict = self_inconsistent(r, lookup)
        if verdict is Verdict.YES:
            claims.append(Claim(WITHHOLDING, r, r))
        elif verdict is Verdict.UNDECIDED:
            pending.append(Undecided(WITHHOLDING, (r,)))
    deleted: set[CID] = set()
    close: list[CID] = []
    early = _early_deletions(memory.receipts, statements[:-1], lookup)  # 4 along the session
    claims += early
    early_receipts = {c.earlier for c in early}
    for c in early:
        deleted |= _uncovered(c.earlier.stored, c.later, lookup)[0]
    for o in _unique([*memory.receipts, *receipts]):  # 4, first: 3 defers to its deletions
        if o == latest or o in early_receipts:
            continue
        uncovered, decided = _uncovered(o.stored, latest, lookup)
        if uncovered and latest.is_later_than(o):
            claims.append(Claim(DELETION, o, latest))
            deleted |= uncovered
        elif uncovered:
            pending.append(Undecided(DELETION, (o, latest)))
        elif decided:
            close.append(o.cid)
    step3, advance = _along(memory.remembered, statements, lookup, deleted)  # 3
    claims += [c for c in step3 if isinstance(c, Claim)]
    pending += [u for u in step3 if isinstance(u, Undecided)]
    retried, kept = _retry(memory.pending, latest, lookup)
    claims += retried
    pending = [*kept, *pending]
    matches = latest.count == session.own_count and latest.heads == tuple(sorted(set(session.own_heads)))
    reasons: list[str] = []
    if session.fingerprints_matched and not matches:  # 5
        reasons.append("statement")
        claims = [Claim(WITHHOLDING, c.earlier, c.later) if c.kind == DELETION else c for c in claims]
        pending = [Undecided(WITHHOLDING, u.statements) if u.reason == DELETION else u for u in pending]
    return Outcome(
        claims=tuple(_unique(claims)), pending=tuple(_unique(pending)[-MAX_PENDING:]), latest=latest,
        advance=advance, open=tuple(receipts), close=tuple(close) if advance else (),
        converged=session.fingerprints_matched and matches, reasons=tuple(reasons),
    )


def _early_deletions(
    receipts: Iterable[Statement], earlier: Sequence[Statement], lookup: Lookup
) -> list[Claim]:
    """Step 4 on the session's statements before its last: the first that is later than an open
    receipt and lacks a record it named proves the deletion (a restored server re-fed by this
    very session covers the record again by its last statement)."""
    claims: list[Claim] = []
    for o in receipts:
        for s in earlier:
            uncovered, _ = _uncovered(o.stored, s, lookup)
            if uncovered and s.is_later_than(o):
                claims.append(Claim(DELETION, o, s))
                break
    return claims


def _along(
    remembered: Statement | None, statements: Sequence[Statement], lookup: Lookup, deleted: set[CID]
) -> tuple[list[Claim | Undecided], bool]:
    """Step 3 on each statement in order, against the last one it was checked against (the
    remembered statement first): what it found, and whether the last statement may be remembered.

    Only the last statement's undecided check is kept pending (and holds the remembered one);
    an earlier one that proves nothing yet is skipped, the next is checked against the same one.
    """
    latest = statements[-1]
    found: list[Claim | Undecided] = []
    reference = remembered
    for s in _unique(statements):
        if reference is None or reference == s:
            reference = s
            continue
        step3 = _compare(reference, s, lookup)
        if isinstance(step3, _Pending):
            if s == latest:
                return [*found, Undecided(ROLLBACK, (reference, latest))], False
            continue
        if step3 is not None:
            gone, _ = missing(step3.earlier, step3.later, lookup)
            if step3.kind == DELETION or not gone & deleted:  # else step 4 reported it as a deletion
                found.append(step3)
        reference = s
    return found, True


def _check_fresh(s: Statement, session: Session) -> None:
    earliest, latest = session.started_ms - FRESHNESS_MS, session.received_ms + FRESHNESS_MS
    if not earliest <= s.time_ms <= latest:
        raise StaleStatementError(
            f"the peer's statement about {s.conv[:64]!r} ({s.cid}) is dated {s.time_ms}, outside "
            f"[{earliest}, {latest}]: a stale or future state", conv=s.conv, time_ms=s.time_ms,
            earliest_ms=earliest, latest_ms=latest,
        )


def _uncovered(stored: Iterable[CID], later: Statement, lookup: Lookup) -> tuple[set[CID], bool]:
    """The members of `stored` that `later` decidedly does not cover, and whether all were decided."""
    verdicts = covered_each(stored, later.heads, lookup)
    return {x for x, v in verdicts.items() if v is Verdict.NO}, Verdict.UNDECIDED not in verdicts.values()


def _compare(earlier: Statement, later: Statement, lookup: Lookup) -> Claim | _Pending | None:
    """The finding a pair proves (in whichever order proves it), `_PENDING` when none can be
    proven yet, None when `later` extends `earlier`."""
    verdict = extends(later, earlier, lookup)
    if verdict is Verdict.NO and later.is_later_than(earlier):
        return Claim(_kind(earlier, later, lookup), earlier, later)
    # asked whatever the forward walk gave: a peer's head we do not hold yet must not keep a pair
    # pending that the other order already proves, and a "newer" state that extends the earlier
    # one is still the older state when the earlier one is dated after it and lacks some of it
    if earlier.is_later_than(later) and extends(earlier, later, lookup) is Verdict.NO:
        return Claim(_kind(later, earlier, lookup), later, earlier)  # the "newer" state was taken first
    return None if verdict is Verdict.YES else _PENDING


def _kind(earlier: Statement, later: Statement, lookup: Lookup) -> str:
    gone, _ = missing(earlier, later, lookup)
    return DELETION if gone & set(earlier.stored) else ROLLBACK


def _retry(
    pending: Sequence[Undecided], latest: Statement, lookup: Lookup
) -> tuple[list[Claim], list[Undecided]]:
    """Try each kept check again, with `latest` as a later statement; what stays undecided."""
    claims: list[Claim] = []
    kept: list[Undecided] = []
    for u in pending:
        found, resolved = _retry_one(u, latest, lookup)
        if found is not None:
            claims.append(Claim(WITHHOLDING, found.earlier, found.later)
                          if u.reason == WITHHOLDING and found.kind == DELETION else found)
        elif not resolved:
            kept.append(u)
    return claims, kept


def _retry_one(u: Undecided, latest: Statement, lookup: Lookup) -> tuple[Claim | None, bool]:
    """(the claim it now proves, or None; whether it is settled without one)."""
    if len(u.statements) == 1 and u.reason == WITHHOLDING:
        verdict = self_inconsistent(u.statements[0], lookup)
        only = u.statements[0]
        if verdict is Verdict.YES:
            return Claim(WITHHOLDING, only, only), True
        return None, verdict is Verdict.NO
    held = u.statements
    pairs = [(a, b) for i, a in enumerate(held) for b in held[i + 1 :]]
    pairs += [(p, latest) for p in held if p != latest]
    settled = True
    for earlier, later in pairs:
        outcome = _compare(earlier, later, lookup)
        if isinstance(outcome, Claim):
            return outcome, True
        if later == latest:
            settled = settled and outcome is None and latest.is_later_than(earlier)
    # settled: `latest` extends every statement kept, more than the slack later; what the
    # others claimed within the slack can no longer be told from honest concurrency
    return None, settled and latest not in held


def _unique(items: Iterable[_T]) -> list[_T]:
    return list(dict.fromkeys(items))
