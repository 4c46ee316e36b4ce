"""A LangChain `BaseChatMessageHistory` kept as a convgraph conversation (extra `langchain`).

Each message is one turn record, so the history syncs, verifies and branches like any
conversation, and `resume` renders it, repaired, for any provider:

* `HumanMessage` → `user_message`; `AIMessage` → `agent_message`, its `tool_calls` as the
  turn's tool calls; `ToolMessage` → `tool_result` answering `tool_call_id` (`is_error` when
  its status is "error");
* content: a string is one text block; in a list, text (a string, or a `text` block) and
  images in a shape convgraph renders (`image_url`, `input_image`, an Anthropic `image`) are
  the turn's blocks, and every other block (a provider's `tool_use` copy of a call,
  reasoning, LangChain's own multimodal blocks) rides in payload `meta` only, so resume
  never sends a block a provider would refuse;
* what no turn can carry (a `SystemMessage`, a `ChatMessage` of another role, chunks) → a
  turn with no content and the whole message in payload `meta` (resume leaves it out: pass
  the system prompt to the model yourself).

The rest of the message (`id`, `name`, metadata, a call without an id …) is kept in payload
`meta["langchain"]`, so `messages` gives back messages equal to those added. What DAG-CBOR
cannot hold (NaN, infinities, huge integers) is tagged (`core.tagged`); a message whose turn
would pass 256 KiB is an artifact the turn names (`_large`), its content there a short note. Turns other
writers made are read as plain Human / AI / Tool messages. `clear` writes one retraction per
visible turn: nothing is deleted. Invariant: `messages` after `add_messages(ms)` ends with
`ms`, equal one for one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from convgraph.core.cid import CID
from convgraph.core.tagged import pack
from convgraph.errors import AdapterError
from convgraph.integrations._large import loaded, note, refs_of, slim, stored, too_large
from convgraph.projections.turn import Block, Role, ToolCall, Turn
from convgraph.replica import Draft, Replica

__all__ = ["META_KEY", "ConvgraphChatMessageHistory"]

META_KEY: Final = "langchain"
"""The payload `meta` key holding what a turn does not say of the message it stores."""

_ROLES: Final = {"human": Role.USER, "ai": Role.ASSISTANT, "tool": Role.TOOL}
_KIND: Final = {Role.USER: "user_message", Role.ASSISTANT: "agent_message", Role.TOOL: "tool_result"}
_TYPE_OF: Final = {Role.USER: "human", Role.ASSISTANT: "ai", Role.TOOL: "tool"}
_IMAGES: Final = frozenset({"image_url", "input_image"})
_SLOT: Final = "$block"  # a template entry standing for the turn's block at that index


class ConvgraphChatMessageHistory(BaseChatMessageHistory):
    """The chat history of conversation `conv` on `replica` (of `branch`, if given)."""

    def __init__(self, replica: Replica, conv: str, *, branch: str | None = None) -> None:
        super().__init__()
        self.replica = replica
        self.conv = conv
        self.branch = branch

    @classmethod
    def new(
        cls, replica: Replica, title: str | None = None, *, branch: str | None = None
    ) -> ConvgraphChatMessageHistory:
        """A history on a new conversation rooted by `replica`'s key."""
        return cls(replica, replica.create(title), branch=branch)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # the base declares an attribute
        """Every visible message, oldest first."""
        return self.last(None)

    def last(self, n: int | None) -> list[BaseMessage]:
        """The messages of the final `n` visible turns (all when None), read in O(n) turns."""
        if not self.replica.heads(self.conv):
            return []
        turns = self.replica.transcript(self.conv, branch=self.branch, last=n)
        kept = _residuals(self.replica, self.conv, [t.op for t in turns])
        return messages_from_dict([d for t in turns if (d := self._dict(t, kept.get(t.op))) is not None])

    def _dict(self, turn: Turn, residual: dict[str, Any] | None) -> dict[str, Any] | None:
        found = _dict_of(turn, residual)
        return found if residual is None or found is None else loaded(self.replica, found)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append `messages` as turns, in one transaction (with the artifacts they name)."""
        with self.replica.transaction():
            drafts = [self._draft(m) for m in messages]
            if drafts:
                self.replica.write_many(self.conv, drafts)

    def clear(self) -> None:
        """Retract every visible turn (the records stay, hidden)."""
        if not self.replica.heads(self.conv):
            return
        turns = self.replica.transcript(self.conv, branch=self.branch)
        if turns:
            self.replica.write_many(self.conv, [Draft("retraction", {"target": t.op}) for t in turns])

    def resume(self, provider: str = "anthropic", *, last: int | None = None) -> list[dict[str, Any]]:
        """The history as `provider`'s repaired, valid message list (`Replica.resume`)."""
        return self.replica.resume(self.conv, provider, last=last, branch=self.branch)

    def _draft(self, message: BaseMessage) -> Draft:
        if not isinstance(message, BaseMessage):
            raise AdapterError(f"a chat history holds messages, not {type(message).__name__}", what=message)
        whole = pack(message_to_dict(message))
        role, payload = _turn_payload(whole)
        payload = {"conversation_id": self.conv, "role": role.value, **payload}
        if too_large(payload):
            tag = stored(self.replica, whole)
            payload = slim(payload, note(tag), {META_KEY: {"whole": tag}})
        return Draft(_KIND[role], payload, refs_of(payload), branch=self.branch)


