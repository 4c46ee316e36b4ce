"""The whole request (`projections/request.py`): any window of any transcript, with or without a
system prompt, becomes kwargs each provider's checker and SDK call-parameter type accept, with
the prompt in that provider's place and nowhere else."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sdk import request_errors
from test_resume import turns

from conftest import IN_CI
from convgraph.errors import NoUserTurnError, ProjectionError
from convgraph.projections.request import HISTORY_KEYS, check_request, system_of_request, to_request
from convgraph.projections.resume import PROVIDERS, to_provider
from convgraph.projections.transcript import window_of
from convgraph.projections.turn import Turn

PROMPTS = st.none() | st.sampled_from(["", "You are terse.", "Réponds en français.\nToujours.", " "])


@settings(max_examples=600 if IN_CI else 80, deadline=None)
@given(history=turns(), prompt=PROMPTS, last=st.none() | st.integers(1, 8))
def test_any_window_and_prompt_make_a_valid_request_for_every_provider(
    history: list[Turn], prompt: str | None, last: int | None
) -> None:
    try:
        window = window_of(reversed(history), last).turns
    except NoUserTurnError:
        return
    for provider in PROVIDERS:
        wire = to_provider(window, provider)
        request = to_request(provider, wire, prompt)
        assert check_request(provider, request) == [], (provider, request)
        assert request_errors(provider, request) == [], (provider, request)
        assert system_of_request(provider, request) == (prompt if prompt and prompt.strip() else None)
        history_key = HISTORY_KEYS[provider]
        placed = system_of_request(provider, request) is not None
        sent = request[history_key][1:] if provider == "openai" and placed else request[history_key]
        assert sent == wire  # the history is the resume, untouched
        if not placed:
            assert list(request) == [history_key]


def test_to_request_copies_the_messages_and_refuses_an_unknown_provider() -> None:
    wire: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    request = to_request("openai", wire, "sys")
    request["messages"][1]["content"] = "changed"
    assert wire == [{"role": "user", "content": "hi"}]
    with pytest.raises(ProjectionError):
        to_request("mistral", wire, None)
    with pytest.raises(ProjectionError):
        check_request("mistral", {})


def test_check_request_reads_thinking_from_an_anthropic_body() -> None:
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "1"}]}
    body = {"messages": [{"role": "user", "content": "go"}, call, result]}
    assert check_request("anthropic", body) == []
    assert check_request("anthropic", {**body, "thinking": {"type": "enabled", "budget_tokens": 1024}})
    assert check_request("anthropic", {"messages": "hi"}) == ["'messages' must be a list of messages"]


def test_check_request_counts_positions_in_the_list_sent() -> None:
    system = {"role": "system", "content": "x"}
    body = {"messages": [system, {"role": "user", "content": "hi"}, system]}
    assert check_request("openai", body) == ["messages[2] is a system message; the system prompt goes in messages[0]"]
