"""The artifact part of a sync session (docs/sync.md, *Artifacts*): who asks, who pushes.

Per conversation the initiator keeps a `Track`: the blocks the peer said it lacks (its
`needs`, in every reply to a section that moved something), those queued to push, and
whether its own last ask was answered. It asks for what it lacks once a conversation's
records are reconciled, and again only while each answer brings a new block, so a peer
that lacks them too ends the exchange in one round trip. Invariant: the initiator pushes a
block at most once per session, and no block ever makes a conversation's records wait.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, cast, runtime_checkable

from convgraph.core.cid import CID, DAG_CBOR

BLOCK_OVERHEAD: Final = 37  # a block's codec byte, digest and length, counted against the budget
_FETCH: Final = 256  # blocks read per store look-up


@dataclass
class BlockOutcome:
    """What a replica did with blocks a peer sent for one conversation."""

    stored: list[CID] = field(default_factory=list)  # new here
    accepted: list[CID] = field(default_factory=list)  # passed every check: stored or held already
    duplicate: int = 0  # held already
    refused: list[tuple[CID, str, str]] = field(default_factory=list)  # cid, rule, why

    def merge(self, other: BlockOutcome) -> None:
        self.stored += other.stored
        self.accepted += other.accepted
        self.duplicate += other.duplicate
        self.refused += other.refused


@runtime_checkable
class ArtifactPeer(Protocol):
    """A `SyncPeer` that also holds artifacts; a peer without them syncs records only."""

    def missing_artifacts(self, conv: str) -> list[CID]:
        """The artifact blocks `conv`'s records name that are not held whole, in CID order."""
        ...

    def artifact_blocks(self, conv: str, cids: Sequence[CID]) -> Iterator[tuple[CID, bytes]]:
        """The blocks among `cids` held here and in `conv`'s scope, manifests first, read one
        at a time as the caller takes them (it stops at its budget: memory stays bounded)."""
        ...

    def take_blocks(self, conv: str, blocks: Sequence[tuple[CID, bytes]]) -> BlockOutcome:
        """Check (hash, scope, manifest form) and store blocks a peer sent for `conv`."""
        ...


_METHODS: Final = ("missing_artifacts", "artifact_blocks", "take_blocks")
_CLASSES: set[type] = set()  # classes that define all three: a runtime protocol check is slow


def artifacts_of(peer: object) -> ArtifactPeer | None:
    """`peer` as an `ArtifactPeer`, or None when it holds no artifacts."""
    kind = type(peer)
    if kind in _CLASSES:
        return cast("ArtifactPeer", peer)
    if all(callable(getattr(kind, m, None)) for m in _METHODS):
        _CLASSES.add(kind)
        return cast("ArtifactPeer", peer)
    return peer if isinstance(peer, ArtifactPeer) else None


def fill(blocks: Iterable[tuple[CID, bytes]], left: list[int], budget: int) -> list[tuple[CID, bytes]]:
    """The leading `blocks` that fit in what is `left` of the budget (an empty message always
    takes one); `left` is reduced by what they cost."""
    out: list[tuple[CID, bytes]] = []
    for cid, data in blocks:
        cost = len(data) + BLOCK_OVERHEAD
        if cost > left[0] and left[0] < budget:
            break
        out.append((cid, data))
        left[0] -= cost
    return out


@dataclass
class Track:
    """One conversation's artifact exchange in one session, on the initiator's side."""

    theirs: tuple[CID, ...] = ()  # the peer's needs, as its last reply that computed them said
    queue: dict[CID, None] = field(default_factory=dict)  # to push, in the order the peer named them
    pushed: set[CID] = field(default_factory=set)
    asked: bool = False  # our last message asked for blocks
    stalled: bool = False  # an ask brought no new block: do not ask again this session
    expect_needs: bool = True  # the reply to our last message states the peer's needs

    def absorb(self, peer: ArtifactPeer, conv: str, blocks: Sequence[tuple[CID, bytes]],
               needs: Sequence[CID]) -> BlockOutcome:
        """Take in a reply's blocks and, when it states them, the peer's needs."""
        outcome = peer.take_blocks(conv, blocks) if blocks else BlockOutcome()
        if self.asked and not outcome.stored:
            self.stalled = True
        self.asked = False
        if self.expect_needs:
            self.theirs = tuple(needs)
            self.queue.update((c, None) for c in needs if c not in self.pushed)
        return outcome

    def ask(self, peer: ArtifactPeer, conv: str, limit: int) -> tuple[CID, ...]:
        """What to ask for now: what we lack, unless the last ask brought nothing."""
        if self.stalled:
            return ()
        wanted = tuple(peer.missing_artifacts(conv)[:limit])
        self.asked = bool(wanted)
        return wanted

    def push(self, peer: ArtifactPeer, conv: str, left: list[int], budget: int) -> list[tuple[CID, bytes]]:
        """The queued blocks we hold that fit, manifests first; each leaves the queue once."""
        out: list[tuple[CID, bytes]] = []
        while self.queue and left[0] > 0:
            chunk = list(itertools.islice(self.queue, _FETCH))
            got = dict(peer.artifact_blocks(conv, chunk))
            for cid in sorted(chunk, key=lambda c: c.codec != DAG_CBOR):
                data = got.get(cid)
                if data is not None and len(data) + BLOCK_OVERHEAD > left[0] and left[0] < budget:
                    return out
                del self.queue[cid]
                if data is None:
                    continue  # not held here (or not in scope): the report lists it as missing there
                self.pushed.add(cid)
                out.append((cid, data))
                left[0] -= len(data) + BLOCK_OVERHEAD
        return out

    def refused_there(self) -> list[CID]:
        """Blocks we pushed that the peer still says it lacks: it refused them."""
        return [c for c in self.theirs if c in self.pushed]


__all__ = ["BLOCK_OVERHEAD", "ArtifactPeer", "Track", "artifacts_of", "fill"]
