"""The neutral message: what every provider format is rendered from.

A `Message` is a user message, an assistant message (content blocks plus tool calls) or
one tool result (answering `tool_use_id`). `repair` turns any sequence of them into one
every provider accepts; the modules under `providers/` render a repaired sequence to a
wire format. Invariant: a `Message` never holds a turn's identity, only the `ops` (turn
CIDs) it was made from, so reports can point back at the records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from convgraph.core.cid import CID
from convgraph.projections.turn import Block, Role, ToolCall, Turn

OPAQUE_BLOCKS = {
    "thinking": "anthropic",
    "redacted_thinking": "anthropic",
    "reasoning": "openai-responses",
    "thought": "gemini",
}
"""Block types whose bytes only their own provider can verify (signed or encrypted), and
which provider that is: they are replayed to it unchanged and to no other."""


@dataclass(frozen=True)
class Message:
    """One provider-neutral message."""

    role: Role
    content: tuple[Block, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()  # assistant only
    tool_use_id: str | None = None  # tool only
    is_error: bool = False  # tool only
    provider: str | None = None  # who produced the opaque blocks in `content`
    ops: tuple[CID, ...] = ()


def message_of(turn: Turn) -> Message:
    """The message one turn makes, before any repair."""
    return Message(
        role=turn.role,
        content=turn.content,
        tool_calls=turn.tool_calls if turn.role is Role.ASSISTANT else (),
        tool_use_id=turn.tool_use_id if turn.role is Role.TOOL else None,
        is_error=turn.is_error,
        provider=turn.provider,
        ops=(turn.op,),
    )


def messages_of(turns: Iterable[Turn]) -> list[Message]:
    """One message per turn, in order."""
    return [message_of(t) for t in turns]
