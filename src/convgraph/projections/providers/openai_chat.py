"""The OpenAI Chat Completions format: `messages=` from neutral messages, drafts from a completion.

Content is a string when it is exactly one text part, else a list of parts. A user
message carries text, Anthropic and Responses images as `image_url` parts and Chat's own parts;
an assistant message carries text, its refusals as `refusal` and its calls as
`tool_calls`; a tool message carries text only. Every other block is dropped: Chat has no
place for thinking, reasoning or another format's parts. Invariant: for a completion `r`,
the assistant entry of `to_wire` of the message recorded from `r` is `r.choices[0].message`
as a request param (content, refusal when set, tool_calls with the raw arguments string).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from convgraph.projections.message import Message
from convgraph.projections.providers._common import (
    IMAGE_PARTS,
    OMITTED,
    agent_draft,
    append_merged,
    dump,
    image_detail,
    image_url,
    parse_arguments,
    texts,
)
from convgraph.projections.turn import Block, Role, ToolCall

PROVIDER: Final = "openai"

_USER_PARTS: Final = frozenset({"image_url", "input_audio", "file"})
_DETAILS: Final = frozenset({"auto", "low", "high"})


def renders(block: Block, role: Role, owner: str | None) -> bool:  # noqa: ARG001 (one signature for all)
    """Whether `to_wire` carries `block` of a user or assistant message (repair drops the rest)."""
    kind = block.get("type")
    if kind == "text":
        return isinstance(block.get("text"), str)
    if role is Role.ASSISTANT:
        return kind == "refusal" and "refusal" in block
    if kind in IMAGE_PARTS - _USER_PARTS:
        return image_url(block) is not None
    return kind in _USER_PARTS


def to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The `messages=` list for a repaired neutral sequence."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role is Role.TOOL:
            parts = [_text_part(t) for t in texts(m.content)] or [_text_part(OMITTED)]
            out.append({"role": "tool", "tool_call_id": m.tool_use_id, "content": parts})
        elif m.role is Role.USER:
            _add(out, {"role": "user", "content": _user_parts(m.content)})
        else:
            refusals = [b["refusal"] for b in m.content if b.get("type") == "refusal" and "refusal" in b]
            entry = {"role": "assistant", "content": [_text_part(t) for t in texts(m.content)],
                     "refusal": ["".join(refusals)] if refusals else [],
                     "tool_calls": [_tool_call(c) for c in m.tool_calls]}
            _add(out, entry)
    return [_finish(e) for e in out]


def _add(out: list[dict[str, Any]], entry: dict[str, Any]) -> None:
    # a message left with nothing is omitted; same-role neighbours then merge
    if any(entry.get(k) for k in ("content", "refusal", "tool_calls")):
        append_merged(out, entry, ("content", "refusal", "tool_calls"))


def _finish(entry: dict[str, Any]) -> dict[str, Any]:
    """Collapse a single text part to a string; shape the assistant's optional fields."""
    parts = entry["content"]
    text_only = len(parts) == 1 and parts[0]["type"] == "text"
    content = parts[0]["text"] if text_only else parts
    if entry["role"] != "assistant":
        return {**entry, "content": content}
    out: dict[str, Any] = {"role": "assistant", "content": content if parts else None}
    if entry["refusal"]:
        out["refusal"] = "".join(entry["refusal"])
    if entry["tool_calls"]:
        out["tool_calls"] = entry["tool_calls"]
    return out


def _text_part(text: str) -> Block:
    return {"type": "text", "text": text}


def _user_parts(blocks: Sequence[Block]) -> list[Block]:
    parts: list[Block] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "text" and isinstance(b.get("text"), str):
            parts.append(_text_part(b["text"]))
        elif kind in IMAGE_PARTS - _USER_PARTS and (url := image_url(b)) is not None:
            detail = image_detail(b)
            image = {"url": url, **({"detail": detail} if detail in _DETAILS else {})}
            parts.append({"type": "image_url", "image_url": image})
        elif kind in _USER_PARTS:
            parts.append(dict(b))
    return parts


def _tool_call(call: ToolCall) -> dict[str, Any]:
    if call.meta.get("custom") is True:  # a custom tool's input is free text, not JSON
        return {"id": call.id, "type": "custom", "custom": {"name": call.name, "input": call.arguments()}}
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments()}}


def record(response: Any) -> list[tuple[str, dict[str, Any]]]:
    """The turn drafts one `ChatCompletion` (or its dict form) makes: its first choice only."""
    r = dump(response)
    choices = r.get("choices") or []
    if not choices:
        return []
    choice = choices[0]  # other choices are alternatives, not a continuation
    msg = choice.get("message", {})
    blocks: list[Block] = []
    if isinstance(msg.get("content"), str):
        blocks.append(_text_part(msg["content"]))
    if isinstance(msg.get("refusal"), str):
        blocks.append({"type": "refusal", "refusal": msg["refusal"]})
    calls = [_call(tc) for tc in msg.get("tool_calls") or []]
    return agent_draft(PROVIDER, blocks, calls, model=r.get("model"), stop=choice.get("finish_reason"),
                       response_id=r.get("id"))


def _call(tc: dict[str, Any]) -> dict[str, Any]:
    if tc.get("type") == "custom":
        custom = tc.get("custom", {})
        return {"id": tc["id"], "name": custom.get("name", ""), "input": {},
                "meta": {"arguments": custom.get("input", ""), "custom": True}}
    fn = tc.get("function", {})
    raw = fn.get("arguments", "")
    # the raw string is kept: it is what the model wrote, even when it is not valid JSON
    return {"id": tc["id"], "name": fn.get("name", ""), "input": parse_arguments(raw),
            "meta": {"arguments": raw}}
