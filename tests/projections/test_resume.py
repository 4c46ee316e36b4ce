"""Resume is provider-valid by construction: any transcript, any window, every provider.

Transcripts are generated with concurrent replies (adjacent same-role turns), parallel
tool calls, interrupted calls (no result), results that answer nothing or arrive late,
retractions (turns missing from the middle), whitespace-only and empty content, and
thinking / reasoning blocks from each provider. Each output must have zero violations
under our checker and validate against the official SDK request types.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sdk import sdk_errors

from conftest import IN_CI
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.projections import validity
from convgraph.projections.resume import PROVIDERS, to_provider
from convgraph.projections.turn import Role, ToolCall, Turn

CALL_IDS = ["call_1", "call_2", "call_3", "toolu_4"]
THINKING = {"type": "thinking", "thinking": "let me think", "signature": "RXFzaWduYXR1cmU="}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"}

texts = st.sampled_from(["yes", "no", "", "  ", "\n", "a longer answer", "ok "])
text_content = st.builds(lambda t: [{"type": "text", "text": t}], texts) | texts.map(lambda t: [t])


@st.composite
def turns(draw: st.DrawFn) -> list[Turn]:
    out: list[Turn] = []
    for i in range(draw(st.integers(0, 14))):
        role = draw(st.sampled_from([Role.USER, Role.ASSISTANT, Role.ASSISTANT, Role.TOOL, Role.TOOL]))
        content: list[dict[str, Any]] = []
        for piece in draw(st.lists(texts, max_size=2)):
            content.append({"type": "text", "text": piece})
        calls: tuple[ToolCall, ...] = ()
        provider = None
        use_id = None
        if role is Role.ASSISTANT:
            ids = draw(st.lists(st.sampled_from(CALL_IDS), max_size=3))
            calls = tuple(ToolCall(c, "lookup", {"q": c}) for c in ids)
            provider = draw(st.sampled_from([None, "anthropic", "openai-responses", "openai", "gemini"]))
            opaque = draw(st.lists(st.sampled_from([THINKING, REDACTED, REASONING]), max_size=2))
            content = [*opaque, *content]
        elif role is Role.TOOL:
            use_id = draw(st.sampled_from([*CALL_IDS, "nothing"]))
        out.append(Turn(op=CID.of_record(b"%d" % i), role=role, content=tuple(content), tool_calls=calls,
                        tool_use_id=use_id, is_error=draw(st.booleans()) if role is Role.TOOL else False,
                        author=b"\x01" * 32, hlc=Hlc(1000 + i, 0), provider=provider))
    return out


@settings(max_examples=1500 if IN_CI else 200)
@given(history=turns(), data=st.data())
def test_any_transcript_and_any_window_resumes_with_zero_violations(history: list[Turn], data: st.DataObject) -> None:
    retracted = data.draw(st.sets(st.integers(0, max(0, len(history) - 1)), max_size=3), label="retracted")
    visible = [t for i, t in enumerate(history) if i not in retracted]
    window = data.draw(st.integers(0, len(visible) + 1), label="last")
    chosen = visible[len(visible) - window :] if window else visible
    for provider in PROVIDERS:
        wire = to_provider(chosen, provider)
        found = validity.check(provider, wire)
        if not wire:  # nothing left to send (no user turn in the window): the caller's new turn goes first
            assert not any(t.role is Role.USER and t.text.strip() for t in chosen)
            found = [v for v in found if v.rule != "empty_list"]
        assert found == [], (provider, wire)
        assert sdk_errors(provider, wire) == [], (provider, wire)


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
