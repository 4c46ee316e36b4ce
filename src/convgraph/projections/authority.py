"""The authority projection of a rooted conversation: who may do what, judged in the DAG.

Implements docs/authority.md. `check(state, record)` is the ingest rule (section 4 and 8): it
judges a record against its own causal past and raises a typed error. `apply` adds a record that
passed. The answers (`who_can`, `members`, `excluded`, `findings`, `pins`, `audits`) judge with
everything the state holds, so a revocation that arrives later excludes what it is concurrent
with. Invariant: every answer is a function of the set of records applied, never of their
order, and every yes cites the chain of CIDs from the genesis to the grant that gives it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from convgraph.core.cid import CID
from convgraph.core.keys import actor_text
from convgraph.core.kinds import CAPABILITIES
from convgraph.core.record import Record
from convgraph.errors import (
    AuthorityError,
    BranchOriginError,
    FloatingDecisionError,
    ForgedMergeError,
    RetractionTargetError,
)
from convgraph.projections.ancestry import Ancestry, Vector

ADMIN: Final = "admin"
READ: Final = "read"
_WRITE_KINDS: Final = frozenset({
    "user_message", "agent_message", "tool_invocation", "tool_result", "code_snapshot", "patch",
    "decision_request", "branch", "checkpoint", "routing_observation",
})
_REVIEW_KINDS: Final = frozenset({"review_comment", "attestation", "audit"})
_KEPT: Final = frozenset({
    "genesis", "grant", "revocation", "pin", "audit", "decision_request", "decision",
    "review_comment", "attestation", "branch",
})


@dataclass(frozen=True)
class Answer:
    """Whether `actor` holds `capability`, and the CIDs that say so (or what it lacks).

    `chain` runs from the genesis to the grant that gives the capability, one grant per
    delegation step. `until` is the wall-clock ms the capability expires at (None: never).
    """

    allowed: bool
    actor: bytes
    capability: str
    chain: tuple[CID, ...] = ()
    blocked_by: tuple[CID, ...] = ()
    reason: str = ""
    until: int | None = None


@dataclass(frozen=True)
class Exclusion:
    """A stored record that has no effect on any view, why, and the records that cause it."""

    cid: CID
    reason: str  # revoked_concurrently | grant_excluded | revoker_revoked
    causes: tuple[CID, ...]


@dataclass(frozen=True)
class Finding:
    """A decision that lacks the reviews its request asked for (docs/authority.md §8.4)."""

    kind: str  # omitted_review
    cid: CID
    evidence: tuple[CID, ...]
    missing: tuple[bytes, ...] = ()
    detail: str = ""


class _Use(NamedTuple):
    """A record being judged: stored (`cid` indexed), incoming, or virtual at the heads."""

    cid: CID | None
    actor: bytes
    vv: Vector
    parents: tuple[CID, ...]
    wall: int
    kind: str
    payload: Mapping[str, Any]


class _Held(NamedTuple):
    chain: tuple[CID, ...]
    until: int | None


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
        self.actor_keys: list[bytes] = []
        # the highest seq of each author's grants and revocations: a record whose vector
        # reaches all of them has every authority record in its past (the common case)
        self.authority_tips: dict[int, int] = {}
        self._effective: dict[frozenset[CID] | None, frozenset[CID]] = {}
        self._judges: dict[frozenset[CID] | None, _Judge] = {}
        self.version = 0  # bumped by every apply: answers cached under it stay valid until then
        self.cached: dict[str, tuple[int, Any]] = {}

    def forget_effective(self) -> None:
        """Drop the cached effective sets and judges: a grant or revocation was added."""
        self._effective.clear()
        self._judges.clear()

    def judge(self, within: frozenset[CID] | None = None) -> _Judge:
        """A judge over the effective revocations; its memos hold until a grant or revocation is added."""
        judge = self._judges.get(within)
        if judge is None:
            judge = self._judges[within] = _Judge(self, self.effective(within))
        return judge

    def actor_of(self, cid: CID) -> bytes:
        return self.actor_keys[self.ancestry.nodes[cid].actor]

    def effective(self, within: frozenset[CID] | None = None) -> frozenset[CID]:
        """The effective revocations (§6.1) among all records, or among the authority records `within`."""
        cached = self._effective.get(within)
        if cached is None:
            k = frozenset(u for u in self.revocations if within is None or u in within)
            while True:
                judge = _Judge(self, k)
                kept = frozenset(u for u in k if judge.authorized(u))
                if kept == k:
                    break
                k = kept
            cached = self._effective[within] = k
        return cached


def apply(state: AuthorityState, record: Record) -> AuthorityState:
    """Add a record whose parents were applied (and which `check` accepted); a known CID is ignored."""
    if record.cid in state.ancestry:
        return state
    state.ancestry.add(record.cid, record.actor, record.seq, record.hlc, record.parents)
    state.version += 1
    if len(state.actor_keys) < len(state.ancestry.actors):
        state.actor_keys.append(record.actor)
    cid, kind, p = record.cid, record.kind, record.payload
    state.by_actor[record.actor].append(cid)
    if record.branch is not None:
        state.branch_of[cid] = record.branch
    state.needs[cid] = _needs(state, record)
    if kind in _KEPT:
        state.records[cid] = record
        state.kept[kind].append(cid)
    if kind == "genesis":
        # every genesis of one id has the same actor (format.md §15.2); keeping the earliest
        # rather than the first applied keeps the answers independent of delivery order
        state.geneses.append(cid)
        if state.genesis is None or record.order_key < _order(state, state.genesis):
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


def check(state: AuthorityState, record: Record) -> None:
    """Raise the typed error of docs/authority.md §4 and §8 unless `record` is authorized in its past."""
    if record.kind == "genesis":
        return  # the root rules are intrinsic (format.md §15.2)
    use = _incoming(state, record)
    _check_graph(state, record, use)
    within = None if _sees_all_authority(state, use.vv) else _authority_within(state, use)
    judge, needs = state.judge(within), _needs(state, record)
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
    use = _virtual(state, actor, heads, at_ms)
    return state.judge().answer(actor, capability, use)


def require(state: AuthorityState, actor: bytes, kind: str, payload: Mapping[str, Any], *,
            heads: Iterable[CID], at_ms: int) -> None:
    """Raise `AuthorityError` unless `actor` may write a `kind` record on `heads` now (a local write)."""
    if kind == "genesis":
        return  # only the owner's key can derive the id (format.md §15.2)
    use = _virtual(state, actor, heads, at_ms)._replace(kind=kind, payload=payload)
    needs = _needs_of(state, actor, kind, payload)
    state.judge().require(use, needs, None)


def members(state: AuthorityState, heads: Iterable[CID], at_ms: int) -> dict[bytes, tuple[Answer, ...]]:
    """Every actor holding `read` now, with each capability it holds (and its chain)."""
    head_list = tuple(heads)
    judge = state.judge()
    candidates = set(state.grants_to) | ({state.owner} if state.owner else set())
    out: dict[bytes, tuple[Answer, ...]] = {}
    for actor in sorted(candidates):
        use = _virtual(state, actor, head_list, at_ms)
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
    k = state.effective()
    judge = state.judge()
    # §6.1 drops a revocation in its first round, judged with every stored revocation (a later
    # round only widens authority): what cut it then is its cause, even if itself dropped;
    # if nothing cut it, its author's grants in its past were unauthorized in that round
    dropped = [u for u in state.revocations if u not in k]
    first = _Judge(state, frozenset(state.revocations)) if dropped else judge
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
    return tuple(sorted(out, key=lambda e: _order(state, e.cid)))


def findings(state: AuthorityState) -> tuple[Finding, ...]:
    """Every decision that lacks the reviews its request asked for (§8.4), in canonical order."""
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
                         key=lambda r: _order(state, r))
        by = {state.actor_of(r) for r in reviews}
        missing = tuple(a for a in named if a not in by)
        if len(by) < wanted or missing:
            detail = f"{len(by)} of {wanted} reviews" if len(by) < wanted else "named reviewers missing"
            out.append(Finding("omitted_review", d, (q, *reviews), missing, detail))
    return tuple(sorted(out, key=lambda f: _order(state, f.cid)))


def effective_records(state: AuthorityState, kind: str) -> tuple[Record, ...]:
    """The authorized, non-excluded records of `kind` (pins, audits), in canonical order."""
    out_cids = {e.cid for e in excluded(state)}
    return tuple(sorted((state.records[c] for c in state.kept.get(kind, ()) if c not in out_cids),
                        key=lambda r: r.order_key))


class _Judge:
    """Answers `holds` and `authorized` for one set of effective revocations, memoized."""

    def __init__(self, state: AuthorityState, effective: frozenset[CID]) -> None:
        self.state = state
        self.k = effective
        self._authorized: dict[CID, bool] = {}
        self._held: dict[tuple[bytes, str, CID], tuple[_Held | None, set[CID]]] = {}
        # (author, needs) -> until, for records that see every authority record (see `check`)
        self._steady: dict[tuple[bytes, frozenset[str]], int | None] = {}

    # -- records in the state -------------------------------------------------------------

    def authorized(self, cid: CID) -> bool:
        """§5.4 `auth(x)` for a stored record; the owner's records always are."""
        done = self._authorized.get(cid)
        if done is None:
            use = self._stored(cid)
            done = self._authorized[cid] = self._passes(use, self.state.needs[cid])
        return done

    def blockers_of(self, cid: CID) -> tuple[CID, ...]:
        use = self._stored(cid)
        found: set[CID] = set()
        for cap in self.state.needs[cid] | {READ}:
            found |= self._direct(use.actor, cap, use)[1]
        return tuple(sorted(found, key=lambda u: _order(self.state, u)))

    def unauthorized_grants(self, cid: CID) -> tuple[CID, ...]:
        use = self._stored(cid)
        grants = [g for g in self.state.grants_to.get(use.actor, ())
                  if _precedes(self.state, g, use) and not self.authorized(g)]
        return tuple(sorted(grants, key=lambda g: _order(self.state, g)))

    # -- any use --------------------------------------------------------------------------

    def require(self, use: _Use, needs: frozenset[str], cid: CID | None) -> int | None:
        """Raise `AuthorityError` unless `use`'s author holds `needs`; the earliest expiry (None: never)."""
        until: int | None = None
        for cap in sorted(needs):
            held, blocked = self.holds(use.actor, cap, use)
            if held is None:
                raise _authority_error(self.state, use.actor, cap, blocked, cid)
            until = _earlier(until, held.until)
        _check_delegation(self, use, cid)
        return until

    def passed(self, actor: bytes, needs: frozenset[str], wall: int) -> bool:
        until = self._steady.get((actor, needs), -1)
        return until is None or wall < until

    def remember(self, actor: bytes, needs: frozenset[str], until: int | None) -> None:
        self._steady[(actor, needs)] = until

    def answer(self, actor: bytes, capability: str, use: _Use) -> Answer:
        held, blocked = self.holds(actor, capability, use)
        order = tuple(sorted(blocked, key=lambda u: _order(self.state, u)))
        if held is not None:
            return Answer(True, actor, capability, held.chain, (), "", held.until)
        reason = "revoked" if order else "expired" if self._expired(actor, capability, use) else "no grant"
        return Answer(False, actor, capability, (), order, reason)

    def _expired(self, actor: bytes, cap: str, use: _Use) -> bool:
        """Whether a grant of `cap` (or of `read`) to `actor` is in `use`'s past but expired by it."""
        for g in self.state.grants_to.get(actor, ()):
            p = self.state.records[g].payload
            wanted = cap in p["rights"] or cap == READ or READ in p["rights"]
            expires = p.get("expires_ms")
            if wanted and expires is not None and use.wall >= expires and _precedes(self.state, g, use):
                return True
        return False

    def holds(self, actor: bytes, cap: str, use: _Use) -> tuple[_Held | None, set[CID]]:
        """§5.4: the chain by which `actor` holds `cap` at `use`, or None and the revocations in the way."""
        if actor == self.state.owner and self.state.genesis is not None:
            return _Held((_root_of(self.state, use),), None), set()
        held, blocked = self._direct(actor, cap, use)
        if held is None or cap == READ:
            return held, blocked
        read, read_blocked = self._direct(actor, READ, use)
        if read is None:
            return None, blocked | read_blocked
        return _Held(held.chain, _earlier(held.until, read.until)), set()

    def _direct(self, actor: bytes, cap: str, use: _Use) -> tuple[_Held | None, set[CID]]:
        key = (actor, cap, use.cid) if use.cid is not None else None
        if key is not None and key in self._held:
            return self._held[key]
        best: tuple[int, tuple[int, int, bytes, bytes]] | None = None
        chosen: _Held | None = None
        until: int | None = -1  # -1: no grant yet; None: one without expiry
        blocked: set[CID] = set()
        for g in self.state.grants_to.get(actor, ()):
            p = self.state.records[g].payload
            if not _precedes(self.state, g, use) or (cap != READ and cap not in p["rights"]):
                continue
            expires = p.get("expires_ms")
            if (expires is not None and use.wall >= expires) or not self.authorized(g):
                continue
            cut = self._cuts(actor, cap, g, use)
            if cut:
                blocked |= cut
                continue
            chain = self._chain(g)
            rank = (len(chain), _order(self.state, g))
            if best is None or rank < best:
                best, chosen = rank, _Held(chain, None)
            until = None if until is None or expires is None else max(until, expires)
        held = None if chosen is None else _Held(chosen.chain, until)
        if key is not None:
            self._held[key] = (held, blocked)
        return held, blocked

    def _cuts(self, actor: bytes, cap: str, g: CID, use: _Use) -> set[CID]:
        """The effective revocations that cut grant `g` for `use` (§5.3, with §6.3's exemption)."""
        st, found = self.state, set()
        for u in st.revocations_of.get(actor, ()):
            closes = st.records[u].payload["rights"]
            # revoking `read` ends membership: it closes every capability, not `read` alone
            if u not in self.k or u == use.cid or (cap not in closes and READ not in closes):
                continue
            if st.ancestry.precedes(u, g):
                continue  # a re-grant made after seeing the revocation
            if use.cid is not None and use.cid in st.ancestry and st.ancestry.precedes(use.cid, u):
                continue  # done before the revocation
            if _exempt(st, u, use):
                continue
            found.add(u)
        return found

    def _chain(self, g: CID) -> tuple[CID, ...]:
        granter = self.state.actor_of(g)
        held, _ = self.holds(granter, ADMIN, self._stored(g))
        assert held is not None, "an authorized grant's granter holds admin"
        return (*held.chain, g)

    def _passes(self, use: _Use, needs: frozenset[str]) -> bool:
        if use.kind == "genesis":
            return True
        for cap in needs:
            held, _ = self.holds(use.actor, cap, use)
            if held is None:
                return False
        try:
            _check_delegation(self, use, None)
        except AuthorityError:
            return False
        return True

    def _stored(self, cid: CID) -> _Use:
        st = self.state
        node = st.ancestry.nodes[cid]
        record = st.records.get(cid)
        kind = record.kind if record is not None else ""
        payload: Mapping[str, Any] = record.payload if record is not None else {}
        return _Use(cid, st.actor_keys[node.actor], node.vv, node.parents, node.hlc.wall_ms, kind, payload)


