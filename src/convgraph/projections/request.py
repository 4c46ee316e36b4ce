"""A whole provider request: the resumed history plus the system prompt, each where its
provider wants it (docs/conversation.md §9).

`to_request(provider, messages, system)` gives the keyword arguments for the SDK call (add
`model`, `max_tokens`, `tools` … and call): Anthropic `messages=` and top-level `system=`;
OpenAI Responses `input=` and `instructions=`; OpenAI Chat Completions `messages=` opened by
one `{"role": "system"}` message; Gemini `contents=` and `config={"system_instruction": …}`.
No prompt (None, empty or blank) means no placement at all. `check_request` says what is wrong
with such kwargs, or with the JSON body an SDK sent: the history breaking a provider rule
(`validity.check`), the prompt in another provider's place, or a system message anywhere
but first. Pure. Invariant: `check_request(p, to_request(p, to_provider(turns, p), s))` is
empty for every window of turns and every prompt `s`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from convgraph.errors import ProjectionError
from convgraph.projections.validity import PROVIDERS, Provider, check

__all__ = ["HISTORY_KEYS", "SYSTEM_KEYS", "check_request", "system_of_request", "to_request"]

HISTORY_KEYS: Final[Mapping[str, str]] = {
    "anthropic": "messages", "openai": "messages", "openai-responses": "input", "gemini": "contents",
}
"""The request key each provider reads the history from."""

SYSTEM_KEYS: Final[Mapping[str, str]] = {
    "anthropic": "system", "openai": "messages[0]", "openai-responses": "instructions",
    "gemini": "config.system_instruction",
}
"""Where each provider reads the system prompt from (documentation and error text)."""

_FOREIGN: Final[Mapping[str, tuple[str, ...]]] = {  # other providers' places, refused
    "anthropic": ("instructions", "config", "system_instruction"),
    "openai": ("system", "instructions", "config", "system_instruction"),
    "openai-responses": ("system", "config", "system_instruction"),
    "gemini": ("system", "instructions", "system_instruction"),
}
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})


def _provider(provider: str) -> Provider:
    if provider not in PROVIDERS:
        raise ProjectionError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    return provider


def to_request(provider: str, messages: Sequence[Mapping[str, Any]], system: str | None) -> dict[str, Any]:
    """The SDK call's history and system placement for `provider` (see the module rule)."""
    history = [dict(m) for m in messages]
    p = _provider(provider)
    if not system or not system.strip():
        return {HISTORY_KEYS[p]: history}
    if p == "anthropic":
        return {"messages": history, "system": system}
    if p == "openai":
        return {"messages": [{"role": "system", "content": system}, *history]}
    if p == "openai-responses":
        return {"input": history, "instructions": system}
    return {"contents": history, "config": {"system_instruction": system}}


def system_of_request(provider: str, request: Mapping[str, Any]) -> str | None:
    """The system prompt `request` carries in `provider`'s place (text only), if any."""
    p = _provider(provider)
    if p == "anthropic":
        found = request.get("system")
    elif p == "openai-responses":
        found = request.get("instructions")
    elif p == "gemini":
        config = request.get("config")
        found = config.get("system_instruction") if isinstance(config, Mapping) else None
    else:
        history = request.get("messages")
        first = history[0] if isinstance(history, list) and history else None
        leads = isinstance(first, Mapping) and first.get("role") in _SYSTEM_ROLES
        found = first.get("content") if leads and isinstance(first, Mapping) else None
    return found if isinstance(found, str) and found.strip() else None


def check_request(provider: str, request: Mapping[str, Any], *, thinking: bool = False) -> list[str]:
    """Every way `request` (kwargs or the JSON body sent) misplaces the system prompt or breaks
    `provider`'s history rules, one line each; empty when it is valid. `thinking` as in
    `validity.check` (also read from an Anthropic body's `thinking` field)."""
    p = _provider(provider)
    out = [f"{key!r} is not where {p} reads a system prompt (it reads {SYSTEM_KEYS[p]})"
           for key in _FOREIGN[p] if key in request]
    history = request.get(HISTORY_KEYS[p])
    if not isinstance(history, list):
        return [*out, f"{HISTORY_KEYS[p]!r} must be a list of messages"]
    lead, offset = (history[0] if history else None), 0
    if p == "openai" and isinstance(lead, Mapping) and lead.get("role") in _SYSTEM_ROLES:
        if not isinstance(lead.get("content"), str):
            out.append("the leading system message must hold text")
        history, offset = history[1:], 1
    for i, m in enumerate(history, offset):
        if isinstance(m, Mapping) and m.get("role") in _SYSTEM_ROLES:
            out.append(f"{HISTORY_KEYS[p]}[{i}] is a {m.get('role')} message; the system prompt goes in "
                       f"{SYSTEM_KEYS[p]}")
    placed = request.get("system") if p == "anthropic" else request.get("instructions")
    if p in ("anthropic", "openai-responses") and placed is not None and not isinstance(placed, str | list):
        out.append(f"{SYSTEM_KEYS[p]} must be text")
    config = request.get("config")
    if p == "gemini" and config is not None and not isinstance(config, Mapping):
        out.append("config must be a map")
    thinking = thinking or (p == "anthropic" and isinstance(request.get("thinking"), Mapping)
                            and request["thinking"].get("type") in ("enabled", "adaptive"))
    rest = [m for m in history if not (isinstance(m, Mapping) and m.get("role") in _SYSTEM_ROLES)]
    out += [f"{HISTORY_KEYS[p]}[{v.index + offset}]: {v.rule}: {v.message}"
            for v in check(p, rest, thinking=thinking)]
    return out
