"""The projection's doors and answers: the ingest rule, local writes, who_can, members,
exclusions and findings (docs/authority.md §4, §6, §7).

Invariant: every answer is a function of the set of records applied, never of their order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from convgraph.core.cid import CID
from convgraph.core.kinds import CAPABILITIES
from convgraph.core.record import Record
from convgraph.projections.authority.judge import (
    Judge,
    authority_within,
    effective,
    incoming,
    judge_of,
    order_key,
    sees_all_authority,
    virtual,
)
from convgraph.projections.authority.needs import needs_of, record_needs
from convgraph.projections.authority.rules import check_graph
from convgraph.projections.authority.stale import stale_findings
from convgraph.projections.authority.state import AuthorityState
from convgraph.projections.authority.values import Answer, Exclusion, Finding


def check(state: AuthorityState, record: Record) -> None:
    """Raise the typed error of docs/authority.md §4 and §8 unless `record` is authorized in its past."""
    if record.kind == "genesis":
        return  # the root rules are intrinsic (format.md §15.2)
    use = incoming(state, record)
    if len(use.parents) == len(record.parents):  # every parent known: `apply` reuses the vector
        state.checked = (record.cid, use.vv)
    check_graph(state, record, use)
    within = None if sees_all_authority(state, use.vv) else authority_within(state, use)
    judge, needs = judge_of(state, within), record_needs(state, record)
    # A record that sees every grant and revocation gets its author's answer from the heads:
    # the same for each such record until the earliest expiry among the grants it rests on.
    steady = within is None and record.kind not in ("grant", "revocation")
    if steady and judge.passed(record.actor, needs, use.wall):
        return
    until = judge.require(use, needs, record.cid)
    if steady:
        judge.remember(record.actor, needs, until)

def who_can(
    state: AuthorityState, actor: bytes, capability: str, heads: Iterable[CID], at_ms: int
) -> Answer:
    """The answer for a record `actor` would write now on top of `heads` (§7)."""
    use = virtual(state, actor, heads, at_ms)
    return judge_of(state).answer(actor, capability, use)

def require(state: AuthorityState, actor: bytes, kind: str, payload: Mapping[str, Any], *,
            heads: Iterable[CID], at_ms: int) -> None:
    """Raise `AuthorityError` unless `actor` may write a `kind` record on `heads` now (a local write)."""
    if kind == "genesis":
        return  # only the owner's key can derive the id (format.md §15.2)
    use = virtual(state, actor, heads, at_ms)._replace(kind=kind, payload=payload)
    needs = needs_of(state, actor, kind, payload)
    judge_of(state).require(use, needs, None)

def members(state: AuthorityState, heads: Iterable[CID], at_ms: int) -> dict[bytes, tuple[Answer, ...]]:
    """Every actor holding `read` now, with each capability it holds (and its chain)."""
    head_list = tuple(heads)
    judge = judge_of(state)
    candidates = set(state.grants_to) | ({state.owner} if state.owner else set())
    out: dict[bytes, tuple[Answer, ...]] = {}
    for actor in sorted(candidates):
        use = virtual(state, actor, head_list, at_ms)
        answers = tuple(a for c in CAPABILITIES if (a := judge.answer(actor, c, use)).allowed)
        if answers:
            out[actor] = answers
    return out

def excluded(state: AuthorityState) -> tuple[Exclusion, ...]:
    """Every stored record that the whole set shows unauthorized (§6.2), in canonical order."""
    hit = state.cached.get("excluded")
    if hit is not None and hit[0] == state.version:
        return hit[1]  # type: ignore[no-any-return]
    result = _excluded(state)
    state.cached["excluded"] = (state.version, result)
    return result

def _excluded(state: AuthorityState) -> tuple[Exclusion, ...]:
    k = effective(state)
    judge = judge_of(state)
    # §6.1 drops a revocation in its first round, judged with every stored revocation (a later
    # round only widens authority): what cut it then is its cause, even if itself dropped;
    # if nothing cut it, its author's grants in its past were unauthorized in that round
    dropped = [u for u in state.revocations if u not in k]
    first = Judge(state, frozenset(state.revocations)) if dropped else judge
    out = [Exclusion(u, "revoker_revoked", first.blockers_of(u) or first.unauthorized_grants(u))
           for u in dropped]
    suspects = {state.records[u].payload["grantee"] for u in k}
    suspects |= {a for a, grants in state.grants_to.items() if not all(map(judge.authorized, grants))}
    for actor in suspects:
        for cid in state.by_actor.get(actor, ()):
            if cid in state.records and state.records[cid].kind == "revocation":
                continue  # judged by the effective set above
            if not judge.authorized(cid):
                blockers = judge.blockers_of(cid)
                reason = "revoked_concurrently" if blockers else "grant_excluded"
                out.append(Exclusion(cid, reason, blockers or judge.unauthorized_grants(cid)))
    return tuple(sorted(out, key=lambda e: order_key(state, e.cid)))

def findings(state: AuthorityState) -> tuple[Finding, ...]:
    """Every decision that lacks the reviews its request asked for (§8.4), and every stale one
    (§8.7), in canonical order (an omitted review before a stale finding of one decision)."""
    out_cids = {e.cid for e in excluded(state)}
    out: list[Finding] = []
    for d in state.kept.get("decision", ()):
        if d in out_cids:
            continue
        q = state.records[d].payload["request"]
        ask = state.records[q].payload
        wanted, named = ask.get("reviews", 0), ask.get("reviewers", [])
        if not wanted and not named:
            continue
        targets = [q] + ([ask["subject"]] if "subject" in ask else [])
        reviews = sorted({r for t in targets for r in state.reviews_of.get(t, ())
                          if r not in out_cids and state.ancestry.precedes(r, d)},
                         key=lambda r: order_key(state, r))
        by = {state.actor_of(r) for r in reviews}
        missing = tuple(a for a in named if a not in by)
        if len(by) < wanted or missing:
            detail = f"{len(by)} of {wanted} reviews" if len(by) < wanted else "named reviewers missing"
            out.append(Finding("omitted_review", d, (q, *reviews), missing, detail))
    out += stale_findings(state, frozenset(out_cids))
    return tuple(sorted(out, key=lambda f: (order_key(state, f.cid), f.kind != "omitted_review")))

def hidden(state: AuthorityState) -> frozenset[CID]:
    """What the views leave out: excluded records and decisions that omitted a review (§6.2, §8.4);
    a stale decision (§8.7) stays visible, flagged."""
    return frozenset({e.cid for e in excluded(state)}
                     | {f.cid for f in findings(state) if f.kind == "omitted_review"})

def effective_records(state: AuthorityState, kind: str) -> tuple[Record, ...]:
    """The authorized, non-excluded records of `kind` (pins, audits), in canonical order."""
    out_cids = {e.cid for e in excluded(state)}
    return tuple(sorted((state.records[c] for c in state.kept.get(kind, ()) if c not in out_cids),
                        key=lambda r: r.order_key))

@dataclass(frozen=True)
class Authority:
    """The authority projection of one rooted conversation as of `heads` (docs/authority.md §7).

    `at_ms` is the wall clock that expiries are judged against when an answer is not given one.
    """

    conv: str
    state: AuthorityState
    heads: tuple[CID, ...]
    at_ms: int

    @property
    def owner(self) -> bytes | None:
        return self.state.owner

    @property
    def genesis(self) -> CID | None:
        return self.state.genesis

    def who_can(self, actor: bytes, capability: str, at_ms: int | None = None) -> Answer:
        """Whether `actor` may use `capability` now, with the chain of CIDs that says so."""
        return who_can(self.state, actor, capability, self.heads, self.at_ms if at_ms is None else at_ms)

    def members(self) -> dict[bytes, tuple[Answer, ...]]:
        """Every actor holding `read`, with each capability it holds."""
        return members(self.state, self.heads, self.at_ms)

    def pins(self) -> tuple[Record, ...]:
        return effective_records(self.state, "pin")

    def audits(self) -> tuple[Record, ...]:
        return effective_records(self.state, "audit")

    def excluded(self) -> tuple[Exclusion, ...]:
        return excluded(self.state)

    def findings(self) -> tuple[Finding, ...]:
        return findings(self.state)

    def hidden(self) -> frozenset[CID]:
        """What the views leave out: excluded records and decisions that omitted a review."""
        return hidden(self.state)
