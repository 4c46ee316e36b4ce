"""What the four wire formats share: cleaning SDK responses, arguments, images, merging.

Cleaning is one rule for every provider: an SDK object is dumped with
`model_dump(mode="python", exclude_none=True)` (wire names for OpenAI and Anthropic), a plain
dict is taken as that dump already is, and then, recursively, map entries whose value is
None are dropped (the payload has no use for a null "absent" marker), non-finite floats
become None (DAG-CBOR has no NaN or Infinity), enums become their values and tuples lists.
Tool-call inputs are left as the provider sent them, nulls included, since a null argument
is data. Invariant: everything here is a pure function of its arguments.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable
from enum import Enum
from typing import Any, Final

from convgraph.projections.message import OPAQUE_BLOCKS
from convgraph.projections.turn import Block

OMITTED: Final = "(non-text output omitted)"
"""A tool result's text when none of its blocks can be carried by the format."""

GEMINI_KINDS: Final = frozenset({
    "thought", "text", "inline_data", "file_data", "executable_code", "code_execution_result",
    "function_call", "function_response", "tool_call", "tool_response", "part",
})
"""Block types `gemini.record` makes from parts: the part's data field, `thought` for
thought summaries, `part` when a part has no data field (a bare thought signature)."""

RESPONSES_ITEMS: Final = frozenset({
    "additional_tools", "apply_patch_call", "apply_patch_call_output", "code_interpreter_call",
    "compaction", "computer_call", "computer_call_output", "custom_tool_call", "custom_tool_call_output",
    "file_search_call", "function_call_output", "image_generation_call", "local_shell_call",
    "local_shell_call_output", "mcp_approval_request", "mcp_approval_response", "mcp_call",
    "mcp_list_tools", "program", "program_output", "shell_call", "shell_call_output",
    "tool_search_call", "tool_search_output", "web_search_call",
})
"""Responses output items kept whole as blocks by `openai_responses.record` (reasoning aside,
which is opaque): server-side tool calls and the like, which only Responses can read."""

OPENAI_PARTS: Final = frozenset({
    "image_url", "input_audio", "file", "input_text", "input_image", "input_file", "output_text",
})
"""Content part types of the two OpenAI formats, which an application may store as blocks."""

FOREIGN: Final = (GEMINI_KINDS - {"text"}) | RESPONSES_ITEMS | OPENAI_PARTS
"""Block types of other formats that Anthropic, which passes unknown blocks through, must not see."""


def dump(response: Any, *, by_alias: bool = True, keep: Iterable[str] = ()) -> dict[str, Any]:
    """A response as a clean plain map (see the module rule); `keep` names raw-data keys."""
    raw = response
    if not isinstance(raw, dict) and hasattr(raw, "model_dump"):
        raw = raw.model_dump(mode="python", by_alias=by_alias, exclude_none=True)
    if not isinstance(raw, dict):
        raise TypeError(f"expected an SDK response object or a dict, got {type(response).__name__}")
    out: dict[str, Any] = clean(raw, frozenset(keep))
    return out


def clean(value: Any, keep: frozenset[str] = frozenset()) -> Any:
    """`value` with None / non-finite map entries dropped, except under the keys in `keep`."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            tidy = raw_value(v) if k in keep else clean(v, keep)
            if tidy is not None:
                out[k] = tidy
        return out
    if isinstance(value, list | tuple):
        return [clean(v, keep) for v in value]
    return _scalar(value)


def raw_value(value: Any) -> Any:
    """Provider data (tool input) as plain values: nulls kept, non-finite floats become null."""
    if isinstance(value, dict):
        return {k: raw_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [raw_value(v) for v in value]
    return _scalar(value)


def _scalar(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _reject(token: str) -> Any:
    raise ValueError(token)


def parse_arguments(raw: Any) -> dict[str, Any]:
    """The input map an arguments string encodes, or {} when it is not a JSON object."""
    if not isinstance(raw, str):
        return {}
    try:
        # NaN / Infinity are not JSON and DAG-CBOR cannot hold them: treat as malformed
        value = json.loads(raw, parse_constant=_reject, parse_float=_finite)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) and _cbor_ints(value) else {}


def _finite(token: str) -> float:
    number = float(token)
    if not math.isfinite(number):
        raise ValueError(token)
    return number


def _cbor_ints(value: Any) -> bool:
    """True when every integer fits DAG-CBOR's 64-bit range."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int) and not -(2**64) <= item < 2**64:
            return False
    return True


