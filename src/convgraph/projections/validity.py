"""Validity: the structural rules each provider enforces on a request's conversation history.

`check(provider, wire)` reads a list exactly as it would be sent (Anthropic `messages`, OpenAI
Chat `messages`, OpenAI Responses `input`, Gemini `contents`) and returns every `Violation`,
ordered by index, each with a stable rule id and, where known, the provider's own error text.
Invariant: `check` is pure and total — it reports all faults, never only the first, and never
raises on a malformed list (only on an unknown provider).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import takewhile
from typing import Any, Final, Literal

from convgraph.errors import ProjectionError

Provider = Literal["anthropic", "openai", "openai-responses", "gemini"]
PROVIDERS: Final[tuple[Provider, ...]] = ("anthropic", "openai", "openai-responses", "gemini")

_Found = tuple[int, str, str]  # (index, rule, message)


@dataclass(frozen=True)
class Violation:
    """One broken rule at `index` (-1: the whole list). `message` is the provider's own error
    text where known, less Anthropic's `messages.N:` location prefix, else a plain description."""

    provider: str
    index: int
    rule: str
    message: str


def check(
    provider: Provider, wire: Sequence[Mapping[str, Any]], *, thinking: bool = False
) -> list[Violation]:
    """Every rule `wire` breaks for `provider`, in message order.

    `thinking` says the request turns extended thinking on (Anthropic): then the assistant
    message that opens the current tool cycle must start with its thinking."""
    checker = _CHECKERS.get(provider)
    if checker is None:
        raise ProjectionError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    items = [m if isinstance(m, Mapping) else {} for m in wire]
    found = checker(items)
    if provider == "anthropic":
        found += _anthropic_thinking(items, thinking=thinking)
    found = sorted(found, key=lambda f: f[0])  # stable: rule order within a message
    return [Violation(provider, i, rule, message) for i, rule, message in found]


def _empty(content: Any) -> bool:
    return content is None or content == "" or (isinstance(content, list | tuple) and not content)


