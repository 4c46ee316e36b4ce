"""Resume: turns → neutral messages → repair → one provider's wire format.

Invariant: for any turns holding a user turn with text (what a resume window always
holds), `to_provider(turns, p)` is non-empty and has no violation under
`validity.check(p, …)`, because repair runs first and each renderer only ever sees a
repaired sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from convgraph.errors import ProjectionError
from convgraph.projections.message import Message, messages_of
from convgraph.projections.providers import anthropic, gemini, openai_chat, openai_responses
from convgraph.projections.repair import repair
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

__all__ = ["PROVIDERS", "RECORDERS", "Provider", "to_provider"]


def to_provider(turns: Iterable[Turn], provider: str) -> list[dict[str, Any]]:
    """The provider-valid message list (request `messages` / `input` / `contents`) for `turns`."""
    render = _RENDERERS.get(provider)
    if render is None:
        raise ProjectionError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    return render(repair(messages_of(turns), provider))
