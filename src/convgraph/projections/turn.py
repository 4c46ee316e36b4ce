"""The typed projection of one turn record: who said what, with which tool calls.

`turn_of(record)` reads the four turn kinds (`user_message` → user, `agent_message` and
`tool_invocation` → assistant, `tool_result` → tool) and the legacy payload shape
`{speaker, text, timestamp}`. Content is always a tuple of content blocks (a text
payload becomes one text block); tool calls are kept apart from the blocks. A turn's
identity is its record's CID (the op id), never its content. Invariant: `turn_of` is a
pure function of the record's bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Protocol

from convgraph.core.cid import CID
from convgraph.core.hlc import ZERO, Hlc

DEFAULT_CONVERSATION: Final = "default"
TURN_KINDS: Final = frozenset({"user_message", "agent_message", "tool_invocation", "tool_result"})

Block = dict[str, Any]
"""A content block, shaped as the providers shape them: `{"type": "text", "text": …}`,
`thinking` (with `signature`), `redacted_thinking`, `reasoning` (an OpenAI Responses
reasoning item, kept whole), `image`, `document`, … Unknown types pass through."""


class Role(StrEnum):
    """Who a turn speaks as; serialized snake_case."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


_ROLE_OF_KIND: Final = {
    "user_message": Role.USER,
    "agent_message": Role.ASSISTANT,
    "tool_invocation": Role.ASSISTANT,
    "tool_result": Role.TOOL,
}


@dataclass(frozen=True)
class ToolCall:
    """One call the assistant asked for; `meta` keeps provider details (raw arguments …)."""

    id: str
    name: str
    input: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def arguments(self) -> str:
        """The call's arguments as a JSON text: the provider's own bytes when recorded."""
        raw = self.meta.get("arguments")
        return raw if isinstance(raw, str) else json.dumps(self.input, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class Turn:
    """One turn of a transcript, keyed by `op` (the CID of the record that made it)."""

    op: CID
    role: Role
    content: tuple[Block, ...]
    tool_calls: tuple[ToolCall, ...] = ()
    tool_use_id: str | None = None
    is_error: bool = False
    author: bytes = b""
    hlc: Hlc = ZERO
    conversation: str = DEFAULT_CONVERSATION
    branch: str | None = None
    provider: str | None = None  # who produced the opaque blocks (thinking signatures …)
    timestamp: Any = None  # the payload's own claim; ordering never uses it

    def to_map(self) -> dict[str, Any]:
        """The turn as a DAG-CBOR data-model map (optional fields only when set)."""
        m: dict[str, Any] = {
            "op": self.op, "role": self.role.value, "content": list(self.content), "author": self.author,
            "hlc": [self.hlc.wall_ms, self.hlc.counter], "conversation": self.conversation,
        }
        if self.tool_calls:
            m["tool_calls"] = [{"id": c.id, "name": c.name, "input": c.input, "meta": c.meta}
                               for c in self.tool_calls]
        optional = {"tool_use_id": self.tool_use_id, "branch": self.branch, "provider": self.provider}
        m.update((k, v) for k, v in optional.items() if v is not None)
        if self.is_error:
            m["is_error"] = True
        return m

    @property
    def text(self) -> str:
        """The concatenated text blocks (for display)."""
        texts = (b.get("text") for b in self.content if b.get("type") == "text")
        return "".join(t for t in texts if type(t) is str)


def blocks_of(content: Any) -> tuple[Block, ...]:
    """Content as stored (text or a block list) as a tuple of blocks."""
    if isinstance(content, str):
        return ({"type": "text", "text": content},) if content else ()
    return tuple(content) if isinstance(content, list) else ()


class Folded(Protocol):
    """What a turn is read from: a `Record`, or a folded entry of one."""

    @property
    def cid(self) -> CID: ...
    @property
    def kind(self) -> str: ...
    @property
    def actor(self) -> bytes: ...
    @property
    def hlc(self) -> Hlc: ...
    @property
    def branch(self) -> str | None: ...
    @property
    def payload(self) -> dict[str, Any]: ...


def is_turn(record: Folded) -> bool:
    """Whether `record` is one of the four turn kinds."""
    return record.kind in _ROLE_OF_KIND


def turn_of(record: Folded) -> Turn | None:
    """The turn a record makes, or None when its kind is not a turn kind."""
    return turn_from(record) if record.kind in _ROLE_OF_KIND else None


def turn_from(record: Folded) -> Turn:
    """The turn a turn-kind record makes."""
    role = _ROLE_OF_KIND[record.kind]
    p = record.payload
    content = p["content"] if "content" in p else p.get("text", "")
    calls = tuple(
        ToolCall(c["id"], c["name"], c["input"], c.get("meta", {})) for c in p.get("tool_calls", ())
    )
    return Turn(
        op=record.cid,
        role=role,
        content=blocks_of(content),
        tool_calls=calls,
        tool_use_id=p.get("tool_use_id"),
        is_error=bool(p.get("is_error", False)),
        author=record.actor,
        hlc=record.hlc,
        conversation=p.get("conversation_id") or DEFAULT_CONVERSATION,
        branch=record.branch,
        provider=p.get("provider"),
        timestamp=p.get("timestamp"),
    )
