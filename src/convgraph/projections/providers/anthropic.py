"""The Anthropic Messages format: `messages=` from neutral messages, turn drafts from a `Message`.

Rendering: a user message is its blocks; an assistant message is its blocks then one
`tool_use` per call; the tool messages after it become one user message of `tool_result`
blocks, which the next user message's blocks join after. Text blocks keep only
Anthropic's keys, refusals become text, OpenAI-shaped images become image blocks, thinking
and redacted thinking are replayed byte for byte only to the provider that made them, other
formats' block types are dropped and everything else passes through. Invariant: for a
response `r`, the assistant entry of `to_wire` of the message recorded from `r` is
`{"role": "assistant", "content": r.content}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from convgraph.projections.message import OPAQUE_BLOCKS, Message
from convgraph.projections.providers._common import (
    FOREIGN,
    OMITTED,
    agent_draft,
    append_merged,
    dump,
    image_source,
    keeps_opaque,
)
from convgraph.projections.turn import Block, Role, ToolCall

PROVIDER: Final = "anthropic"

_TEXT_KEYS: Final = ("type", "text", "citations", "cache_control")
# the block types a tool_result's content may hold (ToolResultBlockParam.content)
_RESULT_TYPES: Final = frozenset({"text", "image", "document", "search_result", "tool_reference"})
_CALL_KEYS: Final = frozenset({"type", "id", "name", "input"})
_MEDIA: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_OPENAI_IMAGES: Final = frozenset({"input_image", "image_url"})


def renders(block: Block, role: Role, owner: str | None) -> bool:  # noqa: ARG001 (one signature for all)
    """Whether `to_wire` carries `block` of a user or assistant message (repair drops the rest,
    so a message left empty vanishes before neighbours coalesce and the final one is trimmed)."""
    kind = block.get("type", "")
    if kind in OPAQUE_BLOCKS:
        return keeps_opaque(block, owner, PROVIDER)
    if kind in _OPENAI_IMAGES:
        return _image(block) is not None
    return kind not in FOREIGN


def _image(block: Block) -> Block | None:
    """An OpenAI-shaped image as an Anthropic image block, when it names a URL or base64 data
    of a media type Anthropic takes."""
    source = image_source(block)
    if source is None or (source["type"] == "base64" and source.get("media_type") not in _MEDIA):
        return None
    return {"type": "image", "source": source}


def to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The `messages=` list for a repaired neutral sequence."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role is Role.TOOL:
            content = [_tool_result(m)]
            role = "user"
        else:
            content = _blocks(m)
            role = "user" if m.role is Role.USER else "assistant"
            content += [_tool_use(c) for c in m.tool_calls]
        if content:  # a message whose blocks were all dropped is omitted; its neighbours merge
            append_merged(out, {"role": role, "content": content}, ("content",))
    return out


def _blocks(m: Message) -> list[Block]:
    out: list[Block] = []
    for b in m.content:
        kind = b.get("type", "")
        if kind in OPAQUE_BLOCKS:
            if keeps_opaque(b, m.provider, PROVIDER):
                out.append(dict(b))  # signed: any change is a 400, so copy it whole
        elif kind == "text":
            out.append({k: b[k] for k in _TEXT_KEYS if k in b})  # other formats' extras would be refused
        elif kind == "refusal":
            out.append({"type": "text", "text": b.get("refusal", "")})
        elif kind in _OPENAI_IMAGES:
            if (image := _image(b)) is not None:
                out.append(image)
        elif kind not in FOREIGN:
            out.append(dict(b))
    return out


def _tool_use(call: ToolCall) -> Block:
    extra = call.meta.get("tool_use")  # fields Anthropic sent beside id/name/input (caller …)
    block: Block = {"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}
    return {**extra, **block} if isinstance(extra, dict) else block


def _tool_result(m: Message) -> Block:
    content = [b for b in _blocks(m) if b.get("type") in _RESULT_TYPES]
    block: Block = {
        "type": "tool_result",
        "tool_use_id": m.tool_use_id,
        "content": content or [{"type": "text", "text": OMITTED}],
    }
    if m.is_error:
        block["is_error"] = True
    return block


def record(response: Any) -> list[tuple[str, dict[str, Any]]]:
    """The turn drafts one `anthropic.types.Message` (or its dict form) makes."""
    r = dump(response, keep=("input",))
    blocks: list[Block] = []
    calls: list[dict[str, Any]] = []
    for b in r.get("content", []):
        if b.get("type") == "tool_use":
            calls.append(_call(b))
        else:
            blocks.append(b)
    return agent_draft(PROVIDER, blocks, calls, model=r.get("model"), stop=r.get("stop_reason"),
                       response_id=r.get("id"))


def _call(block: Block) -> dict[str, Any]:
    call = {"id": block["id"], "name": block["name"], "input": block.get("input", {})}
    extra = {k: v for k, v in block.items() if k not in _CALL_KEYS}
    if extra:
        call["meta"] = {"tool_use": extra}
    return call
