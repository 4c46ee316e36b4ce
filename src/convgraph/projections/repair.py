"""Repair: any sequence of neutral messages → one that every provider accepts.

The rules, in the order they apply (each is why some provider answers 400 otherwise):
opaque blocks (thinking, redacted thinking, reasoning, thoughts) of another provider are
dropped, since only their own provider can verify them; so are the blocks of a user or
assistant message the target's format cannot carry (`renders`); empty and whitespace-only
text and refusal blocks are dropped, and messages left empty; a tool result is moved up
to right after the assistant message whose call it answers, across whatever lies between
(a concurrent turn from another device, a user who spoke before the tool returned), up to
a later call that reuses the id; a result that answers no such call is dropped (a window
that cut inside an exchange, a duplicate answer); a call no result answers is stripped (an
interrupted run); a call id an earlier exchange used is suffixed, with its results, so
ids stay unique; the results of one assistant message follow it at once, in call order;
adjacent user messages and adjacent assistant messages are coalesced (for Anthropic the
latest part's thinking leads and earlier thinking is dropped); history starts at the
first user message; a final assistant message loses the trailing whitespace of its last
text or refusal block. Opaque blocks of the target provider are kept byte for byte and in
order. Invariant: `repair` is pure, idempotent, and its output satisfies every rule
`projections.validity` checks, for each provider.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final

from convgraph.projections.message import OPAQUE_BLOCKS, Message
from convgraph.projections.providers import anthropic, gemini, openai_chat, openai_responses
from convgraph.projections.turn import Block, Role

EMPTY_RESULT: Final = "(no output)"
"""Text a tool result with no content is given: every provider refuses empty content."""

_RENDERS: Final[dict[str, Callable[[Block, Role, str | None], bool]]] = {
    anthropic.PROVIDER: anthropic.renders,
    openai_chat.PROVIDER: openai_chat.renders,
    openai_responses.PROVIDER: openai_responses.renders,
    gemini.PROVIDER: gemini.renders,
}
"""Per provider: whether its renderer carries a block of a user or assistant message. Repair
drops what it would not, so a message emptied by the format vanishes here, before neighbours
coalesce and the final assistant message is trimmed (else an image-only user message that
Anthropic cannot show left the previous answer final, trailing whitespace and all)."""


def repair(messages: Sequence[Message], provider: str) -> list[Message]:
    """A provider-valid version of `messages` for `provider`, losing as little as possible."""
    return repair_cleaned([m for m in (clean(m, provider) for m in messages) if m is not None], provider)


def repair_cleaned(cleaned: list[Message], provider: str) -> list[Message]:
    """`repair` of messages each already passed through `clean` (and left out when it gave None)."""
    out = _coalesce_adjacent(_pair_results(cleaned), provider)
    while out and out[0].role is not Role.USER:
        out.pop(0)
    if out and out[-1].role is Role.ASSISTANT and not out[-1].tool_calls:
        out[-1] = _rstrip_final(out[-1])
    return out


def clean(m: Message, provider: str) -> Message | None:
    """Repair's rules that read one message alone: a pure function of `m` and `provider`."""
    # messages come back unchanged (no copy) when nothing in them needs repair: the common case
    renders = _RENDERS.get(provider) if m.role is not Role.TOOL else None
    blocks = tuple(b for b in m.content
                   if _keep(b, m.provider, provider) and (renders is None or renders(b, m.role, m.provider)))
    if m.role is Role.TOOL:
        if not m.tool_use_id:
            return None
        if not blocks:
            return replace(m, content=({"type": "text", "text": EMPTY_RESULT},))
        return m if len(blocks) == len(m.content) else replace(m, content=blocks)
    calls, seen = [], set()
    for call in m.tool_calls:  # a repeated id could never be answered unambiguously
        if call.id not in seen:
            seen.add(call.id)
            calls.append(call)
    if seen and any(b.get("type") in _CALL_BLOCKS for b in blocks):
        # LangChain's AIMessage from an Anthropic model holds each call twice, as a content
        # block and in `tool_calls`: the call is rendered from `tool_calls`, once
        blocks = tuple(b for b in blocks if not (b.get("type") in _CALL_BLOCKS and b.get("id") in seen))
    if not blocks and not calls:
        return None
    if len(blocks) == len(m.content) and len(calls) == len(m.tool_calls):
        return m
    return replace(m, content=blocks, tool_calls=tuple(calls))


def _keep(block: Block, owner: str | None, provider: str) -> bool:
    kind = block.get("type")
    if kind in OPAQUE_BLOCKS:
        return owner == provider == OPAQUE_BLOCKS[kind]
    if kind in _TEXTS:
        text = block.get(_TEXTS[kind])
        return isinstance(text, str) and text.strip() != ""
    return True


_CALL_BLOCKS: Final = frozenset({"tool_use", "tool_call", "function_call"})
"""Content block types that are a tool call: one whose id is also in the message's
`tool_calls` repeats it, and is dropped."""

_TEXTS: Final = {"text": "text", "refusal": "refusal"}
"""Block types that are text, and the key holding it: a refusal is rendered as text by the
formats without a refusal field, so a blank one is an empty text block there."""


