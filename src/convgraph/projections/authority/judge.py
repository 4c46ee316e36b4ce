"""Judging uses: who holds what at a record's position, given the effective revocations (§5, §6).

Invariant: a judge's memos are valid for one set of effective revocations and one set of grants
and revocations; `AuthorityState` drops its judges when either changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from convgraph.core import suggestions
from convgraph.core.cid import CID
from convgraph.core.keys import actor_text
from convgraph.core.record import Record
from convgraph.errors import AuthorityError
from convgraph.projections.ancestry import Vector
from convgraph.projections.authority.needs import ADMIN, READ, WRITE
from convgraph.projections.authority.state import AuthorityState
from convgraph.projections.authority.values import Answer


class Use(NamedTuple):
    """A record being judged: stored (`cid` indexed), incoming, or virtual at the heads."""

    cid: CID | None
    actor: bytes
    vv: Vector
    parents: tuple[CID, ...]
    wall: int
    kind: str
    payload: Mapping[str, Any]

_new_use = tuple.__new__  # a Use without NamedTuple's Python-level __new__: one per incoming record


class Held(NamedTuple):
    chain: tuple[CID, ...]
    until: int | None

class Judge:
    """Answers `holds` and `authorized` for one set of effective revocations, memoized."""

    def __init__(self, state: AuthorityState, effective: frozenset[CID]) -> None:
        self.state = state
        self.k = effective
        self._authorized: dict[CID, bool] = {}
        self._held: dict[tuple[bytes, str, CID], tuple[Held | None, set[CID]]] = {}
        # (author, needs) -> until, for records that see every authority record (see `check`)
        self._steady: dict[tuple[bytes, frozenset[str]], int | None] = {}

    # -- records in the state -------------------------------------------------------------

    def authorized(self, cid: CID) -> bool:
        """§5.4 `auth(x)` for a stored record; the owner's records always are."""
        done = self._authorized.get(cid)
        if done is None:
            use = self._stored(cid)
            done = self._authorized[cid] = self._passes(use, self.state.needs.get(cid, WRITE))
        return done

    def blockers_of(self, cid: CID) -> tuple[CID, ...]:
        use = self._stored(cid)
        found: set[CID] = set()
        for cap in self.state.needs.get(cid, WRITE) | {READ}:
            found |= self._direct(use.actor, cap, use)[1]
        return tuple(sorted(found, key=lambda u: order_key(self.state, u)))

    def unauthorized_grants(self, cid: CID) -> tuple[CID, ...]:
        use = self._stored(cid)
        grants = [g for g in self.state.grants_to.get(use.actor, ())
                  if precedes(self.state, g, use) and not self.authorized(g)]
        return tuple(sorted(grants, key=lambda g: order_key(self.state, g)))

    # -- any use --------------------------------------------------------------------------

    def require(self, use: Use, needs: frozenset[str], cid: CID | None) -> int | None:
        """Raise `AuthorityError` unless `use`'s author holds `needs`; the earliest expiry (None: never)."""
        until: int | None = None
        for cap in sorted(needs):
            held, blocked = self.holds(use.actor, cap, use)
            if held is None:
                raise authority_error(self.state, use.actor, cap, blocked, cid)
            until = earlier(until, held.until)
        check_delegation(self, use, cid)
        return until

    def passed(self, actor: bytes, needs: frozenset[str], wall: int) -> bool:
        until = self._steady.get((actor, needs), -1)
        return until is None or wall < until

    def remember(self, actor: bytes, needs: frozenset[str], until: int | None) -> None:
        self._steady[(actor, needs)] = until

    def answer(self, actor: bytes, capability: str, use: Use) -> Answer:
        held, blocked = self.holds(actor, capability, use)
        order = tuple(sorted(blocked, key=lambda u: order_key(self.state, u)))
        if held is not None:
            return Answer(True, actor, capability, held.chain, (), "", held.until)
        reason = "revoked" if order else "expired" if self._expired(actor, capability, use) else "no grant"
        return Answer(False, actor, capability, (), order, reason)

    def _expired(self, actor: bytes, cap: str, use: Use) -> bool:
        """Whether a grant of `cap` (or of `read`) to `actor` is in `use`'s past but expired by it."""
        for g in self.state.grants_to.get(actor, ()):
            p = self.state.records[g].payload
            wanted = cap in p["rights"] or cap == READ or READ in p["rights"]
            expires = p.get("expires_ms")
            if wanted and expires is not None and use.wall >= expires and precedes(self.state, g, use):
                return True
        return False

    def holds(self, actor: bytes, cap: str, use: Use) -> tuple[Held | None, set[CID]]:
        """§5.4: the chain by which `actor` holds `cap` at `use`, or None and the revocations in the way."""
        if actor == self.state.owner and self.state.genesis is not None:
            return Held((root_of(self.state, use),), None), set()
        held, blocked = self._direct(actor, cap, use)
        if held is None or cap == READ:
            return held, blocked
        read, read_blocked = self._direct(actor, READ, use)
        if read is None:
            return None, blocked | read_blocked
        return Held(held.chain, earlier(held.until, read.until)), set()

    def _direct(self, actor: bytes, cap: str, use: Use) -> tuple[Held | None, set[CID]]:
        key = (actor, cap, use.cid) if use.cid is not None else None
        if key is not None and key in self._held:
            return self._held[key]
        best: tuple[int, tuple[int, int, bytes, bytes]] | None = None
        chosen: Held | None = None
        until: int | None = -1  # -1: no grant yet; None: one without expiry
        blocked: set[CID] = set()
        for g in self.state.grants_to.get(actor, ()):
            p = self.state.records[g].payload
            if not precedes(self.state, g, use) or (cap != READ and cap not in p["rights"]):
                continue
            expires = p.get("expires_ms")
            if (expires is not None and use.wall >= expires) or not self.authorized(g):
                continue
            cut = self._cuts(actor, cap, g, use)
            if cut:
                blocked |= cut
                continue
            chain = self._chain(g)
            rank = (len(chain), order_key(self.state, g))
            if best is None or rank < best:
                best, chosen = rank, Held(chain, None)
            until = None if until is None or expires is None else max(until, expires)
        held = None if chosen is None else Held(chosen.chain, until)
        if key is not None:
            self._held[key] = (held, blocked)
        return held, blocked

    def _cuts(self, actor: bytes, cap: str, g: CID, use: Use) -> set[CID]:
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
            if exempt(st, u, use):
                continue
            found.add(u)
        return found

    def _chain(self, g: CID) -> tuple[CID, ...]:
        granter = self.state.actor_of(g)
        held, _ = self.holds(granter, ADMIN, self._stored(g))
        assert held is not None, "an authorized grant's granter holds admin"
        return (*held.chain, g)

    def _passes(self, use: Use, needs: frozenset[str]) -> bool:
        if use.kind == "genesis":
            return True
        for cap in needs:
            held, _ = self.holds(use.actor, cap, use)
            if held is None:
                return False
        try:
            check_delegation(self, use, None)
        except AuthorityError:
            return False
        return True

    def _stored(self, cid: CID) -> Use:
        st = self.state
        node = st.ancestry.nodes[cid]
        record = st.records.get(cid)
        kind = record.kind if record is not None else ""
        payload: Mapping[str, Any] = record.payload if record is not None else {}
        return Use(cid, st.actor_keys[node.actor], node.vv, node.parents, node.hlc.wall_ms, kind, payload)

