"""Random multi-writer histories for the turn index tests, and an in-memory `Reads` over any
set of records (the index as a pure function of them, no store).

A script drives two or three writers with their own clocks: turns (text, whitespace, tool
calls and results), retractions and supersessions of any earlier turn they hold (their own
or another's: only the author's count in a legacy conversation), branches forking at any
record they hold, turns on those branches, merges with content, with a summary or with
neither (then showing the accepted turns), clock ticks and syncs between writers.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from convgraph import ManualClock, Record, Replica, SigningKey
from convgraph.core.cid import CID
from convgraph.core.rooted import conv_id
from convgraph.errors import AuthorityError, ForgedMergeError
from convgraph.projections.index_rows import BranchRow, LineRow, OrderKey, TargetRow, row_of
from convgraph.projections.turn import TURN_KINDS, ToolCall
from convgraph.projections.window import Reads

CONV = "c"
T0 = 1_700_000_000_000
KEYS = [SigningKey(bytes([i + 41]) * 32) for i in range(3)]
BRANCHES = ("b1", "b2")
NONCE = bytes(range(16))


@dataclass
class World:
    """Writers, their clocks, and every record any of them made, in creation order."""

    writers: list[Replica]
    clocks: list[ManualClock]
    made: list[Record]
    conv: str = CONV

    @classmethod
    def new(cls, n: int) -> World:
        clocks = [ManualClock(T0) for _ in range(n)]
        return cls([Replica.in_memory(KEYS[i], clock=clocks[i]) for i in range(n)], clocks, [])

    @classmethod
    def rooted(cls) -> World:
        """Three writers of a rooted conversation: 0 owns it, 1 holds admin, 2 read and write
        (which op `revoke` takes back: what 2 wrote concurrently is then hidden)."""
        world = cls.new(3)
        owner, admin, member = world.writers
        world.conv = conv_id(owner.actor, NONCE)
        world.made.append(owner.write(world.conv, "genesis", {"nonce": NONCE}))
        for who, rights in ((admin, ["admin", "read", "write"]), (member, ["read", "write"])):
            world.made.append(owner.write(world.conv, "grant", {"grantee": who.actor, "rights": rights}))
        for w in (admin, member):
            w.ingest([r.data for r in world.made])
        return world

    def run(self, op: tuple[Any, ...]) -> None:
        what, i, pick = op[0], op[1], op[2]
        w = self.writers[i]
        if what == "tick":
            self.clocks[i].advance(pick % 4)
        elif what == "sync":  # the records w lacks, as the sync protocol moves them
            w.ingest([r.data for r in self.writers[pick % len(self.writers)].iter_records() if not w.store.has(r.cid)])
        elif what == "revoke":  # by the owner, of the member's write
            if self.conv != CONV:
                payload = {"grantee": self.writers[2].actor, "rights": ["write"]}
                self.made.append(self.writers[0].write(self.conv, "revocation", payload))
        else:
            try:
                made = _act(w, self.conv, what, random.Random(pick), op[3])
            except (AuthorityError, ForgedMergeError):
                return  # a member may not retract another's turn, nor merge a branch it lacks
            if made is not None:
                self.made.append(made)


def _held(w: Replica, conv: str, kinds: Iterable[str] = TURN_KINDS) -> list[Record]:
    wanted = set(kinds)
    return [r for r in w.records(conv) if r.kind in wanted]


def _act(w: Replica, conv: str, what: str, rng: random.Random, branch: str | None) -> Record | None:
    text = rng.choice(["hi", "go on", "  ", "", "ok then"])
    if what == "user":
        return w.say(conv, "user", text or "q", branch=branch)
    if what == "assistant":
        call = rng.random() < 0.4
        calls = [ToolCall(f"call_{rng.randrange(3)}", "lookup", {"q": text})] if call else []
        return w.say(conv, "assistant", text, tool_calls=calls, branch=branch)
    if what == "tool":
        return w.say(conv, "tool", f"result {text}", tool_use_id=f"call_{rng.randrange(3)}", branch=branch)
    held = _held(w, conv)
    if what in ("retract", "supersede"):
        if not held:
            return None
        target = rng.choice(held)
        if what == "retract":
            return w.write(conv, "retraction", {"target": target.cid})
        return w.write(conv, "supersession", {"target": target.cid, "content": f"{text} (edited)"})
    if what == "branch":
        anything = w.records(conv)
        if not anything:
            return None
        return w.branch(conv, rng.choice(BRANCHES), rng.choice(anything).cid)
    if what == "merge":
        if not w.heads(conv):
            return None
        accepted = [r.cid for r in rng.sample(held, min(len(held), rng.randrange(4)))]
        style = rng.randrange(3)
        return w.merge(conv, rng.choice(BRANCHES), accepted=accepted,
                       content="merged" if style == 0 else None, summary="summary" if style == 1 else None)
    raise AssertionError(what)


ACTIONS = ("user", "user", "assistant", "assistant", "tool", "retract", "retract", "supersede", "supersede",
           "branch", "branch", "merge", "merge")


def ops(writers: int, max_size: int = 30, *, revoke: bool = False) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    who = st.integers(0, writers - 1)
    pick = st.integers(0, 2**16)
    act = st.tuples(st.sampled_from(ACTIONS), who, pick, st.sampled_from([None, None, None, *BRANCHES]))
    other = st.tuples(st.sampled_from(["tick", "sync", *(["revoke"] if revoke else [])]), who, pick, st.none())
    return st.lists(st.one_of(act, act, act, other), min_size=4, max_size=max_size)


def memory_reads(
    records: Sequence[Record], *, compacted: Iterable[CID] = (), hidden: Iterable[CID] = (),
    any_retractor: bool = False,
) -> Reads:
    """The index of `records` as plain lists: the rows `row_of` makes, the bytes of those not `compacted`."""
    gone = set(compacted)
    data = {r.cid: (b"" if r.cid in gone else r.data) for r in records}
    keys: Mapping[CID, OrderKey] = {r.cid: r.order_key for r in records}
    rows = [row for r in records if (row := row_of(r)) is not None]

    def line(name: str, below: OrderKey | None, limit: int) -> list[LineRow]:
        on = sorted((r for r in rows if isinstance(r, LineRow) and r.line == name
                     and (below is None or r.key < below)), key=lambda r: r.key, reverse=True)
        return on[:limit]

    def stored(cids: Sequence[CID]) -> dict[CID, bytes]:
        return {c: data[c] for c in cids if data.get(c)}

    def targets(cids: Sequence[CID]) -> list[tuple[TargetRow, bytes]]:
        wanted = set(cids)
        return [(r, data[r.cid]) for r in rows if isinstance(r, TargetRow) and r.target in wanted]

    def branches(name: str) -> list[BranchRow]:
        return [r for r in rows if isinstance(r, BranchRow) and r.name == name]

    def held(cids: Sequence[CID]) -> dict[CID, tuple[OrderKey, bytes]]:
        return {c: (keys[c], data[c]) for c in cids if c in keys}

    return Reads(line, stored, targets, branches, held, frozenset(hidden), any_retractor)


def upgrade_history() -> list[Record]:
    """A fixed history with every indexed kind, in canonical (topological) order."""
    world = World.new(2)
    for op in [("user", 0, 1, None), ("assistant", 0, 2, None), ("branch", 0, 3, None), ("user", 0, 4, "b1"),
               ("retract", 0, 5, None), ("supersede", 0, 6, None), ("merge", 0, 7, None), ("tick", 1, 1, None),
               ("user", 1, 8, None), ("sync", 0, 1, None), ("merge", 0, 9, None)]:
        world.run(op)
    return sorted(world.made, key=lambda r: r.order_key)
