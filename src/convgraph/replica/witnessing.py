"""A replica's memory of what its peers signed (docs/integrity.md §4-§6): the imperative
shell around `integrity.remembered` and `integrity.gossip`.

Each function reads what the store remembers, runs the pure checks over a lookup of the
records it holds, proves each decided claim with its evidence bundle, and writes findings,
pending checks, receipts and the remembered statement in one transaction. Invariant: a
stored finding is one whose bundle the verifier accepts, and a session whose statement is
stale (`StaleStatementError`) changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.errors import StatementError
from convgraph.integrity import gossip as gossip_
from convgraph.integrity.builders import (
    record_equivocation_finding,
    self_inconsistent_finding,
    statements_finding,
)
from convgraph.integrity.consistency import Lookup
from convgraph.integrity.findings import SERVER_EQUIVOCATION, Finding
from convgraph.integrity.remembered import Claim, Memory, Session, Undecided, check_session
from convgraph.integrity.statement import Statement, decode_statement
from convgraph.store.base import Store
from convgraph.store.rows import FindingRow, PendingCheck


@dataclass
class SessionVerdict:
    """What §4 made of one session's statements about one conversation.

    `findings` are the new ones; `pending` says which checks wait for a later statement or
    for records; `converged` is the signed convergence of step 5, and `reasons` why not.
    """

    findings: list[Finding] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    converged: bool = False
    reasons: list[str] = field(default_factory=list)


def store_lookup(store: Store) -> Lookup:
    """(hlc, parents) of a record the store holds, bytes or header only; cached per call site."""
    cache: dict[CID, tuple[Hlc, tuple[CID, ...]] | None] = {}

    def lookup(cid: CID) -> tuple[Hlc, tuple[CID, ...]] | None:
        if cid not in cache:
            meta = store.metas([cid]).get(cid)
            cache[cid] = None if meta is None else (meta.hlc, meta.parents)
        return cache[cid]

    return lookup


def observe_session(
    store: Store, peer: bytes, conv: str, statements: Sequence[Statement], *, started_ms: int,
    received_ms: int, fingerprints_matched: bool, now_ms: int,
) -> SessionVerdict:
    """Run §4 on the statements `peer` sent about `conv` in one session, and remember."""
    with store.transaction():
        lookup = store_lookup(store)
        kept = [_undecided(p) for p in store.pending_checks(peer, conv)]
        split = [u for u in kept if u is not None and u.reason == SERVER_EQUIVOCATION]
        memory = Memory(
            remembered=_decoded(store.remembered(peer, conv)),
            receipts=tuple(_decode_all(store.open_receipts(peer, conv))),
            pending=tuple(u for u in kept if u is not None and u.reason != SERVER_EQUIVOCATION),
        )
        session = Session(tuple(statements), started_ms, received_ms, store.count(conv),
                          tuple(store.heads(conv)), fingerprints_matched)
        outcome = check_session(peer, conv, memory, session, lookup)
        findings, unproven = _prove(store, outcome.claims, now_ms)
        store.add_receipts(outcome.open)
        # a step-3 claim its bundle cannot prove yet is pending: the remembered statement stays
        advance = outcome.advance and not any(memory.remembered in (c.earlier, c.later) for c in unproven)
        if advance:
            store.remember(outcome.latest)
            store.close_receipts(peer, conv, outcome.close)
        # a receipt a finding now holds is settled: kept open, it would be reported anew each session
        store.close_receipts(peer, conv, [f.earlier.cid for f, _ in findings if f.earlier.stored])
        new = [finding for _, finding in findings if store.add_finding(_row(finding))]
        pending = [*outcome.pending, *(_unproven(c) for c in unproven)]
        store.set_pending_checks(peer, conv, [*map(_check, split), *map(_check, pending)])
        new += _check_gossip(store, conv, [outcome.latest] if advance else [], lookup, now_ms)
    return SessionVerdict(new, [_describe(u) for u in pending], outcome.converged, list(outcome.reasons))


def observe_gossip(
    store: Store, own: bytes, conv: str, statements: Iterable[Statement], *, now_ms: int
) -> list[Finding]:
    """Keep the statements gossiped about `conv` (not by `own` key) and check each pair by
    one key (§5); returns the new `server_equivocation` findings.

    A statement held already is not checked again: each pair was checked when its later one
    arrived (an undecided pair is kept and retried), and peers gossip the same latest
    statements session after session, so re-checking them would walk history for nothing."""
    with store.transaction():
        held = {s.cid for s in _decode_all([*store.remembered_in(conv), *store.gossip(conv)])}
        fresh = [s for s in dict.fromkeys(statements)
                 if s.conv == conv and s.key != own and s.cid not in held]
        for s in fresh:
            store.add_gossip(s)
        return _check_gossip(store, conv, fresh, store_lookup(store), now_ms)


def gossip_for(store: Store, conv: str, exclude: Collection[bytes]) -> list[Statement]:
    """The statements to gossip about `conv`: each other key's latest, newest first (§5)."""
    held = _decode_all([*store.remembered_in(conv), *store.gossip(conv)])
    return gossip_.select(held, conv, exclude)