def keeps_opaque(block: Block, owner: str | None, fmt: str) -> bool:
    """Whether an opaque block may go to `fmt`: only when its own provider made it."""
    return OPAQUE_BLOCKS.get(block.get("type", "")) == fmt == owner


def texts(blocks: Iterable[Block]) -> list[str]:
    """The text of each text block, in order."""
    return [b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)]


IMAGE_PARTS: Final = frozenset({"image", "input_image", "image_url"})
"""Image blocks in the three shapes the formats use: Anthropic `image`, Responses
`input_image` (`image_url` a string), Chat `image_url` (`image_url.url`). Each renderer
carries any of them that names a URL or base64 data, as its own format's image."""


def image_source(block: Block) -> dict[str, Any] | None:
    """An image block of any shape (`IMAGE_PARTS`) as an Anthropic image `source`, or None
    (a file id, a malformed URL, another block type)."""
    kind = block.get("type")
    if kind == "image":
        source = block.get("source")
        return source if isinstance(source, dict) else None
    url: Any = block.get("image_url") if kind == "input_image" else None
    if kind == "image_url" and isinstance(block.get("image_url"), dict):
        url = block["image_url"].get("url")
    if not isinstance(url, str):
        return None
    if url.startswith("data:"):
        head, comma, data = url[len("data:"):].partition(",")
        media, _, encoding = head.partition(";")
        ok = comma and media and encoding == "base64"
        return {"type": "base64", "media_type": media, "data": data} if ok else None
    return {"type": "url", "url": url} if url.startswith(("https://", "http://")) else None


def image_detail(block: Block) -> str | None:
    """The `detail` an OpenAI-shaped image block asked for, if any."""
    inner = block.get("image_url")
    detail = inner.get("detail") if isinstance(inner, dict) else block.get("detail")
    return detail if isinstance(detail, str) else None


def image_url(block: Block) -> str | None:
    """An image block of any shape as a URL (a data: URL for base64), or None."""
    source = image_source(block)
    if source is None:
        return None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        return f"data:{source.get('media_type', 'image/png')};base64,{source['data']}"
    url = source.get("url")
    return url if source.get("type") == "url" and isinstance(url, str) else None


def image_blob(block: Block) -> dict[str, Any] | None:
    """An image block of any shape holding base64 data as a Gemini blob, or None (URLs, bad base64)."""
    source = image_source(block)
    if source is None or source.get("type") != "base64":
        return None
    try:
        data = base64.b64decode(source.get("data", ""), validate=True)
    except (binascii.Error, TypeError, ValueError):
        return None
    return {"mime_type": source.get("media_type", "image/png"), "data": data}


def append_merged(out: list[dict[str, Any]], entry: dict[str, Any], lists: tuple[str, ...]) -> None:
    """Append `entry`, or extend the last entry's `lists` when both have the same role.

    Why: dropping a message's blocks can leave two same-role messages adjacent, and
    Anthropic and Gemini put tool results in a user message the next user turn joins."""
    role = entry.get("role")
    if out and role is not None and out[-1].get("role") == role:
        for key in lists:
            if key in entry:
                out[-1].setdefault(key, []).extend(entry[key])
    else:
        out.append(entry)


def agent_draft(
    provider: str, blocks: list[Block], calls: list[dict[str, Any]], *,
    model: Any, stop: Any, response_id: Any,
) -> list[tuple[str, dict[str, Any]]]:
    """The one `agent_message` draft a response makes; optional fields only when they are text."""
    payload: dict[str, Any] = {"role": "assistant", "content": blocks, "provider": provider}
    if calls:
        payload["tool_calls"] = calls
    if isinstance(model, str):
        payload["model"] = model
    if isinstance(stop, str):
        payload["stop_reason"] = stop
    if isinstance(response_id, str):
        payload["meta"] = {"response_id": response_id}
    return [("agent_message", payload)]
