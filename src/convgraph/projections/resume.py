"""Resume: turns → neutral messages → repair → one provider's wire format.

Invariant: for any turns holding a user turn with text (what a resume window always
holds), `to_provider(turns, p)` is non-empty and has no violation under
`validity.check(p, …)`, because repair runs first and each renderer only ever sees a
repaired sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping, Sequence
from typing import Any, Final

from convgraph.errors import ProjectionError
from convgraph.projections.message import Message, message_of
from convgraph.projections.providers import anthropic, gemini, openai_chat, openai_responses
from convgraph.projections.repair import clean, repair_cleaned
from convgraph.projections.turn import Turn
from convgraph.projections.validity import PROVIDERS, Provider

_RENDERERS: Final[dict[str, Callable[[Sequence[Message]], list[dict[str, Any]]]]] = {
    anthropic.PROVIDER: anthropic.to_wire,
    openai_chat.PROVIDER: openai_chat.to_wire,
    openai_responses.PROVIDER: openai_responses.to_wire,
    gemini.PROVIDER: gemini.to_wire,
}
RECORDERS: Final[dict[str, Callable[[Any], list[tuple[str, dict[str, Any]]]]]] = {
    anthropic.PROVIDER: anthropic.record,
    openai_chat.PROVIDER: openai_chat.record,
    openai_responses.PROVIDER: openai_responses.record,
    gemini.PROVIDER: gemini.record,
}
"""Per provider: a response (SDK object or dict) → turn drafts `(kind, payload)`."""

__all__ = ["PROVIDERS", "RECORDERS", "Cleaned", "Provider", "to_provider"]

Cleaned = MutableMapping[int, tuple[Turn, dict[str, "Message | None"]]]
"""Per turn (by `id`, the turn kept beside so the id cannot be reused): its message as repair
cleaned it, per provider. A turn is immutable and cleaning reads one message alone."""
MEMO_LIMIT: Final = 8192  # turns a `Cleaned` memo holds before it starts afresh


def to_provider(turns: Iterable[Turn], provider: str, *, memo: Cleaned | None = None) -> list[dict[str, Any]]:
    """The provider-valid message list (request `messages` / `input` / `contents`) for `turns`.

    `memo` may keep each turn's cleaned message across calls: the answer is the same."""
    render = _RENDERERS.get(provider)
    if render is None:
        raise ProjectionError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    if memo is None:
        cleaned = [m for m in (clean(message_of(t), provider) for t in turns) if m is not None]
    else:
        cleaned = [m for m in (_cleaned(memo, t, provider) for t in turns) if m is not None]
    return render(repair_cleaned(cleaned, provider))


def _cleaned(memo: Cleaned, turn: Turn, provider: str) -> Message | None:
    found = memo.get(id(turn))
    if found is None or found[0] is not turn:
        if len(memo) >= MEMO_LIMIT:
            memo.clear()
        found = memo[id(turn)] = (turn, {})
    per = found[1]
    if provider in per:
        return per[provider]
    m = per[provider] = clean(message_of(turn), provider)
    return m
