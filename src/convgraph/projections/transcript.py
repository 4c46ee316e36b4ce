"""The transcript: a conversation's turns in canonical order, as one branch sees them.

Main is every turn off any branch, with each `merge` shown as what it accepted: its own
`content` (or `summary`) as an assistant turn, else the accepted branch turns, at the
merge's place. A branch sees main up to its fork point (the record its `branch` record
names; the last `branch` record of a name wins) and then its own turns. A `retraction`
hides its target and a `supersession` replaces the target's content in place (the latest
wins); both count only when signed by the target's author. Nothing is lost: hidden turns
stay in the state, addressable by op id. Invariant: the transcript is a pure function of
the state, hence of the set of records folded.

Two sources feed the one reading below (`Lines`): the folded state (`FoldLines`) and the
persisted turn index (`projections/window.py`, docs/conversation.md §8), so the views they
give cannot drift apart.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.errors import NoUserTurnError, ProjectionError
from convgraph.projections.state import ConvState, Entry, OrderKey
from convgraph.projections.turn import DEFAULT_CONVERSATION, TURN_KINDS, Role, Turn, blocks_of, turn_from


class Lines(Protocol):
    """What the transcript reads of one conversation: its lines, and the records that shape
    them. Every answer leaves out the records the view hides (a rooted conversation's)."""

    @property
    def any_retractor(self) -> bool:
        """Whether a retraction by anyone counts (rooted: authorized on ingest), not only the author's."""
        ...

    def line(self, branch: str | None, upto: OrderKey | None, *, merges: bool) -> Iterator[Entry]:
        """The turns (and merges, if asked) of `branch`'s line (main: None) up to `upto`, last first."""
        ...

    def retractors(self, target: CID) -> Iterable[bytes]:
        """The authors of the retractions of `target`."""
        ...

    def supersessions(self, target: CID) -> Sequence[tuple[bytes, CID]]:
        """The (author, CID) of each supersession of `target`, in canonical order."""
        ...

    def payload(self, cid: CID) -> dict[str, Any]:
        """The payload of a supersession `supersessions` named."""
        ...

    def fork_point(self, branch: str) -> OrderKey | None:
        """The canonical position main is cut at for `branch` (None: no such branch)."""
        ...

    def entries(self, cids: Sequence[CID]) -> Mapping[CID, Entry]:
        """Those of `cids` that are entries of this conversation."""
        ...

    def turn(self, entry: Entry) -> Turn:
        """The turn a turn-kind entry makes (`turn_from`), cached as the source likes."""
        ...


class FoldLines:
    """`Lines` read from a folded state (less what it hides, already left out of it)."""

    def __init__(self, state: ConvState) -> None:
        self.state = state

    @property
    def any_retractor(self) -> bool:
        return self.state.any_retractor

    def line(self, branch: str | None, upto: OrderKey | None, *, merges: bool) -> Iterator[Entry]:
        slots, entries = self.state.lines.get(branch, []), self.state.entries
        end = len(slots) if upto is None else bisect.bisect_right(slots, upto, key=lambda s: s[0])
        for i in range(end - 1, -1, -1):
            entry = entries[slots[i][1]]
            if merges or entry.kind != "merge":
                yield entry

    def retractors(self, target: CID) -> Iterable[bytes]:
        return [self.state.entries[c].actor for _, c in self.state.retractions.get(target, ())]

    def supersessions(self, target: CID) -> Sequence[tuple[bytes, CID]]:
        return [(self.state.entries[c].actor, c) for _, c in self.state.supersessions.get(target, ())]

    def payload(self, cid: CID) -> dict[str, Any]:
        return self.state.entries[cid].payload

    def fork_point(self, branch: str) -> OrderKey | None:
        return fork_point(self.state, branch)

    def entries(self, cids: Sequence[CID]) -> Mapping[CID, Entry]:
        entries = self.state.entries
        return {c: entries[c] for c in cids if c in entries}

    def turn(self, entry: Entry) -> Turn:
        turn = self.state.turns.get(entry.cid)
        if turn is None:
            turn = self.state.turns[entry.cid] = turn_from(entry)
        return turn


def transcript(
    state: ConvState, *, branch: str | None = None, last: int | None = None, conversation: str | None = None
) -> list[Turn]:
    """The visible turns of `branch` (main when None), in canonical order; `last` keeps the final n.

    `conversation`, when given, keeps only turns whose payload names that conversation
    (`DEFAULT_CONVERSATION` when it names none).
    """
    return transcript_of(FoldLines(state), branch=branch, last=last, conversation=conversation)


def transcript_of(
    lines: Lines, *, branch: str | None = None, last: int | None = None, conversation: str | None = None
) -> list[Turn]:
    """`transcript` read from any `Lines`."""
    if last is not None and last <= 0:
        return []
    out: list[Turn] = []
    for turn in _visible_backwards(lines, branch):
        if conversation is not None and turn.conversation != conversation:
            continue
        out.append(turn)
        if last is not None and len(out) == last:
            break
    out.reverse()
    return out


@dataclass(frozen=True)
class Window:
    """The turns a resume starts from. `widened` counts the turns added before the `last`
    asked for, so that the window opens with a user turn that carries text."""

    turns: list[Turn]
    widened: int


def resume_window(state: ConvState, *, branch: str | None = None, last: int | None = None) -> Window:
    """At least the final `last` turns (all when None), moved back to the nearest user turn
    with text, so the first message is one every provider accepts; never empty.

    Raises `NoUserTurnError` when no visible turn is a user turn with text: there is then
    nothing a provider would accept, and `[]` would be a 400 at the caller's next request."""
    return resume_window_of(FoldLines(state), branch=branch, last=last)


def resume_window_of(lines: Lines, *, branch: str | None = None, last: int | None = None) -> Window:
    """`resume_window` read from any `Lines`."""
    try:
        return window_of(_visible_backwards(lines, branch), last)
    except NoUserTurnError as exc:
        where = f" of branch {branch!r}" if branch else ""
        raise NoUserTurnError(f"nothing to resume{where}: {exc}") from None


def window_of(backwards: Iterable[Turn], last: int | None) -> Window:
    """`resume_window` over turns given last first: reads no further back than it must."""
    if last is not None and last < 1:
        raise ProjectionError(f"a resume window holds at least one turn, not {last}")
    out: list[Turn] = []
    for turn in backwards:
        out.append(turn)
        if last is not None and len(out) >= last and _opens(turn):
            break
    if not any(_opens(t) for t in out):
        raise NoUserTurnError(
            "no visible turn is a user turn with text, and every provider refuses a request "
            "that does not start with one"
        )
    out.reverse()
    return Window(out, 0 if last is None else max(0, len(out) - last))


def _opens(turn: Turn) -> bool:
    return turn.role is Role.USER and turn.text.strip() != ""


def transcript_bytes(turns: Iterable[Turn]) -> bytes:
    """The canonical DAG-CBOR encoding of a transcript: equal transcripts, equal bytes."""
    return codec.encode([t.to_map() for t in turns])


def transcript_cid(turns: Iterable[Turn]) -> CID:
    """The hash of a transcript, as a CID of its canonical bytes."""
    return CID.of_record(transcript_bytes(turns))


def fork_point(state: ConvState, branch: str) -> OrderKey | None:
    """The canonical position main is cut at for `branch` (None: no such branch)."""
    slots = state.branches.get(branch)
    if not slots:
        return None
    record = state.entries[slots[-1][1]]
    origin = state.entries.get(record.payload["from"])
    return (origin or record).order_key


def _visible_backwards(lines: Lines, branch: str | None) -> Iterator[Turn]:
    cut: OrderKey | None = None
    if branch is not None:
        for entry in lines.line(branch, None, merges=False):  # a merge shows only on main
            turn = _shown(lines, entry)
            if turn is not None:
                yield turn
        cut = lines.fork_point(branch)
        if cut is None:
            return
    for entry in lines.line(None, cut, merges=True):
        if entry.kind == "merge":
            yield from reversed(_merge_turns(lines, entry))
        else:
            turn = _shown(lines, entry)
            if turn is not None:
                yield turn


def _shown(lines: Lines, entry: Entry) -> Turn | None:
    """The turn `entry` shows: none when retracted, its latest own supersession's content if any."""
    if any(lines.any_retractor or actor == entry.actor for actor in lines.retractors(entry.cid)):
        return None
    turn = lines.turn(entry)
    for actor, cid in reversed(lines.supersessions(entry.cid)):
        if actor == entry.actor:
            return replace(turn, content=blocks_of(lines.payload(cid)["content"]))
    return turn


def _merge_turns(lines: Lines, merge: Entry) -> list[Turn]:
    p = merge.payload
    synthesis = p.get("content") or p.get("summary")
    if synthesis:
        return [Turn(op=merge.cid, role=Role.ASSISTANT, content=blocks_of(synthesis), author=merge.actor,
                     hlc=merge.hlc, conversation=_conversation(lines, merge))]
    found = lines.entries(p["accepted"])
    accepted = sorted((e for e in found.values() if e.kind in TURN_KINDS), key=lambda e: e.order_key)
    return [t for t in (_shown(lines, e) for e in accepted) if t is not None]


def _conversation(lines: Lines, merge: Entry) -> str:
    """A merge speaks in the conversation of the turns it joins."""
    for head in merge.payload["heads"]:
        entry = lines.entries([head]).get(head)
        if entry is not None and entry.kind in TURN_KINDS:
            return lines.turn(entry).conversation
    return DEFAULT_CONVERSATION
