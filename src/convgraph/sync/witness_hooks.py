"""What sync asks of a replica's witnessed-history memory (docs/integrity.md §4, §5).

The state machines only carry statements; judging them (remembered heads, receipts,
gossip, findings) is the replica's (`witnessing.py`), behind the `Witness` protocol below,
which `Replica` implements. Without a witness, statements are still signed, sent and
checked for authenticity, but nothing is remembered or gossiped. Invariant: every call
from sync into the replica's memory goes through this protocol.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from convgraph.integrity.findings import Finding
from convgraph.integrity.statement import Statement
from convgraph.replica import Replica


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