def record_equivocations(store: Store, pairs: Iterable[tuple[CID, CID]], *, now_ms: int) -> list[Finding]:
    """A `record_equivocation` finding for each pair of equivocating records whose bytes are
    held (a compacted one has none to prove it with; `Store.equivocations` still names it)."""
    new: list[Finding] = []
    with store.transaction():
        for a, b in pairs:
            held = store.get_many([a, b])
            if len(held) == 2:
                finding = record_equivocation_finding(held[a], held[b], now_ms)
                if store.add_finding(_row(finding)):
                    new.append(finding)
    return new


def findings(store: Store, conv: str | None = None) -> list[Finding]:
    """The stored findings (of `conv`), oldest first."""
    return [_finding(row) for row in store.findings(conv)]


# ------------------------------------------------------------ helpers


def _check_gossip(
    store: Store, conv: str, fresh: Sequence[Statement], lookup: Lookup, now_ms: int
) -> list[Finding]:
    """Pairs of each fresh statement with the held ones of its key, and the kept pairs again."""
    held = _decode_all([*store.remembered_in(conv), *store.gossip(conv)])
    claims, undecided = gossip_.check_pairs(fresh, held, lookup)
    by_key: dict[bytes, list[Undecided]] = {}
    for key in {s.key for s in [*held, *fresh]}:
        kept = [u for u in map(_undecided, store.pending_checks(key, conv)) if u is not None]
        found, still = gossip_.retry([u for u in kept if u.reason == SERVER_EQUIVOCATION], lookup)
        claims += found
        by_key[key] = [*(u for u in kept if u.reason != SERVER_EQUIVOCATION), *still]
    proven, unproven = _prove(store, claims, now_ms)
    for u in [*undecided, *map(_unproven, unproven)]:
        by_key.setdefault(u.statements[0].key, []).append(u)
    for key, checks in by_key.items():
        if [*map(_check, checks)] != store.pending_checks(key, conv):
            store.set_pending_checks(key, conv, [*map(_check, checks)])
    return [finding for _, finding in proven if store.add_finding(_row(finding))]


def _prove(
    store: Store, claims: Iterable[Claim], now_ms: int
) -> tuple[list[tuple[Claim, Finding]], list[Claim]]:
    """Each claim's finding, built and verified with the records' bytes; the claims whose
    bundle would not prove them (records held as headers only) stay unproven."""
    fetch: Callable[[CID], bytes | None] = store.get
    proven: list[tuple[Claim, Finding]] = []
    unproven: list[Claim] = []
    for c in dict.fromkeys(claims):
        if c.earlier == c.later:
            finding = self_inconsistent_finding(c.earlier, fetch, now_ms)
        else:
            finding = statements_finding(c.kind, c.earlier, c.later, fetch, now_ms)
        if finding is None:
            unproven.append(c)
        else:
            proven.append((c, finding))
    return proven, unproven


def _unproven(c: Claim) -> Undecided:
    return Undecided(c.kind, (c.earlier,) if c.earlier == c.later else (c.earlier, c.later))


def _check(u: Undecided) -> PendingCheck:
    return PendingCheck(u.reason, tuple(s.data for s in u.statements))


def _undecided(p: PendingCheck) -> Undecided | None:
    """A kept check back as statements; None if a statement no longer decodes (never stored so)."""
    statements = _decode_all(p.statements)
    return Undecided(p.reason, tuple(statements)) if len(statements) == len(p.statements) else None


def _describe(u: Undecided) -> str:
    return f"{u.reason}: not provable yet, statements {', '.join(str(s.cid) for s in u.statements)}"


def _decoded(data: bytes | None) -> Statement | None:
    found = _decode_all([data] if data is not None else [])
    return found[0] if found else None


def _decode_all(blobs: Iterable[bytes]) -> list[Statement]:
    """Statements the store kept; they were verified when they arrived, and are again here."""
    out: list[Statement] = []
    for data in blobs:
        try:
            out.append(decode_statement(data))
        except StatementError:
            continue  # only a damaged store holds one: it proves nothing, so it is skipped
    return out


def _row(f: Finding) -> FindingRow:
    return FindingRow(f.id, f.kind, f.conv, f.bundle, tuple(f.cites), tuple(s.data for s in f.statements),
                      f.summary, f.found_ms)


def _finding(row: FindingRow) -> Finding:
    return Finding(id=row.id, kind=row.kind, conv=row.conv, bundle=row.bundle, cites=row.cites,
                   statements=tuple(_decode_all(row.statements)), summary=row.summary, found_ms=row.found_ms)
