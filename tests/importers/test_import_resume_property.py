"""Whatever order of messages a saved log holds (calls never answered, results of no call,
repeated ids, empty texts, system messages anywhere), the imported conversation resumes for
every provider with no violation of its rules, or, when no user turn has text, says so."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph import NoUserTurnError, Replica, import_jsonl
from convgraph.projections.validity import PROVIDERS, check

pytestmark = pytest.mark.usefixtures("product_defaults")

_ids = st.sampled_from(["c1", "c2", "c3"])
_texts = st.sampled_from(["", " ", "hi", "ok\n", "x y"])
_names = st.sampled_from(["f", "g"])

_chat_call = st.builds(lambda i, n: {"id": i, "type": "function", "function": {"name": n, "arguments": '{"a": 1}'}},
                       _ids, _names)
_chat = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, _texts),
    st.builds(lambda t, cs: {"role": "assistant", "content": t, **({"tool_calls": cs} if cs else {})},
              st.one_of(st.none(), _texts), st.lists(_chat_call, max_size=2)),
    st.builds(lambda i, t: {"role": "tool", "tool_call_id": i, "content": t}, _ids, _texts),
    st.builds(lambda t: {"role": "system", "content": t}, _texts),
)
_text_block = st.builds(lambda t: {"type": "text", "text": t}, _texts)
_anthropic = st.one_of(
    st.builds(lambda c: {"role": "user", "content": c}, st.one_of(_texts, st.lists(st.one_of(
        _text_block,
        st.builds(lambda i, t, e: {"type": "tool_result", "tool_use_id": i, "content": t,
                                   **({"is_error": True} if e else {})}, _ids, _texts, st.booleans())),
        max_size=3))),
    st.builds(lambda c: {"role": "assistant", "content": c}, st.one_of(_texts, st.lists(st.one_of(
        _text_block,
        st.builds(lambda i, n: {"type": "tool_use", "id": i, "name": n, "input": {"a": 1}}, _ids, _names)),
        max_size=3))),
)
_responses = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, _texts),
    st.builds(lambda t: {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]},
              _texts),
    st.builds(lambda i, n: {"type": "function_call", "call_id": i, "name": n, "arguments": '{"a": 1}'}, _ids, _names),
    st.builds(lambda i, t: {"type": "function_call_output", "call_id": i, "output": t}, _ids, _texts),
    st.builds(lambda t: {"role": "developer", "content": t}, _texts),
)


def _resumes_or_has_no_user_text(items: list[Any], fmt: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "log.json"
        path.write_text(json.dumps(items), "utf-8")
        replica = Replica.in_memory()
        conv = import_jsonl(replica, path, fmt=fmt).conv
        spoken = any(t.role.value == "user" and t.text.strip() for t in replica.transcript(conv))
        for provider in PROVIDERS:
            if not spoken:
                with pytest.raises(NoUserTurnError):
                    replica.resume(conv, provider)
                continue
            wire = replica.resume(conv, provider)
            assert check(provider, wire) == [], (provider, items, wire)


@settings(max_examples=300 if IN_CI else 80, deadline=None)
@given(st.lists(_chat, min_size=1, max_size=8))
def test_any_chat_log_resumes_for_every_provider(items: list[Any]) -> None:
    _resumes_or_has_no_user_text(items, "openai-chat")


@settings(max_examples=300 if IN_CI else 80, deadline=None)
@given(st.lists(_anthropic, min_size=1, max_size=8))
def test_any_anthropic_log_resumes_for_every_provider(items: list[Any]) -> None:
    _resumes_or_has_no_user_text(items, "anthropic")


@settings(max_examples=300 if IN_CI else 80, deadline=None)
@given(st.lists(_responses, min_size=1, max_size=8))
def test_any_responses_log_resumes_for_every_provider(items: list[Any]) -> None:
    _resumes_or_has_no_user_text(items, "openai-responses")
