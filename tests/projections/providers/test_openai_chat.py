"""OpenAI Chat Completions: record a completion, render it back, and render conversations."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from provider_support import assistant, checked, messages, sdk_errors, tool, user

from convgraph.projections.message import Message
from convgraph.projections.providers import openai_chat
from convgraph.projections.turn import Role, ToolCall


def completion(message: dict[str, Any], finish: str = "stop") -> ChatCompletion:
    return ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4.1",
        "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                     "message": {"role": "assistant", "refusal": None, **message}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    })


def own_param(c: ChatCompletion) -> dict[str, Any]:
    """`choices[0].message` as an assistant message param."""
    msg = c.choices[0].message
    param: dict[str, Any] = {"role": "assistant", "content": msg.content}
    if msg.refusal is not None:
        param["refusal"] = msg.refusal
    if msg.tool_calls:
        param["tool_calls"] = [tc.model_dump(exclude_none=True) for tc in msg.tool_calls]
    return param


def fn(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


TEXT = {"content": "Paris."}
PARALLEL = {"content": None, "tool_calls": [
    fn("call_a", "get_weather", '{"city": "Paris"}'),  # spacing kept: the model's own bytes
    fn("call_b", "get_weather", '{"city":"Rome","unit":null}'),
]}
MALFORMED = {"content": "Trying.", "tool_calls": [
    fn("call_x", "search", '{"q": "unterminated'),
    fn("call_y", "search", '["not", "an", "object"]'),
    fn("call_z", "search", '{"x": NaN}'),
]}
REFUSAL = {"content": None, "refusal": "I can't help with that."}
CUSTOM = {"content": None, "tool_calls": [
    {"id": "call_c", "type": "custom", "custom": {"name": "shell", "input": "ls -la"}},
]}


@pytest.mark.parametrize("message", [TEXT, PARALLEL, MALFORMED, REFUSAL, CUSTOM],
                         ids=["text", "parallel-tools", "malformed-arguments", "refusal", "custom-tool"])
def test_round_trip_gives_back_the_assistant_message(message: dict[str, Any]) -> None:
    c = completion(message, "tool_calls" if "tool_calls" in message else "stop")
    wire = openai_chat.to_wire(messages([user("hi"), *openai_chat.record(c)]))
    assert wire[0] == {"role": "user", "content": "hi"}
    assert wire[1:] == [own_param(c)]
    assert sdk_errors("openai", wire) == []


def test_malformed_arguments_keep_their_raw_string_and_get_an_empty_input() -> None:
    (_, payload), = checked(openai_chat.record(completion(MALFORMED, "tool_calls")))
    assert [(c["input"], c["meta"]["arguments"]) for c in payload["tool_calls"]] == [
        ({}, '{"q": "unterminated'), ({}, '["not", "an", "object"]'), ({}, '{"x": NaN}'),
    ]


def test_record_fields() -> None:
    (kind, payload), = checked(openai_chat.record(completion(PARALLEL, "tool_calls")))
    assert kind == "agent_message"
    assert payload["content"] == []
    assert payload["tool_calls"][1] == {"id": "call_b", "name": "get_weather", "input": {"city": "Rome", "unit": None},
                                        "meta": {"arguments": '{"city":"Rome","unit":null}'}}
    assert (payload["provider"], payload["model"], payload["stop_reason"]) == ("openai", "gpt-4.1", "tool_calls")


def test_record_takes_the_first_choice_and_accepts_dicts() -> None:
    c = completion(TEXT)
    assert openai_chat.record(c.model_dump()) == openai_chat.record(c)
    assert openai_chat.record({"id": "x", "choices": []}) == []


def test_multi_step_tool_conversation() -> None:
    step1 = completion(PARALLEL, "tool_calls")
    step2 = completion({"content": "Paris sunny, Rome rainy."})
    wire = openai_chat.to_wire(messages([
        user("Paris and Rome?"), *openai_chat.record(step1),
        tool("call_a", "sunny"), tool("call_b", "rain", is_error=True), *openai_chat.record(step2), user("Thanks"),
    ]))
    assert wire == [
        {"role": "user", "content": "Paris and Rome?"},
        own_param(step1),
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
        own_param(step2),
        {"role": "user", "content": "Thanks"},
    ]
    assert sdk_errors("openai", wire) == []


def test_opaque_and_foreign_blocks_are_dropped() -> None:
    thinking = assistant([("agent_message", {
        "role": "assistant", "provider": "anthropic",
        "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "redacted_thinking", "data": "d"},
                    {"type": "text", "text": "Answer.", "citations": []}],
        "tool_calls": [{"id": "toolu_1", "name": "f", "input": {"b": 2, "a": 1}}],
    })])
    wire = openai_chat.to_wire([thinking])
    assert wire == [{"role": "assistant", "content": "Answer.", "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1,"b":2}'}}]}]
    only_reasoning = Message(Role.ASSISTANT, ({"type": "reasoning", "id": "rs_1", "summary": []},),
                             provider="openai-responses")
    merged = openai_chat.to_wire([Message(Role.USER, ({"type": "text", "text": "a"},)), only_reasoning,
                                  Message(Role.USER, ({"type": "text", "text": "b"},))])
    assert merged == [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert sdk_errors("openai", wire + merged) == []


def test_user_images_become_image_url_parts_and_unknown_blocks_drop() -> None:
    blocks = (
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {"type": "image", "source": {"type": "file", "file_id": "file_anthropic_only"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}},
    )
    (got,) = openai_chat.to_wire([Message(Role.USER, blocks)])
    assert got["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    ]
    assert sdk_errors("openai", [got]) == []


def test_tool_messages_carry_text_only() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    wire = openai_chat.to_wire([
        Message(Role.USER, ({"type": "text", "text": "go"},)),
        Message(Role.ASSISTANT, (), (ToolCall("c1", "shot", {}), ToolCall("c2", "two", {}))),
        Message(Role.TOOL, (image,), tool_use_id="c1"),
        Message(Role.TOOL, ({"type": "text", "text": "a"}, {"type": "text", "text": "b"}), tool_use_id="c2"),
    ])
    assert wire[2] == {"role": "tool", "tool_call_id": "c1", "content": "(non-text output omitted)"}
    assert wire[3]["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert sdk_errors("openai", wire) == []
