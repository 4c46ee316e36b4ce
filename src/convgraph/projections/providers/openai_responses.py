"""The OpenAI Responses format: `input=` items from neutral messages, drafts from a `Response`.

Recording keeps every output item in order: a message item becomes one block per content
part (`output_text` as a `text` block keeping annotations and logprobs, the item's id and
status in the block's `meta`), a function call a tool call, and reasoning and server-side
items stay whole as blocks. Rendering is the inverse: reasoning items (only to the
provider that made them), message items (with their recorded id, else the short form
with string content), server-side items, then one `function_call` per call; each tool
message is a `function_call_output`. A reasoning item not followed at once by a message
or a `*_call` item is dropped: the API refuses reasoning without the output it produced.
Invariant: for a response `r`, `to_wire` of the message recorded from `r` is `r.output`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from convgraph.projections.message import Message
from convgraph.projections.providers._common import (
    OMITTED,
    RESPONSES_ITEMS,
    agent_draft,
    append_merged,
    dump,
    image_detail,
    image_url,
    keeps_opaque,
    parse_arguments,
    texts,
)
from convgraph.projections.turn import Block, Role, ToolCall

PROVIDER: Final = "openai-responses"

_INPUT_PARTS: Final = frozenset({"input_text", "input_image", "input_file"})
_CALL_KEYS: Final = frozenset({"type", "call_id", "name", "arguments", "id"})
_MESSAGE_KEYS: Final = frozenset({"type", "role", "content", "id"})
_OTHER_IMAGES: Final = frozenset({"image", "image_url"})
_DETAILS: Final = frozenset({"auto", "low", "high"})


def renders(block: Block, role: Role, owner: str | None) -> bool:
    """Whether `to_wire` carries `block` of a user or assistant message (repair drops the rest)."""
    kind = block.get("type", "")
    if kind == "text":
        return isinstance(block.get("text"), str) or role is Role.ASSISTANT
    if role is Role.USER:
        return kind in _INPUT_PARTS or (kind in _OTHER_IMAGES and image_url(block) is not None)
    if kind == "reasoning":
        return keeps_opaque(block, owner, PROVIDER)
    return kind == "refusal" or kind in RESPONSES_ITEMS


def to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The `input=` item list for a repaired neutral sequence."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role is Role.USER:
            parts = _user_parts(m.content)
            if parts:  # a user message left empty is omitted; user neighbours then merge
                append_merged(out, {"role": "user", "content": parts}, ("content",))
        elif m.role is Role.TOOL:
            out.append({"type": "function_call_output", "call_id": m.tool_use_id, "output": _output(m)})
        else:
            out.extend(_assistant_items(m))
    return out


def _user_parts(blocks: Sequence[Block]) -> list[Block]:
    parts: list[Block] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "text" and isinstance(b.get("text"), str):
            parts.append({"type": "input_text", "text": b["text"]})
        elif kind in _OTHER_IMAGES and (url := image_url(b)) is not None:
            detail = image_detail(b)
            detail = detail if detail in _DETAILS else "auto"
            parts.append({"type": "input_image", "image_url": url, "detail": detail})
        elif kind in _INPUT_PARTS:
            parts.append(dict(b))
    return parts


def _output(m: Message) -> str | list[Block]:
    found = texts(m.content)
    if len(found) > 1:
        return [{"type": "input_text", "text": t} for t in found]
    return found[0] if found else OMITTED


def _assistant_items(m: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for b in m.content:
        kind = b.get("type", "")
        if kind == "reasoning":
            if keeps_opaque(b, m.provider, PROVIDER):
                items.append(dict(b))  # encrypted: replayed whole or not at all
        elif kind in ("text", "refusal"):
            _add_part(items, b)
        elif kind in RESPONSES_ITEMS:
            items.append(dict(b))
    items += [_function_call(c) for c in m.tool_calls]
    return [_short_form(i) for i in _followed_reasoning(items)]


def _add_part(items: list[dict[str, Any]], b: Block) -> None:
    """Add a text or refusal block to the message item it came from (a new one if need be)."""
    meta: dict[str, Any] = b["meta"] if isinstance(b.get("meta"), dict) else {}
    item_id = meta.get("item_id")
    if b.get("type") == "refusal":
        part: Block = {"type": "refusal", "refusal": b.get("refusal", "")}
    else:
        part = {"type": "output_text", "text": b.get("text", ""), "annotations": b.get("annotations", [])}
        if "logprobs" in b:
            part["logprobs"] = b["logprobs"]
    last = items[-1] if items else None
    if last is not None and last.get("type") == "message" and last.get("id") == item_id:
        last["content"].append(part)
        return
    item: dict[str, Any] = {"type": "message", "role": "assistant", "content": [part]}
    if isinstance(item_id, str):
        envelope: dict[str, Any] = meta["item"] if isinstance(meta.get("item"), dict) else {}
        item = {"id": item_id, "status": "completed", **envelope, **item}
    items.append(item)


def _short_form(item: dict[str, Any]) -> dict[str, Any]:
    """A message item with no recorded id, in the short form: its text as one string.

    Why: an output message param needs the id the API gave it, and the short form's
    content list cannot hold `output_text` parts."""
    if item.get("type") != "message" or "id" in item:
        return item
    text = "".join(p.get("text", p.get("refusal", "")) for p in item["content"])
    return {"type": "message", "role": "assistant", "content": text}


def _followed_reasoning(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep a reasoning item only when the item right after it is a message or a `*_call` item."""
    kept: list[dict[str, Any]] = []
    for item in reversed(items):  # backwards, so each item's kept successor is known
        kind = item.get("type", "")
        if kind == "reasoning" and not (kept and _produced(kept[-1])):
            continue
        kept.append(item)
    return kept[::-1]


