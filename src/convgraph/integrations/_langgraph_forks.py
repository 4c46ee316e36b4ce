"""Where a LangGraph thread forks: a checkpoint with more than one live child in a namespace.

A fork comes from time travel (`update_state` or `invoke` on an older checkpoint's config),
from two writers on one replica (the second `put` on a parent that has a child), or from two
replicas that each continued the thread before they synced. The first two put the new child on
a convgraph branch when it is written; the third cannot, since neither writer saw the other:
both children sit on the parent's branch, and the fold names that fork `concurrent`. Either way
the thread's head is its newest checkpoint (greatest id, as LangGraph ids sort by time), the
same on every replica that holds the same records, and every other line stays in the history,
continued by passing its tip's config.
Invariant: a pure function of the live checkpoints; it names every parent with two or more
live children, each child exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from convgraph.integrations._langgraph_thread import Checkpoint


@dataclass(frozen=True)
class ForkLine:
    """One child of a fork and the line it starts: the child's checkpoint id, the newest
    checkpoint descending from it (itself included), the convgraph branch the child is on
    (None: main), and whether the thread's head is on this line."""

    checkpoint_id: str
    tip: str
    branch: str | None
    head: bool


@dataclass(frozen=True)
class Fork:
    """A checkpoint of namespace `ns` with more than one live child, oldest child first.
    `concurrent`: two of its children are on one convgraph branch, so they were written
    without either writer seeing the other (two replicas, synced afterwards)."""

    ns: str
    checkpoint_id: str
    lines: tuple[ForkLine, ...]

    @property
    def concurrent(self) -> bool:
        return len({line.branch for line in self.lines}) < len(self.lines)


def forks(checkpoints: Sequence[Checkpoint], head: Checkpoint | None) -> list[Fork]:
    """The forks among `checkpoints` (the live ones of one namespace), oldest parent first;
    `head` is the namespace's latest checkpoint. A child whose parent was deleted starts no fork."""
    by_id = {ck.id: ck for ck in checkpoints}
    children: dict[str, list[str]] = {}
    for ck in checkpoints:
        if ck.parent is not None and ck.parent in by_id:
            children.setdefault(ck.parent, []).append(ck.id)
    tips: dict[str, str] = {}

    def tip(start: str) -> str:
        # iterative, so a long line never meets the recursion limit; ids are unique, so no cycle
        order, stack = [], [start]
        while stack:
            at = stack.pop()
            order.append(at)
            stack.extend(c for c in children.get(at, ()) if c not in tips)
        for at in reversed(order):
            tips[at] = max([at, *(tips[c] for c in children.get(at, ()))])
        return tips[start]

    on_head: set[str] = set()
    at = head
    while at is not None and at.id not in on_head:
        on_head.add(at.id)
        at = by_id.get(at.parent) if at.parent is not None else None
    found = []
    for parent in sorted(p for p, kids in children.items() if len(kids) > 1):
        lines = tuple(ForkLine(c, tip(c), by_id[c].branch, c in on_head) for c in sorted(children[parent]))
        found.append(Fork(by_id[parent].ns, parent, lines))
    return found