def check_delegation(judge: Judge, use: Use, cid: CID | None) -> None:
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

def judge_of(state: AuthorityState, within: frozenset[CID] | None = None) -> Judge:
    """A judge over the effective revocations; its memos hold until a grant or revocation is added."""
    judge: Judge | None = state._judges.get(within)
    if judge is None:
        judge = state._judges[within] = Judge(state, effective(state, within))
    return judge


def effective(state: AuthorityState, within: frozenset[CID] | None = None) -> frozenset[CID]:
    """The effective revocations (§6.1) among all records, or among the authority records `within`."""
    cached = state._effective.get(within)
    if cached is None:
        k = frozenset(u for u in state.revocations if within is None or u in within)
        while True:
            judge = Judge(state, k)
            kept = frozenset(u for u in k if judge.authorized(u))
            if kept == k:
                break
            k = kept
        cached = state._effective[within] = k
    return cached


def root_of(state: AuthorityState, use: Use) -> CID:
    """The genesis an owner's answer cites: the earliest in `use`'s past (§2).

    There is one unless the owner equivocated at seq 1; every record has one in its past.
    """
    assert state.genesis is not None
    if len(state.geneses) == 1:
        return state.genesis
    seen = [g for g in state.geneses if precedes(state, g, use)]
    return min(seen, key=lambda g: order_key(state, g)) if seen else state.genesis

