"""What sync asks of a replica's witnessed-history memory (docs/integrity.md §4, §5).

The state machines only carry statements; judging them (remembered heads, receipts,
gossip, findings) is the replica's (`replica/witnessing.py`), behind the `Witness` protocol below,
which `Replica` implements. Without a witness, statements are still signed, sent and
checked for authenticity, but nothing is remembered or gossiped. The calls a run of
sessions (`synchronize`) makes are here too: gossip out before each session, its
statements, gossip and ingest findings after it. Invariant: every call from sync into the
replica's memory goes through this protocol.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Protocol

from convgraph.core.cid import CID
from convgraph.errors import SyncError
from convgraph.integrity.findings import Finding
from convgraph.integrity.statement import Statement
from convgraph.replica import Replica
from convgraph.sync.messages import MAX_GOSSIP

if TYPE_CHECKING:
    from convgraph.sync.initiator_session import Initiator


class VerdictLike(Protocol):
    """What a replica concluded from one session's statements of one conversation (§4)."""

    @property
    def findings(self) -> Sequence[Finding]: ...

    @property
    def pending(self) -> Sequence[str]: ...

    @property
    def converged(self) -> bool: ...

    @property
    def reasons(self) -> Sequence[str]: ...


class Witness(Protocol):
    """A replica's memory of statements: it checks, remembers and gossips them."""

    def observe_session(
        self, peer: bytes, conv: str, statements: Sequence[Statement], *, started_ms: int,
        received_ms: int, fingerprints_matched: bool,
    ) -> VerdictLike:
        """§4 checks 1-5 on every statement `peer` sent about `conv` in one session."""
        ...

    def observe_gossip(self, conv: str, statements: Sequence[Statement]) -> Sequence[Finding]:
        """§5: keep gossiped statements and check each pair; the new findings."""
        ...

    def gossip_for(self, conv: str, exclude: Collection[bytes]) -> Sequence[Statement]:
        """The statements to gossip about `conv`: latest per key not in `exclude`, newest first."""
        ...

    def findings(self, conv: str | None = None) -> Sequence[Finding]:
        """Every finding held (of `conv`), however raised: sync reports those its ingest raised
        (a record equivocation, a false checkpoint, a fork) with the ones its statements did."""
        ...


def findings_of(replica: Replica, conv: str | None = None) -> list[Finding]:
    """The findings the replica holds (docs/integrity.md §6), of `conv` or of all."""
    return replica.findings(conv)


def witness_of(replica: Replica) -> Witness:
    """The replica's memory of statements, as sync asks it."""
    return replica


def gossip_out(witness: Witness | None, names: list[str], peer_key: bytes | None) -> dict[str, list[bytes]]:
    """Per conversation, the statements of other keys we hold, for the peer (docs/integrity.md §5)."""
    if witness is None:
        return {}
    exclude = {peer_key} if peer_key is not None else set()
    out = {name: [g.data for g in witness.gossip_for(name, exclude) if g.key not in exclude][:MAX_GOSSIP]
           for name in names}
    return {name: found for name, found in out.items() if found}


def observe(witness: Witness, session: Initiator, *, started_ms: int, received_ms: int) -> None:
    """Hand a completed session's statements and gossip to the replica's memory (§4, §5)."""
    gossiped = session.gossiped
    for name, statements in session.statements.items():
        r = session.reports[name]
        if gossiped[name]:
            r.findings += witness.observe_gossip(name, gossiped[name])
        if not statements or session.peer_key is None:
            continue
        matched = session.matched[name]
        try:
            verdict = witness.observe_session(session.peer_key, name, statements, started_ms=started_ms,
                                              received_ms=received_ms, fingerprints_matched=matched)
        except SyncError as exc:  # a stale statement (§4 step 1): nothing is remembered
            r.signed.append(str(exc))
            r.converged = False
            continue
        r.findings += verdict.findings
        r.pending = list(verdict.pending)
        r.signed += verdict.reasons
        r.converged = r.converged and verdict.converged


def held_findings(witness: Witness | None, names: list[str]) -> set[CID]:
    """The ids of the findings held before the run: only later ones are this run's."""
    return set() if witness is None else {f.id for name in names for f in witness.findings(name)}


def landed(witness: Witness, session: Initiator, seen: set[CID]) -> None:
    """Add to each conversation's report the findings the session's ingest raised (a record
    equivocation, a false checkpoint, a divergent fork: docs/integrity.md §6.1), which no
    statement check returns; `seen` grows by every finding reported."""
    for name, r in session.reports.items():
        seen |= {f.id for f in r.findings}
        for f in witness.findings(name):
            if f.id not in seen:
                seen.add(f.id)
                r.findings.append(f)