def _check_delegation(judge: _Judge, use: _Use, cid: CID | None) -> None:
    """§5.2: no grant to or revocation of the owner; a grant outlives nothing it delegates."""
    if use.kind not in ("grant", "revocation"):
        return
    st, p = judge.state, use.payload
    if p["grantee"] == st.owner:
        raise AuthorityError(f"a {use.kind} cannot name the conversation's owner", capability=ADMIN,
                             actor=actor_text(use.actor), cid=cid)
    if use.kind == "grant":
        expires = p.get("expires_ms")
        for cap in sorted({ADMIN, *p["rights"]}):
            held, _ = judge.holds(use.actor, cap, use)
            if held is not None and held.until is not None and (expires is None or expires > held.until):
                raise AuthorityError(
                    f"the grant outlives the granter's own `{cap}` (until {held.until} ms)",
                    capability=cap, actor=actor_text(use.actor), cid=cid)


def _root_of(state: AuthorityState, use: _Use) -> CID:
    """The genesis an owner's answer cites: the earliest in `use`'s past (§2).

    There is one unless the owner equivocated at seq 1; every record has one in its past.
    """
    assert state.genesis is not None
    if len(state.geneses) == 1:
        return state.genesis
    seen = [g for g in state.geneses if _precedes(state, g, use)]
    return min(seen, key=lambda g: _order(state, g)) if seen else state.genesis


