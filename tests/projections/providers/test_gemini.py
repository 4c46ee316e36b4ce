"""Gemini: record a response, render candidates[0].content back, and render conversations."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from google.genai.types import Content, GenerateContentResponse
from provider_support import checked, messages, sdk_errors, tool, user

from convgraph.projections.message import Message
from convgraph.projections.providers import gemini
from convgraph.projections.turn import Role, ToolCall

SIG = b"\x12\x8a\x01\n\x87\x01\x01\xd1\x9c signed-thought-state"


def response(parts: list[dict[str, Any]], finish: str = "STOP", response_id: str | None = "r1") -> Any:
    return GenerateContentResponse.model_validate({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finish_reason": finish, "index": 0}],
        "model_version": "gemini-3-pro", "response_id": response_id,
        "usage_metadata": {"prompt_token_count": 3, "candidates_token_count": 4},
    })


def own_content(r: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = r.candidates[0].content.model_dump(exclude_none=True)
    return dumped


def fc(name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    return {"function_call": {"name": name, "args": args, **({"id": call_id} if call_id else {})}}


TEXT = [{"text": "Paris."}]
PARALLEL = [{"text": "Checking both."}, {**fc("get_weather", {"city": "Paris"}), "thought_signature": SIG},
            fc("get_weather", {"city": "Rome", "unit": None})]
WITH_IDS = [fc("get_weather", {"city": "Oslo"}, "call-1"), fc("get_time", {"tz": "CET"}, "call-2")]
THOUGHTS = [{"text": "**Planning** a weather lookup.", "thought": True},
            {"text": "Sure.", "thought_signature": SIG}]


@pytest.mark.parametrize("parts", [TEXT, PARALLEL, WITH_IDS, THOUGHTS],
                         ids=["text", "parallel-tools", "call-ids", "thoughts"])
def test_round_trip_gives_back_the_candidate_content(parts: list[dict[str, Any]]) -> None:
    r = response(parts)
    wire = gemini.to_wire(messages([user("hi"), *gemini.record(r)]))
    assert wire[0] == {"role": "user", "parts": [{"text": "hi"}]}
    assert wire[1:] == [own_content(r)]
    assert Content.model_validate(wire[1]) == r.candidates[0].content
    assert sdk_errors("gemini", wire) == []


def test_record_fields() -> None:
    (kind, payload), = checked(gemini.record(response(PARALLEL, "STOP")))
    assert kind == "agent_message"
    assert payload["content"] == [{"type": "text", "text": "Checking both."}]
    assert payload["tool_calls"] == [
        {"id": "r1-1", "name": "get_weather", "input": {"city": "Paris"},
         "meta": {"synthetic_id": True, "thought_signature": SIG}},
        {"id": "r1-2", "name": "get_weather", "input": {"city": "Rome", "unit": None},
         "meta": {"synthetic_id": True}},
    ]
    assert (payload["provider"], payload["model"], payload["stop_reason"]) == ("gemini", "gemini-3-pro", "STOP")


def test_thought_parts_are_thought_blocks_not_text() -> None:
    (_, payload), = checked(gemini.record(response(THOUGHTS)))
    assert payload["content"] == [
        {"type": "thought", "text": "**Planning** a weather lookup.", "thought": True},
        {"type": "text", "text": "Sure.", "thought_signature": SIG},
    ]


def test_dict_forms_match_including_base64_signatures() -> None:
    r = response(PARALLEL)
    assert gemini.record(r.model_dump()) == gemini.record(r)
    assert gemini.record(r.model_dump(mode="json")) == gemini.record(r)  # REST JSON: signature in base64
    assert base64.b64encode(SIG).decode() == r.model_dump(mode="json")["candidates"][0]["content"]["parts"][1][
        "thought_signature"]


def test_no_candidate_records_nothing() -> None:
    assert gemini.record(GenerateContentResponse.model_validate({"prompt_feedback": {"block_reason": "SAFETY"}})) == []


def test_multi_step_tool_conversation() -> None:
    step1 = response(PARALLEL, response_id="r1")
    step2 = response([{"text": "Paris sunny, Rome rain."}], response_id="r2")
    wire = gemini.to_wire(messages([
        user("Paris and Rome?"), *gemini.record(step1), tool("r1-1", "sunny"),
        tool("r1-2", "unknown unit", is_error=True), user("And Oslo?"),
        *gemini.record(step2),
    ]))
    assert wire == [
        {"role": "user", "parts": [{"text": "Paris and Rome?"}]},
        own_content(step1),
        {"role": "user", "parts": [
            {"function_response": {"name": "get_weather", "response": {"result": "sunny"}}},
            {"function_response": {"name": "get_weather", "response": {"error": "unknown unit"}}},
            {"text": "And Oslo?"},
        ]},
        own_content(step2),
    ]
    assert sdk_errors("gemini", wire) == []


def test_function_responses_carry_recorded_ids() -> None:
    wire = gemini.to_wire(messages([
        user("Oslo?"), *gemini.record(response(WITH_IDS)), tool("call-1", "rain"), tool("call-2", "12:00"),
    ]))
    assert wire[2]["parts"] == [
        {"function_response": {"name": "get_weather", "response": {"result": "rain"}, "id": "call-1"}},
        {"function_response": {"name": "get_time", "response": {"result": "12:00"}, "id": "call-2"}},
    ]
    assert sdk_errors("gemini", wire) == []


def test_signatures_and_thoughts_go_only_to_gemini() -> None:
    (_, payload), = gemini.record(response(THOUGHTS + PARALLEL[1:]))
    (m,) = messages([("agent_message", {**payload, "provider": "vertex-proxy"})])
    (got,) = gemini.to_wire([m])
    assert got["parts"] == [{"text": "Sure."}, {"function_call": {"name": "get_weather", "args": {"city": "Paris"}}},
                            {"function_call": {"name": "get_weather", "args": {"city": "Rome", "unit": None}}}]
    assert sdk_errors("gemini", [got]) == []


def test_other_providers_blocks() -> None:
    png = base64.b64encode(b"\x89PNG\r\n").decode()
    wire = gemini.to_wire([
        Message(Role.USER, ({"type": "text", "text": "Look"},
                            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
                            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                            {"type": "input_text", "text": "dropped"})),
        Message(Role.ASSISTANT, ({"type": "thinking", "thinking": "t", "signature": "s"},
                                 {"type": "text", "text": "A cat.", "citations": []},
                                 {"type": "refusal", "refusal": "No more."}),
                (ToolCall("toolu_1", "zoom", {"x": 1}, {"thought_signature": b"not-gemini"}),), provider="anthropic"),
        Message(Role.TOOL, ({"type": "image", "source": {"type": "url", "url": "u"}},), tool_use_id="toolu_1"),
    ])
    assert wire == [
        {"role": "user", "parts": [{"text": "Look"}, {"inline_data": {"mime_type": "image/png", "data": b"\x89PNG\r\n"}}]},
        {"role": "model", "parts": [{"text": "A cat."}, {"text": "No more."},
                                    {"function_call": {"name": "zoom", "args": {"x": 1}, "id": "toolu_1"}}]},
        {"role": "user", "parts": [{"function_response": {
            "name": "zoom", "response": {"result": "(non-text output omitted)"}, "id": "toolu_1"}}]},
    ]
    assert sdk_errors("gemini", wire) == []


def test_an_emptied_model_turn_is_omitted_and_users_merge() -> None:
    wire = gemini.to_wire([
        Message(Role.USER, ({"type": "text", "text": "a"},)),
        Message(Role.ASSISTANT, ({"type": "reasoning", "id": "rs_1", "summary": []},), provider="openai-responses"),
        Message(Role.USER, ({"type": "text", "text": "b"},)),
    ])
    assert wire == [{"role": "user", "parts": [{"text": "a"}, {"text": "b"}]}]
    assert sdk_errors("gemini", wire) == []


def test_synthetic_ids_without_a_response_id_differ_between_responses() -> None:
    first = gemini.record(response([fc("f", {"a": 1})], response_id=None))
    second = gemini.record(response([fc("f", {"a": 2})], response_id=None))
    assert first[0][1]["tool_calls"][0]["id"] != second[0][1]["tool_calls"][0]["id"]
    assert gemini.record(response([fc("f", {"a": 1})], response_id=None)) == first  # deterministic
