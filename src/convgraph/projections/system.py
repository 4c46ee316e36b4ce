"""A conversation's system prompt: the latest `system_prompt` record that still counts.

The rule (docs/conversation.md §9): of the conversation's `system_prompt` records, on any
branch, the one latest in canonical order `(wall_ms, counter, actor, cid)` applies, less
those the view hides and those retracted (by their author, or in a rooted conversation by
anyone whose retraction was authorized). Concurrent prompts are thus settled by their HLC
and then their author's key, the same way on every replica. Empty or blank content means
"no system prompt". A supersession does not apply to a prompt: a newer prompt replaces it.
Invariant: `system_of(FoldLines(s), fold_prompts(s))` equals `window.system(reads)` for the
state and the turn index of one set of records.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from convgraph.projections.index_rows import SYSTEM_KIND as KIND
from convgraph.projections.index_rows import SYSTEM_LINE
from convgraph.projections.state import ConvState, Entry
from convgraph.projections.transcript import Lines

__all__ = ["KIND", "SYSTEM_LINE", "fold_prompts", "system_of"]

def fold_prompts(state: ConvState) -> Iterator[Entry]:
    """The prompts of a folded state, latest first (an entity with one key: all of them)."""
    for _, cid in reversed(state.entities.get((KIND, ""), ())):
        yield state.entries[cid]


def system_of(lines: Lines, prompts: Iterable[Entry]) -> str | None:
    """The text of the first of `prompts` (latest first) not retracted; None: no prompt."""
    for entry in prompts:
        if any(lines.any_retractor or actor == entry.actor for actor in lines.retractors(entry.cid)):
            continue
        content = entry.payload["content"]
        return content if content.strip() else None  # providers refuse a blank system prompt
    return None
