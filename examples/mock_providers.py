"""Offline stand-ins for the Anthropic and OpenAI APIs, behind the official SDKs' own clients.

Each `*_client()` returns the real SDK client (`anthropic.Anthropic`, `openai.OpenAI`) over an
`httpx2.MockTransport` (the HTTP client these SDK versions use), so every request goes through
the SDK's serialization exactly as it would to the real API. The mock answers like a small
weather agent: a first request gets a tool call (with extended thinking / reasoning), a
request whose history ends in the tool's result gets the final answer.

Like the real APIs, it refuses what they refuse: a request whose system prompt is misplaced or
whose history breaks a provider rule (`convgraph.projections.request.check_request`), or whose
thinking block was not replayed byte for byte, gets a 400. With `CONVGRAPH_EXAMPLE_LOG` set,
each request body is appended to that file as one JSON line, so tests can check every request.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import openai

from convgraph.projections.request import check_request

Handler = Callable[[dict[str, Any]], dict[str, Any]]
WEATHER = {"Paris": {"temp_c": 18, "sky": "sunny"}, "Lisbon": {"temp_c": 23, "sky": "clear"}}


def get_weather(city: str) -> dict[str, Any]:
    """The example's one tool."""
    return {"city": city, **WEATHER.get(city, {"temp_c": 15, "sky": "cloudy"})}


def _city(text: str) -> str:
    return next((c for c in WEATHER if c in text), "Oslo")


def _log(provider: str, body: dict[str, Any]) -> None:
    path = os.environ.get("CONVGRAPH_EXAMPLE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"provider": provider, "body": body}) + "\n")


def _handler(
    provider: str, answer: Handler, extra_check: Callable[[dict[str, Any]], list[str]]
) -> Callable[[httpx2.Request], httpx2.Response]:
    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        _log(provider, body)
        problems = check_request(provider, body) + extra_check(body)
        if problems:
            return httpx2.Response(400, json={"error": {"type": "invalid_request_error", "message": problems[0]}})
        return httpx2.Response(200, json=answer(body))

    return handle


# ---------------------------------------------------------------- Anthropic Messages


def _signature(thinking: str) -> str:
    return hashlib.sha256(b"mock-anthropic:" + thinking.encode()).hexdigest()


def _thinking_intact(body: dict[str, Any]) -> list[str]:
    """As the real API: a thinking block sent back must be the one it issued, unchanged."""
    return [f"messages.{i}: thinking block was modified" for i, m in enumerate(body["messages"])
            if isinstance(m["content"], list) for b in m["content"]
            if b.get("type") == "thinking" and b.get("signature") != _signature(b.get("thinking", ""))]


def _anthropic_answer(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]["content"]
    results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(
        last, list) else []
    n = len(body["messages"])
    if results:
        data = json.loads(results[-1]["content"][0]["text"])
        thought = f"The tool says {data['sky']}; answer briefly as the system prompt asks."
        content = [{"type": "thinking", "thinking": thought, "signature": _signature(thought)},
                   {"type": "text", "text": f"{data['city']}: {data['temp_c']} °C and {data['sky']}."}]
        stop = "end_turn"
    else:
        question = json.dumps(last)
        thought = "The user asks about the weather; I should call get_weather."
        content = [{"type": "thinking", "thinking": thought, "signature": _signature(thought)},
                   {"type": "tool_use", "id": f"toolu_{n:02d}", "name": "get_weather",
                    "input": {"city": _city(question)}}]
        stop = "tool_use"
    return {"id": f"msg_{n:02d}", "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10 * n, "output_tokens": 20}}


def anthropic_client() -> anthropic.Anthropic:
    """`anthropic.Anthropic` answering offline (see the module docstring)."""
    handle = _handler("anthropic", _anthropic_answer, _thinking_intact)
    return anthropic.Anthropic(api_key="offline", max_retries=0,
                               http_client=httpx2.Client(transport=httpx2.MockTransport(handle)))


# ---------------------------------------------------------------- OpenAI Responses


def _responses_answer(body: dict[str, Any]) -> dict[str, Any]:
    items = body["input"]
    n = len(items)
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    reasoning = {"type": "reasoning", "id": f"rs_{n:02d}", "summary": [],
                 "encrypted_content": f"gAAAAB-mock-{n}"}
    if outputs and items[-1].get("type") == "function_call_output":
        data = json.loads(outputs[-1]["output"])
        output = [reasoning, {"type": "message", "id": f"msg_{n:02d}", "role": "assistant", "status": "completed",
                              "content": [{"type": "output_text", "annotations": [],
                                           "text": f"{data['city']}: {data['temp_c']} °C and {data['sky']}."}]}]
    else:
        output = [reasoning, {"type": "function_call", "id": f"fc_{n:02d}", "call_id": f"call_{n:02d}",
                              "name": "get_weather", "status": "completed",
                              "arguments": json.dumps({"city": _city(json.dumps(items[-1]))})}]
    return {"id": f"resp_{n:02d}", "object": "response", "created_at": 1_700_000_000, "model": body["model"],
            "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": body.get("tools", [])}


def _no_check(_body: dict[str, Any]) -> list[str]:
    return []


def openai_client() -> openai.OpenAI:
    """`openai.OpenAI` answering offline, Responses and Chat Completions alike."""
    chat = _handler("openai", _chat_answer, _no_check)
    responses = _handler("openai-responses", _responses_answer, _no_check)

    def route(request: httpx2.Request) -> httpx2.Response:
        return (responses if request.url.path.endswith("/responses") else chat)(request)

    return openai.OpenAI(api_key="offline", max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(route)))


# ---------------------------------------------------------------- OpenAI Chat Completions


def _chat_answer(body: dict[str, Any]) -> dict[str, Any]:
    messages = body["messages"]
    n = len(messages)
    last = messages[-1]
    if last["role"] == "tool":
        data = json.loads(last["content"] if isinstance(last["content"], str) else last["content"][0]["text"])
        message: dict[str, Any] = {"role": "assistant",
                                   "content": f"{data['city']}: {data['temp_c']} °C and {data['sky']}."}
        finish = "stop"
    else:
        call = {"id": f"call_{n:02d}", "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": _city(json.dumps(last))})}}
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return {"id": f"chatcmpl-{n:02d}", "object": "chat.completion", "created": 1_700_000_000,
            "model": body["model"], "choices": [{"index": 0, "finish_reason": finish, "message": message}]}
