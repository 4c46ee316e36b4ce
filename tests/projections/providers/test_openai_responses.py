"""OpenAI Responses: record a response, render its output back as input items, and conversations."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.responses import Response
from provider_support import checked, messages, sdk_errors, tool, user

from convgraph.projections.message import Message
from convgraph.projections.providers import openai_responses
from convgraph.projections.turn import Role, ToolCall

ENCRYPTED = "gAAAAABoM1x-encrypted-reasoning-state=="


def response(output: list[dict[str, Any]], **extra: Any) -> Response:
    return Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 1_700_000_000, "model": "gpt-5",
        "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
        "tools": [], **extra,
    })


def own_items(r: Response) -> list[dict[str, Any]]:
    """The response's output items as input items."""
    return [item.model_dump(exclude_none=True, by_alias=True) for item in r.output]


def message(text: str, item_id: str = "msg_1", **extra: Any) -> dict[str, Any]:
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed", **extra,
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def reasoning(item_id: str = "rs_1") -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "encrypted_content": ENCRYPTED,
            "summary": [{"type": "summary_text", "text": "**Planning** the lookup."}]}


def call(call_id: str, arguments: str, item_id: str) -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": "get_weather",
            "arguments": arguments, "status": "completed"}


TEXT = [message("Paris.", phase="final_answer")]
PARALLEL = [message("Looking up both."), call("call_a", '{"city": "Paris"}', "fc_a"),
            call("call_b", '{"city":"Rome"}', "fc_b")]
REASONING_CALL = [reasoning(), call("call_r", '{"city":"Oslo"}', "fc_r")]
REASONING_TEXT = [reasoning(), {
    **message("See [1].", item_id="msg_2"),
    "content": [{"type": "output_text", "text": "See [1].", "annotations": [
        {"type": "url_citation", "start_index": 4, "end_index": 7, "title": "Src", "url": "https://x.org"}]},
        {"type": "output_text", "text": " Done.", "annotations": []}],
}]
MALFORMED = [call("call_m", '{"city": ', "fc_m")]
SERVER_TOOL = [reasoning(), {"type": "web_search_call", "id": "ws_1", "status": "completed",
                             "action": {"type": "search", "query": "weather"}}, message("Sunny.")]


@pytest.mark.parametrize("output", [TEXT, PARALLEL, REASONING_CALL, REASONING_TEXT, MALFORMED, SERVER_TOOL],
                         ids=["text", "parallel-tools", "reasoning-call", "reasoning-text", "malformed", "server-tool"])
def test_round_trip_gives_back_the_output_items(output: list[dict[str, Any]]) -> None:
    r = response(output)
    wire = openai_responses.to_wire(messages([user("hi"), *openai_responses.record(r)]))
    assert wire[0] == {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    assert wire[1:] == own_items(r)
    assert sdk_errors("openai-responses", wire) == []


def test_record_fields() -> None:
    (kind, payload), = checked(openai_responses.record(response(REASONING_CALL + MALFORMED)))
    assert kind == "agent_message"
    assert payload["content"] == [reasoning()]  # kept whole
    assert payload["tool_calls"] == [
        {"id": "call_r", "name": "get_weather", "input": {"city": "Oslo"},
         "meta": {"arguments": '{"city":"Oslo"}', "item_id": "fc_r", "item": {"status": "completed"}}},
        {"id": "call_m", "name": "get_weather", "input": {},
         "meta": {"arguments": '{"city": ', "item_id": "fc_m", "item": {"status": "completed"}}},
    ]
    assert (payload["provider"], payload["model"], payload["stop_reason"]) == ("openai-responses", "gpt-5", "completed")


def test_text_is_recorded_as_text_blocks() -> None:
    (_, payload), = openai_responses.record(response(TEXT))
    assert payload["content"] == [{"type": "text", "text": "Paris.", "annotations": [], "meta": {
        "item_id": "msg_1", "item": {"status": "completed", "phase": "final_answer"}}}]


def test_incomplete_response_reports_why_and_dict_form_matches() -> None:
    r = response(TEXT, status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    (_, payload), = openai_responses.record(r)
    assert payload["stop_reason"] == "max_output_tokens"
    assert openai_responses.record(r.model_dump()) == openai_responses.record(r)


def test_multi_step_tool_conversation() -> None:
    step1 = response(REASONING_CALL)
    step2 = response([reasoning("rs_2"), message("Oslo: rain.", item_id="msg_9")])
    wire = openai_responses.to_wire(messages([
        user("Oslo weather?"), *openai_responses.record(step1), tool("call_r", "4C, rain"),
        *openai_responses.record(step2), user("Thanks"),
    ]))
    assert wire == [
        {"role": "user", "content": [{"type": "input_text", "text": "Oslo weather?"}]},
        *own_items(step1),
        {"type": "function_call_output", "call_id": "call_r", "output": "4C, rain"},
        *own_items(step2),
        {"role": "user", "content": [{"type": "input_text", "text": "Thanks"}]},
    ]
    assert sdk_errors("openai-responses", wire) == []


def test_reasoning_goes_only_to_its_own_provider() -> None:
    (_, payload), = openai_responses.record(response(REASONING_CALL))
    (m,) = messages([("agent_message", {**payload, "provider": "openai"})])
    assert [i["type"] for i in openai_responses.to_wire([m])] == ["function_call"]
    foreign = Message(Role.ASSISTANT, ({"type": "thinking", "thinking": "t", "signature": "s"},
                                       {"type": "text", "text": "Hi "}, {"type": "text", "text": "there."}),
                      provider="anthropic")
    wire = openai_responses.to_wire([foreign])
    assert wire == [{"type": "message", "role": "assistant", "content": "Hi there."}]
    assert sdk_errors("openai-responses", wire) == []


def test_reasoning_with_nothing_after_it_is_dropped() -> None:
    only = Message(Role.ASSISTANT, (reasoning(),), provider="openai-responses")
    trailing = Message(Role.ASSISTANT, (reasoning("rs_0"), reasoning("rs_a"), {"type": "text", "text": "ok"},
                                        reasoning("rs_b")),
                       provider="openai-responses")
    wire = openai_responses.to_wire([Message(Role.USER, ({"type": "text", "text": "a"},)), only,
                                     Message(Role.USER, ({"type": "text", "text": "b"},)), trailing])
    assert wire == [
        {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        reasoning("rs_a"),
        {"type": "message", "role": "assistant", "content": "ok"},
    ]
    assert sdk_errors("openai-responses", wire) == []


def test_user_images_and_tool_outputs() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}
    wire = openai_responses.to_wire([
        Message(Role.USER, ({"type": "text", "text": "this?"}, image, {"type": "thought", "text": "x"})),
        Message(Role.ASSISTANT, (), (ToolCall("c1", "f", {"a": 1}), ToolCall("c2", "g", {}))),
        Message(Role.TOOL, (image,), tool_use_id="c1"),
        Message(Role.TOOL, ({"type": "text", "text": "a"}, {"type": "text", "text": "b"}), tool_use_id="c2"),
    ])
    assert wire[0]["content"][1] == {"type": "input_image", "image_url": "https://example.com/cat.png",
                                     "detail": "auto"}
    assert len(wire[0]["content"]) == 2
    assert wire[1] == {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a":1}'}
    assert wire[3]["output"] == "(non-text output omitted)"
    assert wire[4]["output"] == [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]
    assert sdk_errors("openai-responses", wire) == []
