"""An OpenAI Agents SDK `Session` kept as a convgraph conversation (extra `openai-agents`).

Each session item is one turn record, so the history syncs, verifies and branches like any
conversation, and `resume` renders it, repaired, for any provider:

* a user message → `user_message`; an assistant message → `agent_message`; its text parts
  become `text` blocks, every other part stays a block as it was;
* a `function_call` → an `agent_message` with one tool call (the raw `arguments`, the item
  id and other fields in the call's `meta`, as `record_response` keeps them);
* a `function_call_output` → a `tool_result` answering that call id;
* a `reasoning` item, and the other Responses items (web search, computer and MCP calls …)
  → an `agent_message` holding the item whole as one block (provider `openai-responses`);
* what no turn can carry (a system or developer message, an `item_reference`, an item type
  convgraph does not know) → a turn with no content, the item whole in payload `meta`
  (resume leaves it out: it is not conversation).

What the turn does not say of an item (its `type`, `id`, `status`, string content) is kept in
the payload's `meta["openai_agents"]`, so `get_items` gives back items equal to those added.
Turns other writers made (`say`, `record_response`, another device) are read as the
Responses renderer shows them. `pop_item` writes a retraction and `clear_session` one per
visible turn: nothing is deleted. Invariant: `get_items(limit=n)` reads O(n) turns, not the
history, through the turn index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from convgraph.core.cid import CID
from convgraph.core.record import load_trusted
from convgraph.integrations._responses_items import KIND as _KIND
from convgraph.integrations._responses_items import META_KEY, Item
from convgraph.integrations._responses_items import TEXT_PARTS as _TEXT_PARTS
from convgraph.integrations._responses_items import turn_payload as _turn_payload
from convgraph.projections.message import message_of
from convgraph.projections.providers import openai_responses
from convgraph.projections.turn import Block, Role, ToolCall, Turn
from convgraph.replica import Draft, Replica

__all__ = ["META_KEY", "ConvgraphSession"]



class ConvgraphSession:
    """A `Session` for `agents.Runner` whose items are the turns of conversation `conv` on
    `replica` (of `branch`, if given). Calls run on the caller's thread: the store is local."""

    def __init__(
        self, replica: Replica, conv: str, *, branch: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.replica = replica
        self.session_id = conv
        self.branch = branch
        self.session_settings = session_settings

    @classmethod
    def new(cls, replica: Replica, title: str | None = None, **kwargs: Any) -> ConvgraphSession:
        """A session on a new conversation rooted by `replica`'s key."""
        return cls(replica, replica.create(title), **kwargs)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest `limit` items (all when None or negative), oldest first."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit == 0:
            return []
        if limit is None or limit < 0:
            return cast(list[TResponseInputItem], self._items(self._turns(None)))
        n = limit
        while True:  # a turn others wrote may make no item, or several: widen until enough
            turns = self._turns(n)
            items = self._items(turns)
            if len(items) >= limit or len(turns) < n:
                return cast(list[TResponseInputItem], items[-limit:])
            n *= 2

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append `items` as turns, in one transaction."""
        drafts = [self._draft(cast(Item, item)) for item in items]
        if drafts:
            self.replica.write_many(self.session_id, drafts)

    async def pop_item(self) -> TResponseInputItem | None:
        """Retract the turn holding the latest item and return that item (None: no items).

        A turn others wrote that makes several items is retracted whole and the items
        before the popped one are written again after the retraction, in the same place."""
        n = 1
        while True:
            turns = self._turns(n)
            for turn in reversed(turns):
                items = self._items([turn])
                if items:
                    retraction = Draft("retraction", {"target": turn.op})
                    self.replica.write_many(self.session_id, [retraction, *map(self._draft, items[:-1])])
                    return cast(TResponseInputItem, items[-1])
            if len(turns) < n:
                return None
            n *= 4

    async def clear_session(self) -> None:
        """Retract every visible turn of the session (the records stay, hidden)."""
        turns = self._turns(None)
        if turns:
            self.replica.write_many(self.session_id, [Draft("retraction", {"target": t.op}) for t in turns])

    def resume(self, provider: str = "openai-responses", *, last: int | None = None) -> list[dict[str, Any]]:
        """The session as `provider`'s repaired, valid message list (`Replica.resume`)."""
        return self.replica.resume(self.session_id, provider, last=last, branch=self.branch)

    # ------------------------------------------------------------------ reading

    def _turns(self, last: int | None) -> list[Turn]:
        if not self.replica.heads(self.session_id):
            return []
        return self.replica.transcript(self.session_id, branch=self.branch, last=last)

    def _items(self, turns: Sequence[Turn]) -> list[Item]:
        kept = _residuals(self.replica, [t.op for t in turns])
        return [item for t in turns for item in _items_of(t, kept.get(t.op))]

    # ------------------------------------------------------------------ writing

    def _draft(self, item: Item) -> Draft:
        role, payload = _turn_payload(item)
        payload = {"conversation_id": self.session_id, "role": role.value, **payload}
        return Draft(_KIND[role], payload, branch=self.branch)


def _residuals(replica: Replica, ops: Sequence[CID]) -> dict[CID, dict[str, Any]]:
    """Per turn this adapter wrote: its `meta[META_KEY]` (one batch read; compacted: absent)."""
    found = replica.store.get_many(ops)
    out: dict[CID, dict[str, Any]] = {}
    for cid, data in found.items():
        meta = load_trusted(data, cid).payload.get("meta")
        if isinstance(meta, dict) and isinstance(meta.get(META_KEY), dict):
            out[cid] = meta[META_KEY]
    return out


def _items_of(turn: Turn, residual: dict[str, Any] | None) -> list[Item]:
    """The session items one turn gives back: exactly those stored, for a turn written here."""
    shape = residual.get("shape") if residual is not None else None
    if residual is None or shape is None:
        return openai_responses.to_wire([message_of(turn)])
    if shape == "whole":
        return [residual["item"]] if isinstance(residual.get("item"), dict) else []
    if shape == "block":
        return [dict(b) for b in turn.content]
    if shape == "call":
        return [_call_item(c) for c in turn.tool_calls]
    default = "output_text" if turn.role is Role.ASSISTANT else "input_text"
    content = _content(turn.content, residual, default)
    envelope: Item = residual.get("item") or {}
    if shape == "output":
        return [{**envelope, "call_id": turn.tool_use_id, "output": content}]
    return [{**envelope, "content": content}]


def _call_item(call: ToolCall) -> Item:
    item: Item = {"type": "function_call", "call_id": call.id, "name": call.name,
                  "arguments": call.arguments()}
    extra = call.meta.get("item")
    if isinstance(extra, dict):
        item.update(extra)
    if isinstance(call.meta.get("item_id"), str):
        item["id"] = call.meta["item_id"]
    return item


def _content(blocks: Sequence[Block], residual: dict[str, Any], default: str) -> str | list[Block]:
    if residual.get("text") and len(blocks) == 1 and blocks[0].get("type") == "text":
        return str(blocks[0].get("text", ""))
    if residual.get("text") and not blocks:
        return ""
    types = residual.get("types")
    if not isinstance(types, list) or len(types) != len(blocks):  # content superseded since
        types = [default] * len(blocks)
    return [{**b, "type": t if t in _TEXT_PARTS else default} if b.get("type") == "text" else dict(b)
            for b, t in zip(blocks, types, strict=True)]
