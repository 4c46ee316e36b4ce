"""Resume is provider-valid by construction: any transcript, any window, every provider.

Transcripts are generated with concurrent replies (adjacent same-role turns), parallel
tool calls, interrupted calls (no result), results that answer nothing or arrive late,
retractions (turns missing from the middle), whitespace-only and empty content, and
thinking / reasoning blocks from each provider. Each output must have zero violations
under our checker and validate against the official SDK request types.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from sdk import sdk_errors

from conftest import IN_CI
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.errors import NoUserTurnError
from convgraph.projections import repair as repair_module
from convgraph.projections import validity
from convgraph.projections.message import Message, messages_of
from convgraph.projections.repair import repair
from convgraph.projections.resume import PROVIDERS, to_provider
from convgraph.projections.transcript import window_of
from convgraph.projections.turn import Role, ToolCall, Turn

CALL_IDS = ["call_1", "call_2", "call_3", "toolu_4"]
THINKING = {"type": "thinking", "thinking": "let me think", "signature": "RXFzaWduYXR1cmU="}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"}
THOUGHT = {"type": "thought", "thought": True, "text": "pondering", "thought_signature": b"\x01sig"}
# what each provider's recorder puts before an answer: its own opaque blocks, in its order
OWN_OPAQUE: dict[str | None, list[list[dict[str, Any]]]] = {
    "anthropic": [[THINKING], [REDACTED], [REDACTED, THINKING]],
    "openai-responses": [[REASONING]],
    "gemini": [[THOUGHT]],
    "openai": [[]],
    None: [[]],
}

texts = st.sampled_from(["yes", "no", "", "  ", "\n", "a longer answer", "ok "])
text_content = st.builds(lambda t: [{"type": "text", "text": t}], texts) | texts.map(lambda t: [t])


@st.composite
def device_turns(draw: st.DrawFn, device: int, hlcs: st.SearchStrategy[int]) -> list[Turn]:
    """One device's turns: replies, tool calls (some never answered), results (some for no
    call), and assistant turns recorded from any provider, its opaque blocks first (as the
    providers return them) or, now and then, another provider's."""
    out: list[Turn] = []
    for i in range(draw(st.integers(0, 9))):
        role = draw(st.sampled_from([Role.USER, Role.ASSISTANT, Role.ASSISTANT, Role.TOOL, Role.TOOL]))
        content: list[dict[str, Any]] = [{"type": "text", "text": t} for t in draw(st.lists(texts, max_size=2))]
        calls: tuple[ToolCall, ...] = ()
        provider = None
        use_id = None
        if role is Role.ASSISTANT:
            ids = draw(st.lists(st.sampled_from(CALL_IDS), max_size=3))
            calls = tuple(ToolCall(c, "lookup", {"q": c}) for c in ids)
            provider = draw(st.sampled_from([None, "anthropic", "anthropic", "openai-responses", "openai", "gemini"]))
            opaque = draw(st.sampled_from(OWN_OPAQUE[provider]) | st.lists(
                st.sampled_from([THINKING, REDACTED, REASONING, THOUGHT]), max_size=2))
            content = [*opaque, *content]
        elif role is Role.TOOL:
            use_id = draw(st.sampled_from([*CALL_IDS, "nothing"]))
        out.append(Turn(op=CID.of_record(b"%d/%d" % (device, i)), role=role, content=tuple(content),
                        tool_calls=calls, tool_use_id=use_id,
                        is_error=draw(st.booleans()) if role is Role.TOOL else False,
                        author=bytes([device]) * 32, hlc=Hlc(draw(hlcs), device), provider=provider))
    return out


@st.composite
def turns(draw: st.DrawFn) -> list[Turn]:
    """A transcript written by one to three devices at once: their turns interleave in
    canonical (hlc) order, which is what puts two replies or two calls side by side."""
    devices = draw(st.integers(1, 3))
    merged = [t for d in range(devices) for t in draw(device_turns(d, st.integers(1000, 1100)))]
    return sorted(merged, key=lambda t: (t.hlc, t.op))


def cycle_thinking(window: list[Turn], wire_messages: list[Message]) -> tuple[dict[str, Any], ...]:
    """The Anthropic thinking the message opening the current tool cycle must lead with: that
    of the latest of its source turns, recorded by Anthropic, that has any (empty: none)."""
    if len(wire_messages) < 2 or wire_messages[-1].role is not Role.TOOL:
        return ()
    k = len(wire_messages) - 1
    while wire_messages[k].role is Role.TOOL:
        k -= 1
    by_op = {t.op: t for t in window}
    own = [tuple(b for b in by_op[op].content if b.get("type") in ("thinking", "redacted_thinking"))
           for op in wire_messages[k].ops if by_op[op].provider == "anthropic"]
    return next((blocks for blocks in reversed(own) if blocks), ())