def _exempt(state: AuthorityState, u: CID, use: _Use) -> bool:
    """§6.3: a revocation of `u`'s author's admin, concurrent with `u`, is not cut by `u`."""
    if use.kind != "revocation" or use.payload["grantee"] != state.actor_of(u):
        return False
    if not {ADMIN, READ} & set(use.payload["rights"]):
        return False
    return not _precedes(state, u, use)


def _precedes(state: AuthorityState, y: CID, use: _Use) -> bool:
    """Whether `y` is in the strict causal past of `use`."""
    if use.cid is not None and use.cid in state.ancestry:
        return state.ancestry.precedes(y, use.cid)
    return state.ancestry.precedes_vector(y, use.vv, use.parents)


def _incoming(state: AuthorityState, record: Record) -> _Use:
    known = [p for p in record.parents if p in state.ancestry]
    vv = state.ancestry.vector_of(known)
    return _Use(None, record.actor, vv, tuple(known), record.hlc.wall_ms, record.kind, record.payload)


def _virtual(state: AuthorityState, actor: bytes, heads: Iterable[CID], at_ms: int) -> _Use:
    known = tuple(h for h in heads if h in state.ancestry)
    return _Use(None, actor, state.ancestry.vector_of(known), known, at_ms, "", {})


def _sees_all_authority(state: AuthorityState, vv: Vector) -> bool:
    if state.ancestry.forked:
        return False
    return all(i < len(vv) and vv[i] >= seq for i, seq in state.authority_tips.items())


