"""The transcript: a conversation's turns in canonical order, as one branch sees them.

Main is every turn off any branch, with each `merge` shown as what it accepted: its own
`content` (or `summary`) as an assistant turn, else the accepted branch turns, at the
merge's place. A branch sees main up to its fork point (the record its `branch` record
names; the last `branch` record of a name wins) and then its own turns. A `retraction`
hides its target and a `supersession` replaces the target's content in place (the latest
wins); both count only when signed by the target's author. Nothing is lost: hidden turns
stay in the state, addressable by op id. Invariant: the transcript is a pure function of
the state, hence of the set of records folded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.errors import NoUserTurnError, ProjectionError
from convgraph.projections.state import ConvState, Entry, OrderKey
from convgraph.projections.turn import DEFAULT_CONVERSATION, TURN_KINDS, Role, Turn, blocks_of, turn_from


def transcript(
    state: ConvState, *, branch: str | None = None, last: int | None = None, conversation: str | None = None
) -> list[Turn]:
    """The visible turns of `branch` (main when None), in canonical order; `last` keeps the final n.

    `conversation`, when given, keeps only turns whose payload names that conversation
    (`DEFAULT_CONVERSATION` when it names none).
    """
    if last is not None and last <= 0:
        return []
    out: list[Turn] = []
    for turn in _visible_backwards(state, branch):
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
    try:
        return window_of(_visible_backwards(state, branch), last)
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


def _visible_backwards(state: ConvState, branch: str | None) -> Iterator[Turn]:
    if branch is not None:
        for _, cid in reversed(state.lines.get(branch, [])):
            yield from _turns(state, state.entries[cid], main=False)
        cut = fork_point(state, branch)
        if cut is None:
            return
    else:
        cut = None
    for key, cid in reversed(state.lines.get(None, [])):
        if cut is not None and key > cut:
            continue
        yield from _turns(state, state.entries[cid], main=True)


def _turns(state: ConvState, entry: Entry, *, main: bool) -> Iterator[Turn]:
    """The visible turns one line entry shows, last first."""
    if entry.kind == "merge":
        if main:
            yield from reversed(_merge_turns(state, entry))
        return
    turn = _shown(state, entry)
    if turn is not None:
        yield turn


def _shown(state: ConvState, entry: Entry) -> Turn | None:
    retractions = state.retractions.get(entry.cid, ())
    if any(state.any_retractor or state.entries[c].actor == entry.actor for _, c in retractions):
        return None
    turn = state.turns.get(entry.cid)
    if turn is None:
        turn = state.turns[entry.cid] = turn_from(entry)
    for _, cid in reversed(state.supersessions.get(entry.cid, ())):
        newer = state.entries[cid]
        if newer.actor == entry.actor:
            return replace(turn, content=blocks_of(newer.payload["content"]))
    return turn


def _merge_turns(state: ConvState, merge: Entry) -> list[Turn]:
    p = merge.payload
    synthesis = p.get("content") or p.get("summary")
    if synthesis:
        return [Turn(op=merge.cid, role=Role.ASSISTANT, content=blocks_of(synthesis), author=merge.actor,
                     hlc=merge.hlc, conversation=_conversation(state, merge))]
    accepted = [state.entries[c] for c in p["accepted"] if c in state.entries]
    accepted = sorted((e for e in accepted if e.kind in TURN_KINDS), key=lambda e: e.order_key)
    return [t for t in (_shown(state, e) for e in accepted) if t is not None]


def _conversation(state: ConvState, merge: Entry) -> str:
    """A merge speaks in the conversation of the turns it joins."""
    for head in merge.payload["heads"]:
        entry = state.entries.get(head)
        if entry is not None and entry.kind in TURN_KINDS:
            return turn_from(entry).conversation
    return DEFAULT_CONVERSATION
