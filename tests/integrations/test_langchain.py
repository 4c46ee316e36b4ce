"""ConvgraphChatMessageHistory: our own contract tests (langchain-tests ships no standard
suite for chat histories), `RunnableWithMessageHistory` over a fake chat model, sync to a
second replica, and `resume` for every provider under the validity checker and the SDK types."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from conftest import IN_CI
from convgraph import AdapterError, Replica, sync_replicas
from convgraph.integrations.langchain import ConvgraphChatMessageHistory
from convgraph.projections import validity
from convgraph.projections.resume import PROVIDERS

_spec = importlib.util.spec_from_file_location("sdk", Path(__file__).parents[1] / "projections" / "sdk.py")
assert _spec is not None and _spec.loader is not None
sdk = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sdk)

PNG = "data:image/png;base64,iVBORw0KGgo="

EXCHANGE: list[BaseMessage] = [
    SystemMessage("You are terse."),
    HumanMessage("Weather in Oslo and Rome?", id="h1"),
    AIMessage("Checking. ", tool_calls=[
        {"name": "weather", "args": {"city": "Oslo"}, "id": "call_1", "type": "tool_call"},
        {"name": "weather", "args": {"city": "Rome"}, "id": "call_2", "type": "tool_call"}],
        usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        response_metadata={"model_name": "fake", "finish_reason": "tool_calls"}, id="run-1"),
    ToolMessage("rain  ", tool_call_id="call_1", name="weather"),
    ToolMessage("no such city", tool_call_id="call_2", status="error", artifact={"code": 404}),
    AIMessage([{"type": "text", "text": "Oslo: rain."},
               {"type": "tool_use", "id": "toolu_9", "name": "noop", "input": {}},
               {"type": "reasoning", "reasoning": "it rained"}]),
    HumanMessage(["and this?", {"type": "image_url", "image_url": {"url": PNG}},
                  {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}]),
    AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": None, "type": "tool_call"}]),
    ChatMessage("a note", role="critic"),
    AIMessage("A picture of nothing. "),
]


@pytest.fixture
def history() -> ConvgraphChatMessageHistory:
    return ConvgraphChatMessageHistory.new(Replica.in_memory(), "chat")


def assert_resumes_validly(history: ConvgraphChatMessageHistory) -> None:
    for provider in PROVIDERS:
        for last in (None, 2):
            wire = history.resume(provider, last=last)
            assert wire, provider
            assert validity.check(provider, wire) == [], (provider, wire)
            assert sdk.sdk_errors(provider, wire) == [], (provider, wire)


def test_a_new_history_is_empty(history: ConvgraphChatMessageHistory) -> None:
    assert history.messages == []
    history.clear()  # clearing nothing is fine
    assert history.messages == []


def test_every_message_kind_round_trips_equal(history: ConvgraphChatMessageHistory) -> None:
    history.add_messages(EXCHANGE)
    assert history.messages == EXCHANGE
    assert [type(m) for m in history.messages] == [type(m) for m in EXCHANGE]
    assert history.last(3) == EXCHANGE[-3:]
    assert history.replica.verify().ok


def test_the_convenience_adders_and_the_async_variants(history: ConvgraphChatMessageHistory) -> None:
    history.add_user_message("hi")
    history.add_ai_message("hello")
    history.add_message(HumanMessage("again"))
    asyncio.run(history.aadd_messages([AIMessage("once more")]))
    expected = [HumanMessage("hi"), AIMessage("hello"), HumanMessage("again"), AIMessage("once more")]
    assert history.messages == expected
    assert asyncio.run(history.aget_messages()) == expected
    asyncio.run(history.aclear())
    assert history.messages == []


def test_clear_retracts_and_deletes_nothing(history: ConvgraphChatMessageHistory) -> None:
    history.add_messages(EXCHANGE[:4])
    before = len(history.replica.records(history.conv))
    history.clear()
    assert history.messages == []
    records = history.replica.records(history.conv)
    assert len(records) == before + 4 and [r.kind for r in records[-4:]] == ["retraction"] * 4
    history.add_messages([HumanMessage("fresh start")])
    assert history.messages == [HumanMessage("fresh start")]


def test_histories_of_two_conversations_are_independent() -> None:
    replica = Replica.in_memory()
    a, b = ConvgraphChatMessageHistory.new(replica), ConvgraphChatMessageHistory.new(replica)
    a.add_messages([HumanMessage("to a")])
    b.add_messages([HumanMessage("to b")])
    b.clear()
    assert a.messages == [HumanMessage("to a")] and b.messages == []


def test_a_second_replica_synced_from_the_first_sees_the_same_messages(
    history: ConvgraphChatMessageHistory,
) -> None:
    history.add_messages(EXCHANGE)
    other = Replica.in_memory()
    sync_replicas(other, history.replica)
    assert ConvgraphChatMessageHistory(other, history.conv).messages == EXCHANGE
    assert other.verify().ok


def test_resume_is_provider_valid_for_every_provider(history: ConvgraphChatMessageHistory) -> None:
    history.add_messages(EXCHANGE)
    assert_resumes_validly(history)
    anthropic = history.resume("anthropic")
    assert all(m["role"] in ("user", "assistant") for m in anthropic)  # the system prompt stays out
    used = [b["id"] for m in anthropic for b in m["content"] if b.get("type") == "tool_use"]
    assert used == ["call_1", "call_2"]  # the provider's own copy of a call never doubles it


def test_turns_other_writers_made_read_as_plain_messages(history: ConvgraphChatMessageHistory) -> None:
    replica = history.replica
    replica.say(history.conv, "user", "hello")
    replica.say(history.conv, "assistant", "hi", tool_calls=[])
    assert history.messages == [HumanMessage("hello"), AIMessage("hi")]


def test_what_is_not_a_message_is_refused(history: ConvgraphChatMessageHistory) -> None:
    with pytest.raises(AdapterError):
        history.add_messages([HumanMessage("ok"), "not a message"])  # type: ignore[list-item]
    assert history.messages == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # RunnableWithMessageHistory is deprecated upstream
def test_runnable_with_message_history_over_a_fake_chat_model() -> None:
    replica = Replica.in_memory()
    histories: dict[str, ConvgraphChatMessageHistory] = {}

    def history_of(session_id: str) -> ConvgraphChatMessageHistory:
        if session_id not in histories:
            histories[session_id] = ConvgraphChatMessageHistory.new(replica, session_id)
        return histories[session_id]

    seen: list[list[BaseMessage]] = []

    def capture(prompt: PromptValue) -> PromptValue:
        seen.append(prompt.to_messages())
        return prompt

    prompt = ChatPromptTemplate.from_messages([
        ("system", "You are a weather bot."), MessagesPlaceholder("history"), ("human", "{question}")])
    model = FakeMessagesListChatModel(responses=[AIMessage("Rain in Oslo."), AIMessage("Sun in Rome.")])
    chain = RunnableWithMessageHistory(prompt | RunnableLambda(capture) | model, history_of,
                                       input_messages_key="question", history_messages_key="history")
    config: Any = {"configurable": {"session_id": "s1"}}
    chain.invoke({"question": "Oslo?"}, config=config)
    chain.invoke({"question": "Rome?"}, config=config)
    stored = histories["s1"].messages
    assert [m.content for m in stored] == ["Oslo?", "Rain in Oslo.", "Rome?", "Sun in Rome."]
    assert [type(m) for m in stored] == [HumanMessage, AIMessage, HumanMessage, AIMessage]
    assert [m.content for m in seen[1]] == ["You are a weather bot.", "Oslo?", "Rain in Oslo.", "Rome?"]
    assert_resumes_validly(histories["s1"])


texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
contents = texts | st.lists(
    texts | st.builds(lambda t: {"type": "text", "text": t}, texts)
    | st.just({"type": "image_url", "image_url": {"url": PNG}}) | st.just({"type": "thinking", "thinking": "x"}),
    max_size=3)
calls = st.lists(st.builds(lambda i: {"name": "f", "args": {"i": i}, "id": f"c{i}", "type": "tool_call"},
                           st.integers(0, 3)), max_size=2, unique_by=lambda c: c["id"])
messages = st.one_of(
    st.builds(HumanMessage, content=contents),
    st.builds(AIMessage, content=contents, tool_calls=calls),
    st.builds(lambda c, i: ToolMessage(c, tool_call_id=f"c{i}"), contents, st.integers(0, 3)),
    st.builds(SystemMessage, content=texts),
)


@settings(max_examples=60 if IN_CI else 25)
@given(st.lists(messages, max_size=6))
def test_any_messages_round_trip_and_resume_validly(added: list[BaseMessage]) -> None:
    history = ConvgraphChatMessageHistory.new(Replica.in_memory())
    history.add_messages(added)
    assert history.messages == added
    if any(isinstance(m, HumanMessage) and m.text.strip() for m in added):
        for provider in PROVIDERS:
            wire = history.resume(provider)
            assert validity.check(provider, wire) == [] and sdk.sdk_errors(provider, wire) == [], (provider, wire)


def test_the_last_messages_are_read_from_the_turn_index_without_folding(tmp_path: Path) -> None:
    writer = Replica.open(tmp_path / "r")
    history = ConvgraphChatMessageHistory.new(writer)
    for k in range(50):
        history.add_messages([HumanMessage(f"q{k}"), AIMessage(f"a{k}")])
    writer.close()
    fresh = Replica.open(tmp_path / "r")
    assert ConvgraphChatMessageHistory(fresh, history.conv).last(2) == [HumanMessage("q49"), AIMessage("a49")]
    assert history.conv not in fresh._folds.views  # nothing was folded
    fresh.close()