def _authority_within(state: AuthorityState, use: _Use) -> frozenset[CID]:
    everything = [*state.kept.get("grant", ()), *state.revocations]
    return frozenset(a for a in everything if _precedes(state, a, use))


def _needs(state: AuthorityState, record: Record) -> frozenset[str]:
    if record.kind == "genesis":
        return frozenset()
    return _needs_of(state, record.actor, record.kind, record.payload)


def _needs_of(state: AuthorityState, actor: bytes, kind: str, p: Mapping[str, Any]) -> frozenset[str]:
    """docs/authority.md §3: what the author of such a record must hold."""
    if kind in _WRITE_KINDS:
        return _WRITE
    if kind in _REVIEW_KINDS:
        return _REVIEW
    if kind in ("grant", "revocation"):
        return frozenset({ADMIN, *p["rights"]})
    if kind == "retraction":
        target = p["target"]
        own = target in state.ancestry and state.actor_of(target) == actor
        return _WRITE if own else _ADMIN
    return _SIMPLE.get(kind, _WRITE)


_WRITE: Final = frozenset({"write"})
_REVIEW: Final = frozenset({"review"})
_ADMIN: Final = frozenset({ADMIN})
_SIMPLE: Final[Mapping[str, frozenset[str]]] = {
    "genesis": frozenset(),
    "decision": frozenset({"decide"}), "merge": frozenset({"merge"}), "pin": _ADMIN,
    "supersession": _WRITE,
}