def _residuals(replica: Replica, conv: str, ops: Sequence[CID]) -> dict[CID, dict[str, Any]]:
    """Per turn this adapter wrote: its `meta[META_KEY]` (one batch read; compacted: from the snapshot)."""
    out: dict[CID, dict[str, Any]] = {}
    for cid, entry in replica.entries(conv, ops).items():
        meta = entry.payload.get("meta")
        if isinstance(meta, dict) and isinstance(meta.get(META_KEY), dict):
            out[cid] = meta[META_KEY]
    return out


def _turn_payload(d: dict[str, Any]) -> tuple[Role, dict[str, Any]]:
    """The role and payload fields (less conversation and role) of the turn storing message dict `d`."""
    role = _ROLES.get(d["type"])
    data: dict[str, Any] = dict(d["data"])
    if role is None:
        return Role.USER, {"content": [], "meta": {META_KEY: {"whole": d}}}
    blocks, template = _blocks(data.pop("content"))
    payload: dict[str, Any] = {"content": blocks}
    if role is Role.ASSISTANT:
        calls = data.get("tool_calls") or []
        if all(isinstance(c.get("id"), str) and c["id"] and isinstance(c.get("args"), dict) for c in calls):
            del data["tool_calls"]
            if calls:
                payload["tool_calls"] = [{"id": c["id"], "name": str(c.get("name", "")), "input": c["args"]}
                                         for c in calls]
    if role is Role.TOOL:
        payload["tool_use_id"] = str(data.pop("tool_call_id"))
        if data.get("status") == "error":
            payload["is_error"] = True
    payload["meta"] = {META_KEY: {"data": data, "content": template}}
    return role, payload


def _blocks(content: Any) -> tuple[list[Block], Any]:
    """Content as the turn's blocks, and the template that gives the content back from them."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}], {_SLOT: 0, "str": True}
    if not isinstance(content, list):
        raise AdapterError("message content is a string or a list", what=content)
    blocks: list[Block] = []
    template: list[Any] = []
    for part in content:
        if isinstance(part, str):
            template.append({_SLOT: len(blocks), "str": True})
            blocks.append({"type": "text", "text": part})
        elif _renderable(part):
            template.append({_SLOT: len(blocks)})
            blocks.append(part)
        else:
            template.append(part)
    return blocks, template


def _renderable(part: Any) -> bool:
    if not isinstance(part, dict):
        return False
    kind = part.get("type")
    if kind == "text":
        return isinstance(part.get("text"), str)
    return kind in _IMAGES or (kind == "image" and isinstance(part.get("source"), dict))


def _dict_of(turn: Turn, residual: dict[str, Any] | None) -> dict[str, Any] | None:
    """The message dict one turn gives back: exactly the one stored, for a turn written here."""
    whole = residual.get("whole") if residual is not None else None
    if isinstance(whole, dict):
        return whole
    if residual is None or not isinstance(residual.get("data"), dict):
        return _plain(turn)
    data = dict(residual["data"])
    data["content"] = _content(turn.content, residual.get("content"))
    if turn.role is Role.ASSISTANT and "tool_calls" not in data:
        data["tool_calls"] = [_lc_call(c) for c in turn.tool_calls]
    if turn.role is Role.TOOL:
        data["tool_call_id"] = turn.tool_use_id
    return {"type": _TYPE_OF[turn.role], "data": data}


def _content(blocks: Sequence[Block], template: Any) -> Any:
    def slot(entry: Any) -> Any:
        if not (isinstance(entry, dict) and isinstance(entry.get(_SLOT), int)):
            return entry
        block = blocks[entry[_SLOT]] if entry[_SLOT] < len(blocks) else {"type": "text", "text": ""}
        return str(block.get("text", "")) if entry.get("str") and block.get("type") == "text" else dict(block)

    if isinstance(template, list):
        return [slot(e) for e in template]
    if isinstance(template, dict) and len(blocks) == 1:
        return slot(template)
    return [dict(b) for b in blocks]  # content superseded since: the blocks as they are now


def _lc_call(call: ToolCall) -> dict[str, Any]:
    return {"name": call.name, "args": call.input, "id": call.id, "type": "tool_call"}


def _plain(turn: Turn) -> dict[str, Any] | None:
    """A turn another writer made, as a plain message dict (None: it says nothing)."""
    blocks = [dict(b) for b in turn.content]
    content: Any = turn.text if all(b.get("type") == "text" for b in blocks) else blocks
    data: dict[str, Any] = {"content": content}
    if turn.role is Role.ASSISTANT:
        data["tool_calls"] = [_lc_call(c) for c in turn.tool_calls]
    elif turn.role is Role.TOOL:
        data.update(tool_call_id=turn.tool_use_id, status="error" if turn.is_error else "success")
    if not blocks and not turn.tool_calls:
        return None
    return {"type": _TYPE_OF[turn.role], "data": data}