def _produced(item: dict[str, Any]) -> bool:
    """Whether `item` can be the output a reasoning item produced: a message or any call."""
    kind = str(item.get("type", ""))
    return kind == "message" or kind.endswith("_call")


def _function_call(call: ToolCall) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call", "call_id": call.id, "name": call.name,
                            "arguments": call.arguments()}
    extra = call.meta.get("item")  # status, caller … as the API sent them
    if isinstance(extra, dict):
        item = {**extra, **item}
    if isinstance(call.meta.get("item_id"), str):
        item["id"] = call.meta["item_id"]
    return item


def record(response: Any) -> list[tuple[str, dict[str, Any]]]:
    """The turn drafts one `openai.types.responses.Response` (or its dict form) makes."""
    r = dump(response)
    blocks: list[Block] = []
    calls: list[dict[str, Any]] = []
    for item in r.get("output", []):
        kind = item.get("type")
        if kind == "message":
            blocks += _message_blocks(item)
        elif kind == "function_call":
            calls.append(_call(item))
        else:
            blocks.append(item)  # reasoning and server-side items, whole and in order
    stop = (r.get("incomplete_details") or {}).get("reason") or r.get("status")
    return agent_draft(PROVIDER, blocks, calls, model=r.get("model"), stop=stop, response_id=r.get("id"))


def _message_blocks(item: dict[str, Any]) -> list[Block]:
    meta: dict[str, Any] = {}
    if isinstance(item.get("id"), str):
        meta["item_id"] = item["id"]
    envelope = {k: v for k, v in item.items() if k not in _MESSAGE_KEYS}
    if envelope:
        meta["item"] = envelope
    blocks: list[Block] = []
    for part in item.get("content", []):
        block = dict(part)
        if part.get("type") == "output_text":
            block["type"] = "text"
        if meta:
            block["meta"] = meta
        blocks.append(block)
    return blocks


def _call(item: dict[str, Any]) -> dict[str, Any]:
    raw = item.get("arguments", "")
    meta: dict[str, Any] = {"arguments": raw}  # the model's own bytes, valid JSON or not
    if isinstance(item.get("id"), str):
        meta["item_id"] = item["id"]
    extra = {k: v for k, v in item.items() if k not in _CALL_KEYS}
    if extra:
        meta["item"] = extra
    return {"id": item["call_id"], "name": item.get("name", ""), "input": parse_arguments(raw), "meta": meta}
