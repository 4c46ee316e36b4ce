"""ConvgraphSession against the OpenAI Agents SDK's own behaviour, offline.

`agents.Runner` drives a scripted `Model` (canned `ModelResponse`s, no network) with a
function tool for several runs, once on the SDK's own `SQLiteSession` and once on
`ConvgraphSession`: the items each session holds, and what the model was sent, must be
equal. Then pop, clear, a second replica synced from the first, and `resume` for every
provider under the validity checker and the providers' own SDK types.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.memory import Session
from agents.models.interface import Model
from agents.usage import Usage
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from openai.types.responses.response_reasoning_item import ResponseReasoningItem, Summary

from conftest import IN_CI
from convgraph import AdapterError, Replica, sync_replicas
from convgraph.integrations.openai_agents import ConvgraphSession
from convgraph.projections import validity
from convgraph.projections.resume import PROVIDERS

_spec = importlib.util.spec_from_file_location("sdk", Path(__file__).parents[1] / "projections" / "sdk.py")
assert _spec is not None and _spec.loader is not None
sdk = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sdk)

RUN = RunConfig(tracing_disabled=True)


@function_tool
def weather(city: str) -> str:
    """The weather in `city`."""
    return {"Oslo": "rain  ", "Rome": ""}.get(city, "sun")  # trailing and empty output on purpose


def message(i: int, text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=f"msg_{i}", role="assistant", status="completed", type="message",
                                 content=[ResponseOutputText(text=text, annotations=[], type="output_text")])


def call(i: int, city: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=f"fc_{i}", call_id=f"call_{i}", name="weather", type="function_call",
                                    arguments=f'{{"city": "{city}"}}', status="completed")


def reasoning(i: int) -> ResponseReasoningItem:
    return ResponseReasoningItem(id=f"rs_{i}", type="reasoning", encrypted_content=f"gAAAA{i}",
                                 summary=[Summary(text="checking the weather", type="summary_text")])


def script() -> list[list[TResponseOutputItem]]:
    """Three runs: a tool call with reasoning; two parallel calls; a plain answer ending in a space."""
    return [
        [reasoning(1), call(1, "Oslo")],
        [message(2, "Oslo: rain.")],
        [call(3, "Rome"), call(4, "Paris")],
        [reasoning(5), message(5, "Rome is quiet, Paris sunny.")],
        [message(6, "You're welcome ")],
    ]


class ScriptedModel(Model):
    """A `Model` answering from a script, and remembering what it was sent."""

    def __init__(self, outputs: list[list[TResponseOutputItem]]) -> None:
        self.outputs = outputs
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: str | None, input: str | list[TResponseInputItem],
                           *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        return ModelResponse(output=self.outputs.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the tests run without streaming")


async def converse(session: Session) -> ScriptedModel:
    model = ScriptedModel(script())
    agent = Agent(name="forecaster", instructions="Be brief.", model=model, tools=[weather])
    for question in ["Weather in Oslo?", "And Rome and Paris?", "Thanks!"]:
        await Runner.run(agent, question, session=session, run_config=RUN)
    return model


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def replica() -> Replica:
    return Replica.in_memory()


def test_a_runner_sees_the_same_history_as_on_the_sdks_own_session(replica: Replica) -> None:
    theirs, ours = SQLiteSession("reference"), ConvgraphSession.new(replica, "forecast")
    assert isinstance(ours, Session)  # the SDK's runtime-checkable protocol
    their_model, our_model = run(converse(theirs)), run(converse(ours))
    expected = run(theirs.get_items())
    assert run(ours.get_items()) == expected
    assert our_model.inputs == their_model.inputs  # what the model was sent, run after run
    assert {i.get("type") for i in expected} >= {"reasoning", "function_call", "function_call_output", "message"}
    for n in (1, 3, len(expected), len(expected) + 5):
        assert run(ours.get_items(limit=n)) == expected[-n:]
    assert run(ours.get_items(limit=0)) == []
    assert replica.verify().ok


def test_pop_item_retracts_and_clear_retracts_everything(replica: Replica) -> None:
    theirs, ours = SQLiteSession("reference"), ConvgraphSession.new(replica)
    run(converse(theirs))
    run(converse(ours))
    before = len(replica.records(ours.session_id))
    for _ in range(3):
        assert run(ours.pop_item()) == run(theirs.pop_item())
        assert run(ours.get_items()) == run(theirs.get_items())
    kinds = [r.kind for r in replica.records(ours.session_id)]
    assert len(kinds) == before + 3 and kinds.count("retraction") == 3  # nothing deleted
    run(ours.clear_session())
    assert run(ours.get_items()) == []
    assert run(ours.pop_item()) is None
    assert len(replica.records(ours.session_id)) > before
    run(ours.add_items([{"role": "user", "content": "again"}]))
    assert run(ours.get_items()) == [{"role": "user", "content": "again"}]


def test_a_second_replica_synced_from_the_first_sees_the_same_items(replica: Replica) -> None:
    ours = ConvgraphSession.new(replica)
    run(converse(ours))
    run(ours.pop_item())
    other = Replica.in_memory()
    sync_replicas(other, replica)
    theirs = ConvgraphSession(other, ours.session_id)
    assert run(theirs.get_items()) == run(ours.get_items())
    assert run(theirs.get_items(limit=4)) == run(ours.get_items(limit=4))
    assert other.verify().ok


def test_resume_is_provider_valid_for_every_provider(replica: Replica) -> None:
    ours = ConvgraphSession.new(replica)
    run(converse(ours))
    for provider in PROVIDERS:
        for last in (None, 1, 4):
            wire = ours.resume(provider, last=last)
            assert wire
            assert validity.check(provider, wire) == [], (provider, wire)
            assert sdk.sdk_errors(provider, wire) == [], (provider, wire)
    responses = ours.resume()  # the SDK's own format keeps the reasoning with its call
    assert [i.get("type") for i in responses[:3]] == [None, "reasoning", "function_call"]


UNUSUAL: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "developer", "content": [{"type": "input_text", "text": "No emoji."}]},
    {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"},
        {"type": "input_file", "file_id": "file_1"}]},
    {"role": "user", "content": ""},
    {"role": "assistant", "content": "A plain assistant message."},
    {"type": "message", "role": "assistant", "id": "msg_9", "status": "completed", "content": [
        {"type": "output_text", "text": "cited", "annotations": [{"type": "url_citation", "url": "https://e.com",
                                                                 "title": "e", "start_index": 0, "end_index": 5}]},
        {"type": "refusal", "refusal": "  "}]},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "not json", "namespace": "ns"},
    {"type": "function_call_output", "call_id": "c1", "output": [
        {"type": "input_text", "text": "part one"}, {"type": "input_image", "file_id": "file_2", "detail": "auto"}]},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
    {"type": "item_reference", "id": "msg_0"},
    {"type": "some_future_item", "id": "x_1", "payload": {"nested": [1, 2.5, None, True]}},
]


def test_items_no_turn_kind_expresses_come_back_equal_and_resume_stays_valid(replica: Replica) -> None:
    ours = ConvgraphSession.new(replica)
    run(ours.add_items(UNUSUAL))  # type: ignore[arg-type]
    assert run(ours.get_items()) == UNUSUAL
    assert run(ours.get_items(limit=2)) == UNUSUAL[-2:]
    for provider in PROVIDERS:
        wire = ours.resume(provider)
        assert validity.check(provider, wire) == [] and sdk.sdk_errors(provider, wire) == [], (provider, wire)
    anthropic = ours.resume("anthropic")
    assert anthropic[0]["content"][1]["type"] == "image"  # the OpenAI image reached Anthropic


def test_turns_other_writers_made_read_as_responses_items(replica: Replica) -> None:
    ours = ConvgraphSession.new(replica)
    replica.say(ours.session_id, "user", "hello")
    replica.say(ours.session_id, "assistant", "hi there")
    items = run(ours.get_items())
    assert items == [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]},
                     {"type": "message", "role": "assistant", "content": "hi there"}]
    assert run(ours.pop_item()) == items[-1]
    assert run(ours.get_items()) == items[:1]


@pytest.mark.parametrize("bad", [
    "text", {"type": "function_call", "name": "f"}, {"type": "function_call_output", "call_id": "c"},
    {"role": "user", "content": ["not a part"]},
])
def test_items_of_no_known_shape_are_refused_and_nothing_is_written(replica: Replica, bad: Any) -> None:
    ours = ConvgraphSession.new(replica)
    with pytest.raises(AdapterError):
        run(ours.add_items([{"role": "user", "content": "ok"}, bad]))
    assert run(ours.get_items()) == []


texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
parts = st.one_of(
    st.builds(lambda t: {"type": "input_text", "text": t}, texts),
    st.builds(lambda t: {"type": "input_image", "image_url": f"https://e.com/{t}.png", "detail": "auto"}, texts),
)
items = st.one_of(
    st.builds(lambda r, c: {"role": r, "content": c}, st.sampled_from(["user", "assistant", "system"]),
              texts | st.lists(parts, max_size=3)),
    st.builds(lambda i, a: {"type": "function_call", "call_id": f"c{i}", "name": "f", "arguments": a},
              st.integers(0, 3), texts),
    st.builds(lambda i, o: {"type": "function_call_output", "call_id": f"c{i}", "output": o},
              st.integers(0, 3), texts | st.lists(parts, max_size=2)),
    st.builds(lambda s: {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": s}]}, texts),
)


@settings(max_examples=60 if IN_CI else 25)
@given(st.lists(items, max_size=8), st.integers(0, 10))
def test_any_items_round_trip_and_any_window_is_their_tail(added: list[dict[str, Any]], limit: int) -> None:
    ours = ConvgraphSession.new(Replica.in_memory())
    run(ours.add_items(added))  # type: ignore[arg-type]
    assert run(ours.get_items()) == added
    assert run(ours.get_items(limit=limit)) == (added[-limit:] if limit else [])
    if any(i.get("role") == "user" and _has_text(i["content"]) for i in added):
        for provider in PROVIDERS:
            wire = ours.resume(provider)
            assert validity.check(provider, wire) == [] and sdk.sdk_errors(provider, wire) == [], (provider, wire)


def _has_text(content: Any) -> bool:
    if isinstance(content, str):
        return bool(content.strip())
    return any(p.get("type") == "input_text" and p["text"].strip() for p in content)


def test_a_window_of_items_is_read_from_the_turn_index_without_folding(tmp_path: Path) -> None:
    """`get_items(limit=n)` is O(n): a fresh replica answers it from the index, folding nothing."""
    writer = Replica.open(tmp_path / "r")
    session = ConvgraphSession.new(writer)
    for k in range(50):
        run(session.add_items([{"role": "user", "content": f"q{k}"},
                               {"type": "message", "role": "assistant", "content": f"a{k}"}]))
    expected = run(session.get_items(limit=3))
    writer.close()
    fresh = Replica.open(tmp_path / "r")
    assert run(ConvgraphSession(fresh, session.session_id).get_items(limit=3)) == expected
    assert expected[0] == {"type": "message", "role": "assistant", "content": "a48"}
    assert session.session_id not in fresh._folds.views  # nothing was folded
    fresh.close()


def test_popping_from_a_turn_of_several_items_keeps_the_others_in_place(replica: Replica) -> None:
    """A response recorded whole is one turn of three items: popping the last retracts the
    turn and writes the first two again, after the retraction, so the order holds."""
    ours = ConvgraphSession.new(replica)
    run(ours.add_items([{"role": "user", "content": "go"}]))
    response = {"id": "resp_1", "model": "gpt-5", "status": "completed", "output": [
        reasoning(1).model_dump(exclude_none=True), message(1, "working").model_dump(),
        call(1, "Oslo").model_dump()]}
    replica.record_response(ours.session_id, response, provider="openai-responses")
    items = run(ours.get_items())
    assert [i.get("type") for i in items] == [None, "reasoning", "message", "function_call"]
    assert run(ours.pop_item()) == items[-1]
    assert run(ours.get_items()) == items[:-1]
    assert run(ours.pop_item()) == items[-2]
    assert run(ours.get_items()) == items[:-2]