def _pair_results(messages: list[Message]) -> list[Message]:
    """Give each assistant message exactly the results of its calls, right after it."""
    out: list[Message] = []
    taken: set[str] = set()
    calls_at, results_at = _positions(messages)
    claimed = dict.fromkeys(results_at, 0)  # per id: how many of its results lie behind us
    for i, m in enumerate(messages):
        if m.role is Role.TOOL:
            continue  # a result is placed with its call below, or it answers none
        if m.role is Role.USER or not m.tool_calls:
            out.append(m)
            continue
        # its results lie before the next call (by anyone) that reuses one of its ids
        stop = min((_after(calls_at[c.id], i) for c in m.tool_calls), default=len(messages))
        answers: dict[str, Message] = {}
        for call in m.tool_calls:
            results = results_at.get(call.id, ())
            k = claimed.get(call.id, 0)
            while k < len(results) and results[k] <= i:  # behind us: no later call can reach it
                k += 1
            if k < len(results) and results[k] < stop and call.id not in answers:
                answers[call.id] = messages[results[k]]
                k += 1
            if call.id in claimed:
                claimed[call.id] = k
        calls = tuple(c for c in m.tool_calls if c.id in answers)
        if calls:
            renamed = {c.id: _fresh_id(c.id, taken) for c in calls}
            if all(old == new for old, new in renamed.items()):
                out.append(m if len(calls) == len(m.tool_calls) else replace(m, tool_calls=calls))
                out.extend(answers[c.id] for c in calls)
                continue
            out.append(replace(m, tool_calls=tuple(replace(c, id=renamed[c.id]) for c in calls)))
            out.extend(replace(answers[c.id], tool_use_id=renamed[c.id]) for c in calls)
        elif m.content:
            out.append(replace(m, tool_calls=()))
    return out


def _positions(messages: Sequence[Message]) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Per call id: where assistant messages call it, and where tool results answer it (ascending)."""
    calls_at: dict[str, list[int]] = {}
    results_at: dict[str, list[int]] = {}
    for j, m in enumerate(messages):
        if m.role is Role.ASSISTANT:
            for c in m.tool_calls:
                calls_at.setdefault(c.id, []).append(j)
        elif m.role is Role.TOOL and m.tool_use_id is not None:
            results_at.setdefault(m.tool_use_id, []).append(j)
    return calls_at, results_at


def _after(positions: list[int], i: int) -> int:
    """The first of `positions` after `i`, or infinity."""
    k = bisect.bisect_right(positions, i)
    return positions[k] if k < len(positions) else sys.maxsize


def _fresh_id(call_id: str, taken: set[str]) -> str:
    """`call_id`, or a suffixed variant when an earlier exchange already used it.

    Providers want every call id unique across the request ("tool_use ids must be
    unique"); a runtime that reuses ids across steps would otherwise be refused.
    """
    fresh, n = call_id, 1
    while fresh in taken:
        n += 1
        fresh = f"{call_id}_{n}"
    taken.add(fresh)
    return fresh


def _coalesce_adjacent(steps: list[Message], provider: str) -> list[Message]:
    """Adjacent user messages, and adjacent assistant messages the earlier of which makes no
    call, become one: what the providers would do, but with the thinking rule applied."""
    out: list[Message] = []
    for m in steps:
        if out and out[-1].role is m.role and m.role is not Role.TOOL and not out[-1].tool_calls:
            out[-1] = _coalesce(out[-1], m, provider)
        else:
            out.append(m)
    return out


def _coalesce(a: Message, b: Message, provider: str) -> Message:
    # every opaque block still here is the target's own (`_keep` filtered each message by its
    # own provider before any merge): provenance is settled per block, so the merged message
    # is the target's whenever it holds one, whatever `b` was tagged with. Otherwise
    # provider-specific call details (Gemini thought signatures) ride on `b`, whose calls it keeps.
    content = a.content + b.content
    if any(blk.get("type") in OPAQUE_BLOCKS for blk in content):
        owner: str | None = provider
        if provider in _THINKING_FIRST:
            content = _lead_with_thinking(a.content, b.content)
    else:
        owner = provider if provider in (a.provider, b.provider) and not b.tool_calls else b.provider
    return replace(a, content=content, tool_calls=b.tool_calls, provider=owner, ops=a.ops + b.ops)


_THINKING_FIRST: Final = frozenset({"anthropic"})
"""Targets whose assistant message must open with its thinking (Anthropic: with thinking on,
thinking and redacted thinking lead, and the message that opens the current tool cycle must
keep its own). Others take opaque items where they were made: Responses pairs a reasoning
item with the output after it, Gemini a thought with the parts after it."""


def _lead_with_thinking(a: tuple[Block, ...], b: tuple[Block, ...]) -> tuple[Block, ...]:
    """`a` then `b` with the later part's thinking first and the earlier part's dropped.

    Anthropic ignores the thinking of every assistant turn but the last, so only the latest
    part's thinking matters; when `b` has none, `a`'s leads (it may open the tool cycle `b`
    closes with calls)."""
    def opaque(blocks: tuple[Block, ...]) -> tuple[Block, ...]:
        return tuple(x for x in blocks if x.get("type") in OPAQUE_BLOCKS)

    def plain(blocks: tuple[Block, ...]) -> tuple[Block, ...]:
        return tuple(x for x in blocks if x.get("type") not in OPAQUE_BLOCKS)

    lead = opaque(b) or opaque(a)
    return lead + plain(a) + plain(b)


def _rstrip_final(m: Message) -> Message:
    # Anthropic: "final assistant content cannot end with trailing whitespace"
    content = list(m.content)
    for i in range(len(content) - 1, -1, -1):
        block = content[i]
        key = _TEXTS.get(block.get("type", ""))
        if key is None:
            continue
        text = str(block[key]).rstrip()
        if text:
            content[i] = {**block, key: text}
        else:
            del content[i]
        break
    return replace(m, content=tuple(content)) if content else m