def _check_graph(state: AuthorityState, record: Record, use: _Use) -> None:
    """§8: the graph kinds name only what the record's causal past holds."""
    kind, p, cid = record.kind, record.payload, record.cid

    def seen(target: CID) -> bool:
        return target in state.ancestry and _precedes(state, target, use)

    if kind == "merge":
        name = p["branch"]
        if not any(seen(b) for b in state.branches.get(name, ())):
            raise ForgedMergeError(f"merge of branch {name[:64]!r}, which is not in its causal past", cid=cid)
        if not set(p["heads"]) <= set(record.parents):
            raise ForgedMergeError("a merge's heads must be among its parents", cid=cid)
        for a in p["accepted"]:
            if not seen(a) or state.branch_of.get(a) != name:
                raise ForgedMergeError(
                    f"accepted record {a} is not on branch {name[:64]!r} in its past", cid=cid)
    elif kind == "branch" and not seen(p["from"]):
        raise BranchOriginError("a branch's `from` must be in its causal past", cid=cid)
    elif kind == "decision":
        request = state.records.get(p["request"])
        if request is None or request.kind != "decision_request" or not seen(request.cid):
            raise FloatingDecisionError(
                "a decision's request must be a decision_request in its past", cid=cid)
    elif kind in ("retraction", "supersession"):
        if not seen(p["target"]):
            raise RetractionTargetError(f"a {kind}'s target must be in its causal past", cid=cid)
        if kind == "supersession" and state.actor_of(p["target"]) != record.actor:
            raise AuthorityError("only a record's author may supersede it", capability="write",
                                 actor=actor_text(record.actor), cid=cid)


def _authority_error(state: AuthorityState, actor: bytes, cap: str, blocked: set[CID],
                     cid: CID | None) -> AuthorityError:
    who = actor_text(actor)
    where = "this record's causal past" if cid is not None else "what this replica holds"
    because = (f"revoked by {', '.join(str(u) for u in sorted(blocked, key=lambda u: _order(state, u)))}"
               if blocked else f"no grant of it is in {where}")
    at = "at this record's causal position" if cid is not None else "to write this here"
    return AuthorityError(
        f"{who} lacks `{cap}` {at} ({because}); `convgraph why {who} {cap}` shows the chain",
        capability=cap, actor=who, cid=cid,
        blocked_by=tuple(str(u) for u in sorted(blocked, key=lambda u: _order(state, u))),
    )


def _earlier(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def _order(state: AuthorityState, cid: CID) -> tuple[int, int, bytes, bytes]:
    node = state.ancestry.nodes[cid]
    return (node.hlc.wall_ms, node.hlc.counter, state.actor_keys[node.actor], bytes(cid))


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
        return frozenset({e.cid for e in self.excluded()} | {f.cid for f in self.findings()})
