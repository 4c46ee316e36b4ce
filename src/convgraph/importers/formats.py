"""The message formats people save, told apart and mapped to turn drafts. Pure.

* `legacy`: the seed's `{speaker, text, timestamp}` lines, kept in that shape (the record kind
  says the role: `agent_message` for the assistant speakers, `user_message` for the others, a
  `system` speaker's text a `system_prompt`).
* `openai-chat`: Chat Completions `messages` (`system` / `developer`, `user`, `assistant` with
  `tool_calls`, `tool` with `tool_call_id`).
* `openai-responses`: Responses `input` items, mapped as the Agents SDK adapter stores them.
* `anthropic`: Messages API `messages`; a user message's `tool_result` blocks become one
  `tool_result` turn each (keys `N.0`, `N.1`, …), its other blocks one `user_message` after them.

`detect` names the format of a list of items from the first item that shows one; a `system`
message shows none (both Chat and Anthropic logs hold them), and text turns alone map to the
same turns either way (they read as Chat, or as Anthropic when they hold blocks). Invariant:
each item maps to drafts, or to an `Unmapped` saying why, or to both when it is kept whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from convgraph.importers.openai_agents import item_drafts
from convgraph.importers.report import Unmapped
from convgraph.projections.providers import anthropic, openai_chat
from convgraph.projections.providers._common import RESPONSES_ITEMS
from convgraph.replica import Draft

Mapped = tuple[str, Draft]
Out = tuple[list[Mapped], list[Unmapped]]
"""What one item became: keyed drafts, and what of it no turn holds."""
FORMATS: Final = ("legacy", "openai-chat", "openai-responses", "anthropic")
ASSISTANT_SPEAKERS: Final = frozenset({"assistant", "agent", "ai", "bot", "model"})
_RESPONSES_TYPES: Final = RESPONSES_ITEMS | {"message", "function_call", "function_call_output", "reasoning",
                                             "item_reference"}
_RESPONSES_PARTS: Final = frozenset({"input_text", "output_text", "input_image", "input_file"})
_CHAT_ROLES: Final = frozenset({"developer", "tool", "function"})
_TEXT_ROLES: Final = frozenset({"user", "assistant", "system"})
_CHAT_PARTS: Final = frozenset({"image_url", "input_audio", "file"})
_ANTHROPIC_BLOCKS: Final = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "image",
                                      "document", "server_tool_use"})
UNKNOWN_HELP: Final = (
    "expected legacy {speaker, text, timestamp} lines, OpenAI Chat messages ({role, content, tool_calls, "
    "tool_call_id}), OpenAI Responses input items ({type: message | function_call | function_call_output "
    "| reasoning …}) or Anthropic messages ({role, content: [{type: text | tool_use | tool_result …}]}), "
    "as a JSON array, an object with `messages` or `input`, or one JSON value a line"
)


def detect(items: Sequence[Any]) -> str | None:
    """The format `items` are in, from the first item that tells; None when none does."""
    maps = [i for i in items if isinstance(i, dict)]
    if maps and all("speaker" in i and "text" in i for i in maps):
        return "legacy"
    for item in maps:
        found = _format_of(item)
        if found is not None:
            return found
    # text turns alone read the same in Chat and Anthropic form: either mapping gives the same turns
    texts = [i.get("role") in _TEXT_ROLES and _text(i.get("content")) is not None for i in maps]
    if not maps or not all(texts):
        return None
    return "openai-chat" if all(isinstance(i.get("content"), str) for i in maps) else "anthropic"


def _format_of(item: dict[str, Any]) -> str | None:
    if "speaker" in item and "text" in item:
        return "legacy"
    if item.get("type") in _RESPONSES_TYPES:
        return "openai-responses"
    if item.get("role") in _CHAT_ROLES or "tool_calls" in item or "tool_call_id" in item:
        return "openai-chat"
    content = item.get("content")
    parts = {p.get("type") for p in content if isinstance(p, dict)} if isinstance(content, list) else set()
    if parts & _RESPONSES_PARTS:
        return "openai-responses"
    if parts & _CHAT_PARTS:
        return "openai-chat"
    if parts & _ANTHROPIC_BLOCKS:
        return "anthropic"
    return None


def mapper(fmt: str, *, assistants: Iterable[str] = ()) -> Callable[[str, str, Any], Out]:
    """The function mapping one item (conversation, key, item) of format `fmt` to keyed drafts."""
    if fmt == "legacy":
        speakers = ASSISTANT_SPEAKERS | {a.casefold() for a in assistants}
        return lambda conv, key, item: legacy(conv, key, item, speakers)
    return {"openai-chat": chat, "openai-responses": item_drafts, "anthropic": anthropic_message}[fmt]


def legacy(conv: str, key: str, item: Any, assistants: frozenset[str]) -> Out:
    if not (isinstance(item, dict) and all(isinstance(item.get(k), str) for k in ("speaker", "text"))):
        return _miss(key, "not_a_line", "a legacy line is {speaker: text, text: text, timestamp?}")
    speaker, text = item["speaker"], item["text"]
    extra = {k: v for k, v in item.items() if k not in ("speaker", "text", "timestamp")}
    meta = {"meta": {"jsonl": extra}} if extra else {}
    if speaker.casefold() == "system":
        return _one(key, Draft("system_prompt", {"content": text, **meta}))
    kind = "agent_message" if speaker.casefold() in assistants else "user_message"
    payload = {"conversation_id": conv, "speaker": speaker, "text": text, **meta}
    if "timestamp" in item:
        payload["timestamp"] = item["timestamp"]
    return _one(key, Draft(kind, payload))


def chat(conv: str, key: str, item: Any) -> Out:
    role = item.get("role") if isinstance(item, dict) else None
    content = item.get("content") if isinstance(item, dict) else None
    if role in ("system", "developer"):
        text = _text(content)
        if text is None:
            return _miss(key, f"{role}_message", "its content is neither text nor text parts")
        return _one(key, Draft("system_prompt", {"content": text}))
    if role == "user" and _content(content):
        extra = {"name": item["name"]} if isinstance(item.get("name"), str) else {}
        return _one(key, Draft("user_message", {"conversation_id": conv, "role": "user", "content": content,
                                                **extra}))
    if role == "assistant" and (content is None or _text(content) is not None):
        message = {**item, "content": _text(content)}
        try:
            ((kind, payload),) = openai_chat.record({"choices": [{"message": message}]})
        except (KeyError, TypeError, AttributeError, ValueError):
            return _miss(key, "assistant_message", "its tool_calls are not Chat Completions tool calls")
        return _one(key, Draft(kind, {"conversation_id": conv, **payload}))
    if role == "tool" and isinstance(item.get("tool_call_id"), str) and _content(content):
        return _one(key, Draft("tool_result", {"conversation_id": conv, "role": "tool",
                                               "tool_use_id": item["tool_call_id"], "content": content}))
    what = f"{role}_message" if isinstance(role, str) else "not_a_message"
    return _miss(key, what, "not a Chat Completions message convgraph maps (system, developer, user, "
                            "assistant, tool with their content)")


def anthropic_message(conv: str, key: str, item: Any) -> Out:
    role = item.get("role") if isinstance(item, dict) else None
    content = item.get("content") if isinstance(item, dict) else None
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list) or not _content(blocks):
        return _miss(key, f"{role}_message" if isinstance(role, str) else "not_a_message",
                     "an Anthropic message is {role, content: text or blocks}")
    if role == "system":
        text = _text(content)
        return _one(key, Draft("system_prompt", {"content": text})) if text is not None else _miss(
            key, "system_message", "its content is neither text nor text blocks")
    if role == "assistant":
        try:
            ((kind, payload),) = anthropic.record({"content": blocks})
        except (KeyError, TypeError, AttributeError):
            return _miss(key, "assistant_message", "its tool_use blocks lack an id or a name")
        return _one(key, Draft(kind, {"conversation_id": conv, **payload}))
    if role != "user":
        return _miss(key, f"{role}_message", "an Anthropic message is from the user or the assistant")
    results = [b for b in blocks if b["type"] == "tool_result"]
    rest = content if isinstance(content, str) else [b for b in blocks if b["type"] != "tool_result"]
    out: list[Mapped] = []
    for j, b in enumerate(results):
        if not isinstance(b.get("tool_use_id"), str) or not b["tool_use_id"]:
            return _miss(key, "tool_result", "a tool_result block needs its tool_use_id")
        payload = {"conversation_id": conv, "role": "tool", "tool_use_id": b["tool_use_id"],
                   "content": b.get("content", "")}
        if b.get("is_error") is True:
            payload["is_error"] = True
        out.append((f"{key}.{j}" if len(results) + bool(rest) > 1 else key, Draft("tool_result", payload)))
    if rest or not results:
        sub = f"{key}.{len(results)}" if results else key
        out.append((sub, Draft("user_message", {"conversation_id": conv, "role": "user", "content": rest})))
    return out, []


def _one(key: str, draft: Draft) -> Out:
    return [(key, draft)], []


def _miss(key: str, what: str, reason: str) -> Out:
    return [], [Unmapped(key, what, reason)]


def _content(content: Any) -> bool:
    """Whether `content` is text or a list of typed blocks (what a turn's content may be)."""
    if isinstance(content, list):
        return all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in content)
    return isinstance(content, str)


def _text(content: Any) -> str | None:
    """Content as text: itself, or its text parts joined; None when it holds anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") in ("text", "input_text")
                                         and isinstance(p.get("text"), str) for p in content):
        return "".join(p["text"] for p in content)
    return None
