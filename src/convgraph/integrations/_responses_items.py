"""Responses API input items (the OpenAI Agents SDK's session items) as turn payloads, and the
items a turn gives back. Pure.

The mapping `ConvgraphSession` stores and `convgraph import-from` reads (see
integrations/openai_agents.py for the whole of it). Invariant: what a turn does not say of an
item is kept in the payload's `meta[META_KEY]`, so `items_of(turn, residual)` gives the item
back exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from convgraph.core.tagged import Fetch, unpack
from convgraph.errors import AdapterError
from convgraph.projections.message import message_of
from convgraph.projections.providers import openai_responses
from convgraph.projections.providers._common import RESPONSES_ITEMS, parse_arguments
from convgraph.projections.turn import Block, Role, ToolCall, Turn

META_KEY: Final = "openai_agents"
"""The payload `meta` key holding what a turn does not say of the item it stores."""

TEXT_PARTS: Final = frozenset({"input_text", "output_text"})
KIND: Final = {Role.USER: "user_message", Role.ASSISTANT: "agent_message", Role.TOOL: "tool_result"}
_PROVIDER: Final = "openai-responses"
_CALL_KEYS: Final = frozenset({"type", "call_id", "name", "arguments", "id"})
_MESSAGE_ROLES: Final = {"user": Role.USER, "assistant": Role.ASSISTANT}

Item = dict[str, Any]


def turn_payload(item: Item) -> tuple[Role, dict[str, Any]]:
    """The role and payload fields (less conversation and role) of the turn storing `item`."""
    if not isinstance(item, dict):
        raise AdapterError(f"a session item is a map, not {type(item).__name__}", what=item)
    kind = item.get("type")
    if kind == "function_call":
        return Role.ASSISTANT, {"content": [], "tool_calls": [_call(item)], "provider": _PROVIDER,
                                "meta": {META_KEY: {"shape": "call"}}}
    if kind == "function_call_output":
        return Role.TOOL, _output(item)
    if kind == "reasoning" or kind in RESPONSES_ITEMS:
        block = {"content": [item], "provider": _PROVIDER, "meta": {META_KEY: {"shape": "block"}}}
        return Role.ASSISTANT, block
    role = _MESSAGE_ROLES.get(item.get("role", "")) if kind in (None, "message") else None
    if role is None or not isinstance(item.get("content"), str | list):
        return Role.USER, {"content": [], "meta": {META_KEY: {"shape": "whole", "item": item}}}
    blocks, residual = _blocks(item["content"])
    residual["item"] = {k: v for k, v in item.items() if k != "content"}
    payload = {"content": blocks, "meta": {META_KEY: {"shape": "message", **residual}}}
    return role, ({**payload, "provider": _PROVIDER} if role is Role.ASSISTANT else payload)


def _call(item: Item) -> dict[str, Any]:
    """A `function_call` item as a tool call, kept as `openai_responses.record` keeps one."""
    call_id, raw = item.get("call_id"), item.get("arguments")
    if not isinstance(call_id, str) or not call_id or not isinstance(raw, str):
        raise AdapterError("a function_call item needs a call_id and an arguments string", what=item)
    meta: dict[str, Any] = {"arguments": raw}
    if isinstance(item.get("id"), str):
        meta["item_id"] = item["id"]
    extra = {k: v for k, v in item.items() if k not in _CALL_KEYS}
    if extra:
        meta["item"] = extra
    return {"id": call_id, "name": str(item.get("name", "")), "input": parse_arguments(raw), "meta": meta}


def _output(item: Item) -> dict[str, Any]:
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str) or not call_id or not isinstance(output, str | list):
        raise AdapterError("a function_call_output item needs a call_id and an output", what=item)
    blocks, residual = _blocks(output)
    residual["item"] = {k: v for k, v in item.items() if k not in ("call_id", "output")}
    return {"content": blocks, "tool_use_id": call_id, "meta": {META_KEY: {"shape": "output", **residual}}}


def _blocks(content: str | list[Any]) -> tuple[list[Block], dict[str, Any]]:
    """Content (text, or parts) as blocks, and what it takes to give it back exactly."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}], {"text": True}
    if not all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in content):
        raise AdapterError("content parts are maps with a type", what=content)
    blocks = [{**p, "type": "text"} if p["type"] in TEXT_PARTS else dict(p) for p in content]
    return blocks, {"types": [p["type"] for p in content]}


def residual_of(payload: dict[str, Any]) -> dict[str, Any] | None:
    """What a turn's payload keeps of the item it stores (None: a turn others wrote)."""
    meta = payload.get("meta")
    found = meta.get(META_KEY) if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else None


def items_of(turn: Turn, residual: dict[str, Any] | None, fetch: Fetch | None = None) -> list[Item]:
    """The session items one turn gives back: exactly those stored, for a turn written here
    (its tags undone, `core.tagged`, artifacts read through `fetch`)."""
    if residual is None:
        return _items_of(turn, None)
    return [unpack(item, fetch) for item in _items_of(turn, residual)]


def _items_of(turn: Turn, residual: dict[str, Any] | None) -> list[Item]:
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
    return [{**b, "type": t if t in TEXT_PARTS else default} if b.get("type") == "text" else dict(b)
            for b, t in zip(blocks, types, strict=True)]
