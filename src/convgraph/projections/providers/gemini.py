"""The Gemini format: `contents=` from neutral messages, drafts from a `GenerateContentResponse`.

A part is recorded as a block of the part's own keys plus a `type` naming its data field
(`thought` for a thought summary); rendering strips the `type` again, so Gemini's blocks
round-trip exactly. A function call becomes a tool call, its thought signature in
`meta["thought_signature"]`; a call without an id gets one made from the response id (or
a hash of the parts) and its position, marked `meta["synthetic_id"]` and never sent
back. The tool messages after an assistant message become one user content of
`function_response` parts, which the next user message joins. Thought signatures and
thought summaries go only to Gemini's own messages (`provider == "gemini"`). Invariant:
for a response `r`, `to_wire` of the message recorded from `r` is `r.candidates[0].content`,
and every entry validates as `google.genai.types.Content`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from typing import Any, Final

from convgraph.projections.message import Message
from convgraph.projections.providers._common import (
    GEMINI_KINDS,
    IMAGE_PARTS,
    OMITTED,
    agent_draft,
    append_merged,
    dump,
    image_blob,
    texts,
)
from convgraph.projections.turn import Block, Role, ToolCall

PROVIDER: Final = "gemini"

_SIGNATURE: Final = "thought_signature"
# a part's data fields, in the order a part's kind is read from them
_DATA_FIELDS: Final = tuple(sorted(GEMINI_KINDS - {"thought", "part"}))


def to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The `contents=` list for a repaired neutral sequence."""
    out: list[dict[str, Any]] = []
    calls: dict[str, ToolCall] = {}
    for m in messages:
        if m.role is Role.TOOL:
            role, parts = "user", [_function_response(m, calls.get(m.tool_use_id or ""))]
        elif m.role is Role.USER:
            role, parts = "user", _parts(m)
        else:
            calls = {c.id: c for c in m.tool_calls}
            role, parts = "model", _parts(m) + [_function_call(c, m.provider) for c in m.tool_calls]
        if parts:  # a content left with no parts is omitted; same-role neighbours then merge
            append_merged(out, {"role": role, "parts": parts}, ("parts",))
    return out


def _parts(m: Message) -> list[dict[str, Any]]:
    own = m.provider == PROVIDER
    parts: list[dict[str, Any]] = []
    for b in m.content:
        kind = b.get("type", "")
        if kind == "text" and isinstance(b.get("text"), str):
            parts.append(_native(b, own) if own else {"text": b["text"]})
        elif kind == "refusal":
            parts.append({"text": b.get("refusal", "")})
        elif kind in IMAGE_PARTS and (blob := image_blob(b)) is not None:
            parts.append({"inline_data": blob})
        elif kind in GEMINI_KINDS and kind != "text" and (own or kind != "thought"):
            parts.append(_native(b, own))
    return [p for p in parts if p]  # a bare signature part from elsewhere is left empty


def renders(block: Block, role: Role, owner: str | None) -> bool:  # noqa: ARG001 (one signature for all)
    """Whether `to_wire` carries `block` of a user or assistant message (repair drops the rest)."""
    kind = block.get("type", "")
    own = owner == PROVIDER
    if kind == "text":
        return isinstance(block.get("text"), str)
    if kind == "refusal":
        return True
    if kind in IMAGE_PARTS:
        return image_blob(block) is not None
    if kind == "part":  # a bare signature part from elsewhere would be left empty
        return own or any(k not in ("type", _SIGNATURE) for k in block)
    return kind in GEMINI_KINDS and (own or kind != "thought")


def _native(block: Block, own: bool) -> dict[str, Any]:
    """A Gemini block as its part: the keys it was recorded with, a foreign signature dropped."""
    return {k: v for k, v in block.items() if k != "type" and (own or k != _SIGNATURE)}


def _function_call(call: ToolCall, provider: str | None) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": call.name, "args": call.input}
    if not call.meta.get("synthetic_id"):
        fc["id"] = call.id
    part: dict[str, Any] = {"function_call": fc}
    signature = call.meta.get(_SIGNATURE)
    if provider == PROVIDER and type(signature) is bytes:
        part[_SIGNATURE] = signature  # only Gemini can check it, and Gemini 3 requires it
    return part


def _function_response(m: Message, call: ToolCall | None) -> dict[str, Any]:
    text = "".join(texts(m.content)) or OMITTED
    fr: dict[str, Any] = {
        "name": call.name if call is not None else (m.tool_use_id or ""),
        "response": {"error": text} if m.is_error else {"result": text},
    }
    if m.tool_use_id and not (call is not None and call.meta.get("synthetic_id")):
        fr["id"] = m.tool_use_id
    return {"function_response": fr}


def record(response: Any) -> list[tuple[str, dict[str, Any]]]:
    """The turn drafts one `GenerateContentResponse` (or its dict form) makes: candidate 0 only."""
    r = dump(response, by_alias=False, keep=("args",))
    candidates = r.get("candidates") or []
    if not candidates:
        return []  # a blocked prompt: the model said nothing to record
    candidate = candidates[0]  # other candidates are alternatives, not a continuation
    blocks: list[Block] = []
    calls: list[dict[str, Any]] = []
    parts = (candidate.get("content") or {}).get("parts") or []
    # ids must be unique across the conversation (repair pairs results by id)
    seed = r.get("response_id") or "gemini-" + hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
    for i, raw in enumerate(parts):
        part = _decoded(raw)
        if "function_call" in part:
            calls.append(_call(part, f"{seed}-{i}"))
        else:
            blocks.append({"type": _kind(part), **part})
    return agent_draft(PROVIDER, blocks, calls, model=r.get("model_version"),
                       stop=candidate.get("finish_reason"), response_id=r.get("response_id"))


def _decoded(part: dict[str, Any]) -> dict[str, Any]:
    """The part with a signature as bytes: the dict form of a REST response has it in base64."""
    signature = part.get(_SIGNATURE)
    if not isinstance(signature, str):
        return part
    try:
        return {**part, _SIGNATURE: base64.b64decode(signature, validate=True)}
    except (binascii.Error, ValueError):
        return part


def _kind(part: dict[str, Any]) -> str:
    if part.get("thought") is True:
        return "thought"
    return next((f for f in _DATA_FIELDS if f in part), "part")


def _call(part: dict[str, Any], fallback_id: str) -> dict[str, Any]:
    fc = part["function_call"]
    meta: dict[str, Any] = {}
    call_id = fc.get("id")
    if not isinstance(call_id, str) or not call_id.strip():
        call_id, meta["synthetic_id"] = fallback_id, True
    if isinstance(part.get(_SIGNATURE), bytes):
        meta[_SIGNATURE] = part[_SIGNATURE]
    call: dict[str, Any] = {"id": call_id, "name": fc.get("name", ""), "input": fc.get("args") or {}}
    if meta:
        call["meta"] = meta
    return call