def exempt(state: AuthorityState, u: CID, use: Use) -> bool:
    """§6.3: a revocation of `u`'s author's admin, concurrent with `u`, is not cut by `u`."""
    if use.kind != "revocation" or use.payload["grantee"] != state.actor_of(u):
        return False
    if not {ADMIN, READ} & set(use.payload["rights"]):
        return False
    return not precedes(state, u, use)

def precedes(state: AuthorityState, y: CID, use: Use) -> bool:
    """Whether `y` is in the strict causal past of `use`."""
    if use.cid is not None and use.cid in state.ancestry:
        return state.ancestry.precedes(y, use.cid)
    return state.ancestry.precedes_vector(y, use.vv, use.parents)

def incoming(state: AuthorityState, record: Record) -> Use:
    """The use a record about to be placed makes; its parents are placed (ingest waits for them)."""
    try:
        vv, known = state.ancestry.vector_of(record.parents), record.parents
    except KeyError:  # a caller judging ahead of the parents: judge by the part that is known
        known = tuple(p for p in record.parents if p in state.ancestry.nodes)
        vv = state.ancestry.vector_of(known)
    return _new_use(Use, (None, record.actor, vv, known, record.hlc.wall_ms, record.kind, record.payload))

def virtual(state: AuthorityState, actor: bytes, heads: Iterable[CID], at_ms: int) -> Use:
    known = tuple(h for h in heads if h in state.ancestry)
    return Use(None, actor, state.ancestry.vector_of(known), known, at_ms, "", {})

def sees_all_authority(state: AuthorityState, vv: Vector) -> bool:
    if state.ancestry.forked:
        return False
    return all(i < len(vv) and vv[i] >= seq for i, seq in state.authority_tips.items())

def authority_within(state: AuthorityState, use: Use) -> frozenset[CID]:
    everything = [*state.kept.get("grant", ()), *state.revocations]
    return frozenset(a for a in everything if precedes(state, a, use))

def authority_error(state: AuthorityState, actor: bytes, cap: str, blocked: set[CID],
                     cid: CID | None) -> AuthorityError:
    who = actor_text(actor)
    where = "this record's causal past" if cid is not None else "what this replica holds"
    because = (f"revoked by {', '.join(str(u) for u in sorted(blocked, key=lambda u: order_key(state, u)))}"
               if blocked else f"no grant of it is in {where}")
    at = "at this record's causal position" if cid is not None else "to write this here"
    genesis = state.records.get(state.genesis) if state.genesis is not None else None
    why = suggestions.WHY(actor=who, capability=cap, conv=genesis.conv if genesis else "CONVERSATION")
    return AuthorityError(
        f"{who} lacks `{cap}` {at} ({because}); `{why}` shows the chain",
        capability=cap, actor=who, cid=cid,
        blocked_by=tuple(str(u) for u in sorted(blocked, key=lambda u: order_key(state, u))),
    )

def earlier(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def order_key(state: AuthorityState, cid: CID) -> tuple[int, int, bytes, bytes]:
    node = state.ancestry.nodes[cid]
    return (node.hlc.wall_ms, node.hlc.counter, state.actor_keys[node.actor], bytes(cid))