def _maps(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list | tuple) else []


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    """Content as blocks: a non-empty string is the one text block the API makes of it."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return _maps(content)


def _ids(values: Sequence[Any]) -> str:
    return ", ".join(dict.fromkeys(str(v) for v in values))


# ---- Anthropic Messages API -------------------------------------------------------------
# Texts of real 400s (issue threads): tool_use_without_result claude-code#5989 · unexpected_
# tool_result claude-code#13460 · tool_result_not_first claude-code#37 · empty_content #6774 ·
# empty_text_block #59812 · whitespace_text_block #23440 · duplicate_tool_use_id #20901 ·
# final_assistant_trailing_whitespace opencode#1295 · first_not_user TextWordExplain#2 ·
# thinking_without_signature WordPress/ai-provider-for-anthropic#30. Inferred wording:
# invalid_role, redacted_thinking_without_data (SDK: `data` required), empty_list.

_A_TOOL_USE = (
    "`tool_use` ids were found without `tool_result` blocks immediately after: {}. "
    "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
)
_A_TOOL_RESULT = (
    "unexpected `tool_use_id` found in `tool_result` blocks: {}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
_A_BAD_SIG = "Invalid `signature` in `thinking` block"
_A_NOT_FIRST = (
    "Did not find {} `tool_result` block(s) at the beginning of this message. "
    "Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks."
)


def _anthropic(wire: list[Mapping[str, Any]]) -> list[_Found]:
    out: list[_Found] = []
    if not wire:
        out.append((-1, "empty_list", "messages: at least one message is required"))
    seen: set[Any] = set()
    for i, m in enumerate(wire):
        role, blocks = m.get("role"), _blocks(m.get("content"))
        final = i == len(wire) - 1
        # Roles: the top-level `system` param carries the system prompt. A mid-conversation
        # `role: "system"` is accepted only by Claude Opus 4.8 on the first-party API (docs:
        # "Mid-conversation system messages"), so it is refused here as not portable.
        if role not in ("user", "assistant"):
            out.append((i, "invalid_role", "role: Input should be 'user' or 'assistant'"))
        if i == 0 and role != "user":
            out.append((i, "first_not_user", 'messages: first message must use the "user" role'))
        if _empty(m.get("content")) and not (final and role == "assistant"):
            text = "all messages must have non-empty content except for the optional final assistant message"
            out.append((i, "empty_content", text))
        out += _anthropic_blocks(i, blocks, final and role == "assistant")
        uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        for use in uses:  # ids are unique across the whole request, not per message
            if use in seen:
                out.append((i, "duplicate_tool_use_id", "`tool_use` ids must be unique"))
            seen.add(use)
        if role == "assistant" and uses:
            after = wire[i + 1] if not final else {}
            answered = _results(_blocks(after.get("content"))) if after.get("role") == "user" else []
            if missing := [u for u in uses if u not in answered]:
                out.append((i, "tool_use_without_result", _A_TOOL_USE.format(_ids(missing))))
        out += _anthropic_results(i, blocks, wire[i - 1] if i else {})
    return out


def _results(blocks: list[Mapping[str, Any]]) -> list[Any]:
    return [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]


def _anthropic_blocks(i: int, blocks: list[Mapping[str, Any]], final_assistant: bool) -> list[_Found]:
    out: list[_Found] = []
    texts = [b for b in blocks if b.get("type") == "text"]
    for b in blocks:  # text blocks nested in a tool result are text blocks too
        if b.get("type") == "tool_result":
            texts += [t for t in _blocks(b.get("content")) if t.get("type") == "text"]
    for b in texts:
        text = b.get("text")
        if text == "":
            out.append((i, "empty_text_block", "messages: text content blocks must be non-empty"))
        elif isinstance(text, str) and not text.strip():
            text = "messages: text content blocks must contain non-whitespace text"
            out.append((i, "whitespace_text_block", text))
    last = blocks[-1] if final_assistant and blocks else {}
    end = last.get("text") if last.get("type") == "text" else None
    if isinstance(end, str) and end.strip() and end != end.rstrip():
        # a prefill may not end in whitespace (the same rule repair's `_rstrip_final` serves)
        text = "messages: final assistant content cannot end with trailing whitespace"
        out.append((i, "final_assistant_trailing_whitespace", text))
    for b in blocks:  # extended thinking: blocks go back byte for byte, with their seal
        sig = b.get("signature")
        if b.get("type") == "thinking" and not (isinstance(sig, str) and sig):
            text = _A_BAD_SIG if sig == "" else "thinking.signature: Field required"
            out.append((i, "thinking_without_signature", text))
        data = b.get("data")
        if b.get("type") == "redacted_thinking" and not (isinstance(data, str) and data):
            out.append((i, "redacted_thinking_without_data", "redacted_thinking.data: Field required"))
    return out


_A_THINKING_FIRST = (
    "Expected `thinking` or `redacted_thinking`, but found `{}`. When `thinking` is enabled, "
    "a final `assistant` message must start with a thinking block"
)
_THINKING_TYPES: Final = frozenset({"thinking", "redacted_thinking"})


def _anthropic_thinking(wire: list[Mapping[str, Any]], *, thinking: bool) -> list[_Found]:
    """Thinking leads its assistant message, read as the API reads it: consecutive messages
    of one role combined into one turn (which is how coalescing can put it second)."""
    out: list[_Found] = []
    turns: list[list[tuple[int, Mapping[str, Any]]]] = []
    for i, m in enumerate(wire):
        blocks = [(i, b) for b in _blocks(m.get("content"))]
        if turns and i and wire[i - 1].get("role") == m.get("role"):
            turns[-1] += blocks
        else:
            turns.append(blocks)
    roles = [wire[group[0][0]].get("role") if group else None for group in turns]
    for group, role in zip(turns, roles, strict=True):
        if role != "assistant":
            continue
        lead = next((b for _, b in group if b.get("type") not in _THINKING_TYPES), None)
        late = [i for k, (i, b) in enumerate(group) if b.get("type") in _THINKING_TYPES
                and any(x.get("type") not in _THINKING_TYPES for _, x in group[:k])]
        if late and lead is not None:
            i = late[0]
            out.append((i, "thinking_not_first", _A_THINKING_FIRST.format(lead.get("type"))))
    opener = _cycle_opener(turns, roles)
    if thinking and opener and opener[0][1].get("type") not in _THINKING_TYPES:
        i, first = opener[0]
        out.append((i, "cycle_without_thinking", _A_THINKING_FIRST.format(first.get("type"))))
    return out


def _cycle_opener(
    turns: list[list[tuple[int, Mapping[str, Any]]]], roles: list[Any]
) -> list[tuple[int, Mapping[str, Any]]] | None:
    """The combined assistant turn whose calls the final user turn answers: the current tool cycle."""
    if len(turns) < 2 or roles[-1] != "user" or roles[-2] != "assistant":
        return None
    answers, opener = turns[-1], turns[-2]
    if not answers or any(b.get("type") != "tool_result" for _, b in answers):
        return None
    return opener if any(b.get("type") == "tool_use" for _, b in opener) else None


def _anthropic_results(i: int, blocks: list[Mapping[str, Any]], before: Mapping[str, Any]) -> list[_Found]:
    out: list[_Found] = []
    results = _results(blocks)
    if not results:
        return out
    prior = _blocks(before.get("content")) if before.get("role") == "assistant" else []
    uses = [b.get("id") for b in prior if b.get("type") == "tool_use"]
    if orphans := [r for r in results if r not in uses]:  # e.g. a window cut inside an exchange
        out.append((i, "unexpected_tool_result", _A_TOOL_RESULT.format(_ids(orphans))))
    lead = next((k for k, b in enumerate(blocks) if b.get("type") != "tool_result"), len(blocks))
    if lead < len(results):  # some result comes after another block: results must lead
        out.append((i, "tool_result_not_first", _A_NOT_FIRST.format(len(uses) or len(results))))
    return out


# ---- OpenAI Chat Completions ------------------------------------------------------------
# Texts of real 400s: tool_without_call openai/openai-go#43 (OpenAI's own "preceeding") ·
# tool_call_without_result sdcb/chats#132 · unknown_tool_call_id dapr-agents#145 ·
# missing_tool_call_id langchain#22600 · content null llama_index#17555 · arguments_not_string
# goose-mobile#20 · empty_list LibreChat#10408 · invalid_role (OpenAI's enum wording).
# Inferred: an empty string or array as content is refused (the brief's rule; wording modeled).

_O_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_O_NO_CALL = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
    "with 'tool_calls'."
)
_O_NO_RESULT = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'. The following tool_call_ids did not have response messages: {}"
)
_O_NULL = "Invalid value for 'content': expected a string, got null."


def _openai_empty(where: str, content: Any) -> str:
    if content is None:
        return _O_NULL
    if isinstance(content, str):  # OpenAI's min-length wording; unconfirmed for this field
        short = "string too short. Expected a string with minimum length 1, but got an empty string instead."
        return f"Invalid '{where}': {short}"
    short = "empty array. Expected an array with minimum length 1, but got an empty array instead."
    return f"Invalid '{where}': {short}"


def _json_kind(value: Any) -> str:
    kinds = ((bool, "a boolean"), (int | float, "a number"), (list | tuple, "an array"))
    return "null" if value is None else next((k for t, k in kinds if isinstance(value, t)), "an object")


def _openai(wire: list[Mapping[str, Any]]) -> list[_Found]:
    out: list[_Found] = []
    if not wire:
        out.append((-1, "empty_list", _openai_empty("messages", [])))
    for i, m in enumerate(wire):
        role, content = m.get("role"), m.get("content")
        calls = _maps(m.get("tool_calls"))
        if role not in _O_ROLES:
            supported = "'system', 'assistant', 'user', 'function', 'tool', and 'developer'"
            out.append((i, "invalid_role", f"Invalid value: '{role}'. Supported values are: {supported}."))
        if role in ("system", "developer", "user") and _empty(content):
            out.append((i, "empty_content", _openai_empty(f"messages[{i}].content", content)))
        if role == "assistant" and _empty(content) and not (calls or m.get("refusal") or m.get("audio")):
            out.append((i, "assistant_without_content", _openai_empty(f"messages[{i}].content", content)))
        for j, call in enumerate(calls):
            fn = call.get("function")
            if isinstance(fn, Mapping) and not isinstance(args := fn.get("arguments"), str):
                where = f"messages[{i}].tool_calls[{j}].function.arguments"
                text = f"Invalid type for '{where}': expected a string, but got {_json_kind(args)} instead."
                out.append((i, "arguments_not_string", text))
        if role == "assistant" and calls:  # the run of tool messages right after must answer every call
            run = [t.get("tool_call_id") for t in takewhile(lambda t: t.get("role") == "tool", wire[i + 1 :])]
            if missing := [c.get("id") for c in calls if c.get("id") not in run]:
                out.append((i, "tool_call_without_result", _O_NO_RESULT.format(_ids(missing))))
        if role == "tool":
            out += _openai_tool(i, m, wire)
    return out


def _openai_tool(i: int, m: Mapping[str, Any], wire: list[Mapping[str, Any]]) -> list[_Found]:
    out: list[_Found] = []
    owner = next((wire[k] for k in range(i - 1, -1, -1) if wire[k].get("role") != "tool"), {})
    calls = _maps(owner.get("tool_calls")) if owner.get("role") == "assistant" else []
    ids = [c.get("id") for c in calls]
    call_id = m.get("tool_call_id")
    if not call_id:
        text = "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'."
        out.append((i, "missing_tool_call_id", text))
    if not ids:  # a window cut inside an exchange, or a result after a user message
        out.append((i, "tool_without_call", _O_NO_CALL))
    elif call_id and call_id not in ids:
        text = f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls'"
        out.append((i, "unknown_tool_call_id", text + " of previous message."))
    content, where = m.get("content"), f"messages[{i}].content"
    if _empty(content) and not isinstance(content, str):
        out.append((i, "tool_content_missing", _openai_empty(where, content)))
    elif not isinstance(content, str | list | tuple) or any(p.get("type") != "text" for p in _maps(content)):
        out.append((i, "tool_content_missing", f"{where}: a tool message takes a string or text parts only"))
    return out


# ---- OpenAI Responses API ---------------------------------------------------------------
# Texts of real 400s: output_without_call codex2api#414 · call_without_output Azure/azure-sdk-
# for-python#46092 · reasoning_without_following continue#8933, openai-node#1567 (OpenAI
# cookbook "Handling Function Calls with Reasoning Models": pass reasoning back with its call).
# empty_content: as for Chat Completions, inferred.


def _kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    return "message" if kind is None and "role" in item else str(kind)


def _follows_reasoning(item: Mapping[str, Any]) -> bool:
    """A reasoning item must be followed at once by the output it produced."""
    kind = _kind(item)
    return (kind == "message" and item.get("role") == "assistant") or kind.endswith("_call")


def _responses(wire: list[Mapping[str, Any]]) -> list[_Found]:
    out: list[_Found] = []
    if not wire:
        out.append((-1, "empty_list", _openai_empty("input", [])))
    called: set[Any] = set()
    for i, item in enumerate(wire):
        kind, call_id = _kind(item), item.get("call_id")
        if kind == "function_call":
            called.add(call_id)
            later = (o for o in wire[i + 1 :] if _kind(o) == "function_call_output")
            if all(o.get("call_id") != call_id for o in later):  # e.g. an interrupted run
                out.append((i, "call_without_output", f"No tool output found for function call {call_id}."))
        elif kind == "function_call_output" and call_id not in called:
            text = f"No tool call found for function call output with call_id {call_id}."
            out.append((i, "output_without_call", text))
        elif kind == "reasoning" and not (i + 1 < len(wire) and _follows_reasoning(wire[i + 1])):
            text = f"Item '{item.get('id')}' of type 'reasoning' was provided without its required"
            out.append((i, "reasoning_without_following", text + " following item."))
        elif kind == "message" and _empty(item.get("content")):
            out.append((i, "empty_content", _openai_empty(f"input[{i}].content", item.get("content"))))
    return out


# ---- Gemini generateContent -------------------------------------------------------------
# Texts of real 400s: response_count_mismatch gemini-cli#4217 · call_turn_misplaced
# gemini-cli#11814 · response_without_call generative-ai#368, langchain#27799 · empty_parts
# vercel/ai#3775 · empty_text gemini-openai-proxy#86 · empty_part FLIT#70 · roles_not_
# alternating (the API's wording, reported in langchain-google and litellm threads). Inferred wording:
# invalid_role, empty_list; response_name_mismatch is a plain description. Part keys are read
# in snake_case and camelCase, as google-genai accepts both.

_G_DATA = ("text", "inline_data", "file_data", "function_call", "function_response", "executable_code")
_G_DATA_MORE = ("code_execution_result", "tool_call", "tool_response")
_G_COUNT = (
    "Please ensure that the number of function response parts is equal to the number of function "
    "call parts of the function call turn."
)
_G_CALL_AFTER = (
    "Please ensure that function call turn comes immediately after a user turn "
    "or after a function response turn."
)
_G_RESPONSE_AFTER = "Please ensure that function response turn comes immediately after a function call turn."


def _part(part: Mapping[str, Any], key: str) -> Any:
    head, *rest = key.split("_")
    return part.get(key, part.get(head + "".join(w.title() for w in rest)))


def _parts(content: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    found = [_part(p, key) for p in _maps(content.get("parts"))]
    return [f if isinstance(f, Mapping) else {} for f in found if f is not None]


def _gemini(wire: list[Mapping[str, Any]]) -> list[_Found]:
    out: list[_Found] = []
    if not wire:
        out.append((-1, "empty_list", "* GenerateContentRequest.contents: contents is not specified"))
    for i, c in enumerate(wire):
        parts = _maps(raw := c.get("parts"))
        if c.get("role") not in ("user", "model"):
            out.append((i, "invalid_role", "Please use a valid role: user, model."))
        elif i and wire[i - 1].get("role") == c.get("role"):
            text = "Please ensure that multiturn requests alternate between user and model."
            out.append((i, "roles_not_alternating", text))
        if not raw:
            text = f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."
            out.append((i, "empty_parts", text))
        for p in parts:
            if all(_part(p, k) is None for k in _G_DATA + _G_DATA_MORE):
                out.append((i, "empty_part", "required oneof field 'data' must have one initialized field"))
            elif _part(p, "text") == "" and _part(p, "thought_signature") is None:  # a bare seal may be empty
                text = "Unable to submit request because it has an empty text parameter."
                out.append((i, "empty_text", text + " Add a value to the parameter and try again."))
        out += _gemini_calls(i, c, wire)
    return out


def _gemini_calls(i: int, c: Mapping[str, Any], wire: list[Mapping[str, Any]]) -> list[_Found]:
    out: list[_Found] = []
    before = wire[i - 1] if i else {}
    after = wire[i + 1] if i + 1 < len(wire) else {}
    if calls := _parts(c, "function_call"):
        if before.get("role") != "user":
            out.append((i, "call_turn_misplaced", _G_CALL_AFTER))
        answers = _parts(after, "function_response") if after.get("role") == "user" else []
        if len(answers) != len(calls):  # parallel calls are answered together, in the next turn
            out.append((i, "response_count_mismatch", _G_COUNT))
    if responses := _parts(c, "function_response"):
        asked = _parts(before, "function_call") if before.get("role") == "model" else []
        if not asked:  # e.g. a window cut between a call and its response
            out.append((i, "response_without_call", _G_RESPONSE_AFTER))
        for r in responses if asked else ():
            key = "id" if r.get("id") and all(a.get("id") for a in asked) else "name"
            if r.get(key) not in [a.get(key) for a in asked]:
                text = f"function_response {key} {r.get(key)!r} answers no function_call of the previous turn"
                out.append((i, "response_name_mismatch", text))
    return out


_CHECKERS: Final[Mapping[str, Callable[[list[Mapping[str, Any]]], list[_Found]]]] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "openai-responses": _responses,
    "gemini": _gemini,
}