def resumes_cleanly(visible: list[Turn], last: int | None) -> list[str]:
    """Every way the resume of `visible` with window `last` is not provider-valid (empty: none)."""
    problems: list[str] = []
    try:
        window = window_of(reversed(visible), last).turns
    except NoUserTurnError:
        if any(t.role is Role.USER and t.text.strip() for t in visible):
            problems.append("NoUserTurnError although a user turn with text is visible")
        return problems
    assert last is None or len(window) >= min(last, len(visible))
    for provider in PROVIDERS:
        wire = to_provider(window, provider)
        thinking: tuple[dict[str, Any], ...] = ()
        if provider == "anthropic":
            thinking = cycle_thinking(window, repair(messages_of(window), provider))
        found = validity.check(provider, wire, thinking=bool(thinking))
        problems += [f"{provider}: {v.rule} at {v.index}" for v in found]
        if thinking:  # the tool cycle keeps its own thinking, byte for byte, first
            opener = next(m for m in reversed(wire) if m["role"] == "assistant")
            if tuple(opener["content"][: len(thinking)]) != thinking:
                problems.append(f"{provider}: the tool cycle lost its thinking")
    return problems


@settings(max_examples=1500 if IN_CI else 200)
@given(history=turns(), data=st.data())
def test_any_transcript_and_any_window_resumes_with_zero_violations(history: list[Turn], data: st.DataObject) -> None:
    retracted = data.draw(st.sets(st.integers(0, max(0, len(history) - 1)), max_size=3), label="retracted")
    visible = [t for i, t in enumerate(history) if i not in retracted]
    last = data.draw(st.none() | st.integers(1, len(visible) + 1), label="last")
    assert resumes_cleanly(visible, last) == []
    try:
        window = window_of(reversed(visible), last).turns
    except NoUserTurnError:
        return
    for provider in PROVIDERS:
        wire = to_provider(window, provider)
        assert wire, provider  # never an empty request
        assert sdk_errors(provider, wire) == [], (provider, wire)


def test_removing_coalescing_from_repair_alone_fails_the_property(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property guards coalescing itself, not only one unit test: without it, some
    generated transcript resumes into a request a provider refuses."""
    monkeypatch.setattr(repair_module, "_coalesce_adjacent", lambda steps, provider: list(steps))
    found = find(turns(), lambda history: resumes_cleanly(history, None) != [],
                 settings=settings(max_examples=5000, database=None, derandomize=True))
    assert resumes_cleanly(found, None) != []


def test_the_seeds_three_writes_resume_with_thinking_first() -> None:
    """The issue's smallest case: a question, an assistant preface, then an Anthropic answer
    with thinking. Coalesced, the thinking leads and the preface follows."""
    t = [
        Turn(CID.of_record(b"1"), Role.USER, ({"type": "text", "text": "go"},)),
        Turn(CID.of_record(b"2"), Role.ASSISTANT, ({"type": "text", "text": "preface"},)),
        Turn(CID.of_record(b"3"), Role.ASSISTANT, (THINKING, {"type": "text", "text": "answer"}), provider="anthropic"),
    ]
    wire = to_provider(t, "anthropic")
    assert wire[1]["content"] == [THINKING, {"type": "text", "text": "preface"}, {"type": "text", "text": "answer"}]
    assert validity.check("anthropic", wire) == []


def test_thinking_of_an_interrupted_call_opens_the_cycle_it_merges_into() -> None:
    """User; assistant with thinking and call t1 never answered; assistant with call t2 (no
    provider tag); result of t2. The merged message keeps the thinking, first."""
    t = [
        Turn(CID.of_record(b"1"), Role.USER, ({"type": "text", "text": "go"},)),
        Turn(CID.of_record(b"2"), Role.ASSISTANT, (THINKING,), (ToolCall("t1", "f", {}),), provider="anthropic"),
        Turn(CID.of_record(b"3"), Role.ASSISTANT, (), (ToolCall("t2", "f", {}),)),
        Turn(CID.of_record(b"4"), Role.TOOL, ({"type": "text", "text": "ok"},), tool_use_id="t2"),
    ]
    wire = to_provider(t, "anthropic")
    assert wire[1]["content"][0] == THINKING
    assert [b["type"] for b in wire[1]["content"]] == ["thinking", "tool_use"]
    assert validity.check("anthropic", wire, thinking=True) == []


def test_a_real_tool_exchange_survives_every_format() -> None:
    t = [
        Turn(CID.of_record(b"1"), Role.USER, ({"type": "text", "text": "weather?"},)),
        Turn(CID.of_record(b"2"), Role.ASSISTANT, ({"type": "text", "text": "checking"},),
             (ToolCall("call_1", "weather", {"city": "Oslo"}), ToolCall("call_2", "weather", {"city": "Rome"}))),
        Turn(CID.of_record(b"3"), Role.TOOL, ({"type": "text", "text": "rain"},), tool_use_id="call_1"),
        Turn(CID.of_record(b"4"), Role.TOOL, ({"type": "text", "text": "sun"},), tool_use_id="call_2"),
        Turn(CID.of_record(b"5"), Role.ASSISTANT, ({"type": "text", "text": "Oslo rain, Rome sun"},)),
    ]
    sizes = {p: len(to_provider(t, p)) for p in PROVIDERS}
    assert sizes == {"anthropic": 4, "openai": 5, "openai-responses": 7, "gemini": 4}
