"""Anthropic Messages: record a response, render it back, and render whole conversations."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message as AnthropicMessage
from provider_support import assistant, checked, messages, sdk_errors, tool, user

from convgraph.projections.message import Message
from convgraph.projections.providers import anthropic
from convgraph.projections.turn import Role, ToolCall

SIGNATURE = "EqQBCkYIARgCKkD3s9f+Ux7cG0/signed+thinking=="


def response(content: list[dict[str, Any]], stop: str = "end_turn") -> AnthropicMessage:
    return AnthropicMessage.model_validate({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 34},
    })


def own_param(r: AnthropicMessage) -> dict[str, Any]:
    """The SDK's own assistant-message form of a response: its content blocks as dicts."""
    return {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]}


def roundtrip(r: AnthropicMessage) -> dict[str, Any]:
    wire = anthropic.to_wire(messages([user("hi"), *anthropic.record(r)]))
    assert wire[0] == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert len(wire) == 2
    return wire[1]


TEXT = [{"type": "text", "text": "Paris is the capital of France."}]
PARALLEL = [
    {"type": "text", "text": "Checking both cities."},
    {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris", "days": 2}},
    {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {"city": "Rome", "unit": None}},
]
THINKING = [
    {"type": "thinking", "thinking": "The user wants weather; call the tool.", "signature": SIGNATURE},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
    {"type": "text", "text": "Let me look.", "citations": None},
    {"type": "tool_use", "id": "toolu_01C", "name": "get_weather", "input": {"city": "Oslo"},
     "caller": {"type": "direct"}},
]


@pytest.mark.parametrize("content", [TEXT, PARALLEL, THINKING], ids=["text", "parallel-tools", "thinking"])
def test_round_trip_gives_back_the_assistant_message(content: list[dict[str, Any]]) -> None:
    r = response(content, "tool_use" if len(content) > 1 else "end_turn")
    got = roundtrip(r)
    assert got == own_param(r)
    assert sdk_errors("anthropic", [got]) == []


def test_thinking_blocks_are_kept_byte_for_byte_and_in_order() -> None:
    (kind, payload), = checked(anthropic.record(response(THINKING, "tool_use")))
    assert kind == "agent_message"
    assert payload["content"][:2] == [
        {"type": "thinking", "thinking": "The user wants weather; call the tool.", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
    ]
    assert payload["content"][2] == {"type": "text", "text": "Let me look."}  # None-valued keys stripped
    assert payload["tool_calls"] == [{"id": "toolu_01C", "name": "get_weather", "input": {"city": "Oslo"},
                                      "meta": {"tool_use": {"caller": {"type": "direct"}}}}]
    assert (payload["provider"], payload["model"], payload["stop_reason"]) == (
        "anthropic", "claude-sonnet-4-5", "tool_use")
    assert payload["meta"] == {"response_id": "msg_01"}


def test_tool_input_nulls_are_data_and_kept() -> None:
    (_, payload), = anthropic.record(response(PARALLEL, "tool_use"))
    assert payload["tool_calls"][1]["input"] == {"city": "Rome", "unit": None}


def test_record_accepts_the_dict_form() -> None:
    r = response(THINKING, "tool_use")
    assert anthropic.record(r.model_dump()) == anthropic.record(r)


def test_multi_step_tool_conversation() -> None:
    step1 = response(THINKING, "tool_use")
    step2 = response([{"type": "text", "text": "Oslo: 4°C and rain."}])
    conversation = messages([
        user("Weather in Oslo?"), *anthropic.record(step1), tool("toolu_01C", "4C, rain"),
        *anthropic.record(step2), user("Thanks! And tomorrow?"),
    ])
    wire = anthropic.to_wire(conversation)
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
        own_param(step1),
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01C", "content": [{"type": "text", "text": "4C, rain"}]},
        ]},
        own_param(step2),
        {"role": "user", "content": [{"type": "text", "text": "Thanks! And tomorrow?"}]},
    ]
    assert sdk_errors("anthropic", wire) == []


def test_tool_results_then_the_next_user_message_share_one_user_message() -> None:
    r = response(PARALLEL, "tool_use")
    conversation = messages([
        user("Paris and Rome?"), *anthropic.record(r),
        tool("toolu_01A", "sunny"), tool("toolu_01B", "no such unit", is_error=True), user("Also Oslo?"),
    ])
    wire = anthropic.to_wire(conversation)
    assert [w["role"] for w in wire] == ["user", "assistant", "user"]
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01A", "content": [{"type": "text", "text": "sunny"}]},
        {"type": "tool_result", "tool_use_id": "toolu_01B", "content": [{"type": "text", "text": "no such unit"}],
         "is_error": True},
        {"type": "text", "text": "Also Oslo?"},
    ]
    assert sdk_errors("anthropic", wire) == []


def test_opaque_blocks_of_another_provider_are_dropped() -> None:
    (_, payload), = anthropic.record(response(THINKING, "tool_use"))
    m = assistant([("agent_message", {**payload, "provider": "openai-responses"})])
    reasoning = Message(Role.ASSISTANT, ({"type": "reasoning", "id": "rs_1", "summary": []},
                                         {"type": "text", "text": "ok"}), provider="openai-responses")
    got = anthropic.to_wire([m, reasoning])
    assert [b["type"] for b in got[0]["content"]] == ["text", "tool_use", "text"]  # one merged assistant
    assert sdk_errors("anthropic", got) == []


def test_a_message_left_empty_is_omitted_and_its_neighbours_merge() -> None:
    only_thinking = Message(Role.ASSISTANT, ({"type": "thinking", "thinking": "x", "signature": "s"},),
                            provider="other")
    wire = anthropic.to_wire([Message(Role.USER, ({"type": "text", "text": "a"},)), only_thinking,
                              Message(Role.USER, ({"type": "text", "text": "b"},))])
    assert wire == [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert sdk_errors("anthropic", wire) == []


def test_foreign_blocks_are_dropped_and_text_keeps_only_anthropic_keys() -> None:
    m = Message(Role.ASSISTANT, (
        {"type": "thought", "text": "gemini thinking", "thought": True},
        {"type": "text", "text": "hello", "thought_signature": b"sig", "annotations": []},
        {"type": "refusal", "refusal": "I can't do that."},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
    ), provider="gemini")
    (got,) = anthropic.to_wire([m])
    assert got["content"] == [
        {"type": "text", "text": "hello"},
        {"type": "text", "text": "I can't do that."},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
    ]
    assert sdk_errors("anthropic", [got]) == []


def test_tool_result_keeps_images_drops_what_it_cannot_hold() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    call = ToolCall("toolu_9", "screenshot", {})
    wire = anthropic.to_wire([
        Message(Role.USER, ({"type": "text", "text": "look"},)),
        Message(Role.ASSISTANT, (), (call,)),
        Message(Role.TOOL, (image,), tool_use_id="toolu_9"),
        Message(Role.TOOL, ({"type": "reasoning", "id": "rs"},), tool_use_id="toolu_9"),
    ])
    assert wire[2]["content"][0]["content"] == [image]
    assert wire[2]["content"][1]["content"] == [{"type": "text", "text": "(non-text output omitted)"}]
    assert wire[1]["content"] == [{"type": "tool_use", "id": "toolu_9", "name": "screenshot", "input": {}}]
    assert sdk_errors("anthropic", wire) == []


def test_to_wire_does_not_share_block_objects_with_its_input() -> None:
    block = {"type": "text", "text": "hi"}
    (got,) = anthropic.to_wire([Message(Role.USER, (block,))])
    got["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert block == {"type": "text", "text": "hi"}
