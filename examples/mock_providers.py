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
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import httpx2

from convgraph.projections.request import check_request

if TYPE_CHECKING:  # each SDK is imported by its client alone: an example pays for the one it uses
    import anthropic
    import openai

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


def respond(provider: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The status and JSON the mock answers `body` with, as `provider`'s API would."""
    _log(provider, body)
    problems = check_request(provider, body) + (_thinking_intact(body) if provider == "anthropic" else [])
    if problems:
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": problems[0]}}
    answer = {"anthropic": _anthropic_answer, "openai": _chat_answer, "openai-responses": _responses_answer}
    return 200, answer[provider](body)


def provider_of(path: str) -> str | None:
    """Which API a request path belongs to (None: not one the mock serves)."""
    if path.endswith("/v1/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "openai-responses"
    return "openai" if path.endswith("/chat/completions") else None


def _handle(request: httpx2.Request) -> httpx2.Response:
    provider = provider_of(request.url.path)
    if provider is None:
        return httpx2.Response(404, json={"error": {"message": f"no mock for {request.url.path}"}})
    status, answer = respond(provider, json.loads(request.content))
    return httpx2.Response(status, json=answer)


def transport() -> httpx2.MockTransport:
    """The mock as an `httpx2` transport: pass `httpx2.Client(transport=transport())` to an SDK."""
    return httpx2.MockTransport(_handle)


def serve(port: int = 0) -> ThreadingHTTPServer:
    """The mock on a real HTTP server at 127.0.0.1 (in a daemon thread): point an SDK at it with
    `ANTHROPIC_BASE_URL=http://127.0.0.1:PORT` or `OPENAI_BASE_URL=http://127.0.0.1:PORT/v1`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            provider = provider_of(self.path.split("?")[0])
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            status, answer = respond(provider, body) if provider else (404, {"error": {"message": self.path}})
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


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
    thinks = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled"
    if results:
        data = json.loads(results[-1]["content"][0]["text"])
        thought = f"The tool says {data['sky']}; answer briefly as the system prompt asks."
        content = [{"type": "text", "text": f"{data['city']}: {data['temp_c']} °C and {data['sky']}."}]
        stop = "end_turn"
    else:
        question = json.dumps(last)
        thought = "The user asks about the weather; I should call get_weather."
        content = [{"type": "tool_use", "id": f"toolu_{n:02d}", "name": "get_weather",
                    "input": {"city": _city(question)}}]
        stop = "tool_use"
    if thinks:
        content.insert(0, {"type": "thinking", "thinking": thought, "signature": _signature(thought)})
    return {"id": f"msg_{n:02d}", "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10 * n, "output_tokens": 20}}


def anthropic_client() -> anthropic.Anthropic:
    """`anthropic.Anthropic` answering offline (see the module docstring)."""
    import anthropic  # noqa: PLC0415 - see the TYPE_CHECKING import

    client = httpx2.Client(transport=transport())
    return anthropic.Anthropic(api_key="offline", max_retries=0, http_client=client)


# ---------------------------------------------------------------- OpenAI Responses


def _responses_answer(body: dict[str, Any]) -> dict[str, Any]:
    items = body["input"]
    n = len(items)
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    reasoning = {"type": "reasoning", "id": f"rs_{n:02d}", "summary": [],
                 "encrypted_content": f"gAAAAB-mock-{n}"}
    if outputs and items[-1].get("type") == "function_call_output":
        data = json.loads(outputs[-1]["output"])
        text = f"{data['city']}: {data['temp_c']} °C and {data['sky']}."
        output = [reasoning, {"type": "message", "id": f"msg_{n:02d}", "role": "assistant",
                              "status": "completed",
                              "content": [{"type": "output_text", "annotations": [], "text": text}]}]
    else:
        output = [reasoning, {"type": "function_call", "id": f"fc_{n:02d}", "call_id": f"call_{n:02d}",
                              "name": "get_weather", "status": "completed",
                              "arguments": json.dumps({"city": _city(json.dumps(items[-1]))})}]
    return {"id": f"resp_{n:02d}", "object": "response", "created_at": 1_700_000_000, "model": body["model"],
            "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": body.get("tools", [])}


def openai_client() -> openai.OpenAI:
    """`openai.OpenAI` answering offline, Responses and Chat Completions alike."""
    import openai  # noqa: PLC0415 - see the TYPE_CHECKING import

    client = httpx2.Client(transport=transport())
    return openai.OpenAI(api_key="offline", max_retries=0, http_client=client)


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
        arguments = json.dumps({"city": _city(json.dumps(last))})
        call = {"id": f"call_{n:02d}", "type": "function",
                "function": {"name": "get_weather", "arguments": arguments}}
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return {"id": f"chatcmpl-{n:02d}", "object": "chat.completion", "created": 1_700_000_000,
            "model": body["model"], "choices": [{"index": 0, "finish_reason": finish, "message": message}]}


if __name__ == "__main__":  # serve the mock: python examples/mock_providers.py [PORT]
    mock = serve(int(sys.argv[1]) if len(sys.argv) > 1 else 8765)
    print(f"mock provider APIs at http://127.0.0.1:{mock.server_address[1]} (Ctrl-C stops)", flush=True)
    threading.Event().wait()
