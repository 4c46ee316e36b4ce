"""Trimming, editing and summarising a thread's messages, as LangGraph's documentation does it
(`RemoveMessage`, a message with an existing id, `REMOVE_ALL_MESSAGES`): `ConvgraphSaver`
writes each message once, records a removal as a retraction and an edit as a supersession, and
reads every checkpoint back as `SqliteSaver` does; the transcript never repeats a message and
resuming sends what the graph's state holds."""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph

from convgraph import NoUserTurnError, Replica
from convgraph.integrations.langgraph import ConvgraphSaver

pytestmark = pytest.mark.usefixtures("product_defaults")

CONFIG: Any = {"configurable": {"thread_id": "edits"}}
TURNS = ("user_message", "agent_message", "tool_result")


def _chat(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(f"re: {last.content}", id=f"re-{last.id}")]}


def _trim(state: MessagesState) -> dict[str, Any]:
    return {"messages": [RemoveMessage(id=m.id) for m in state["messages"][:-2]]}  # type: ignore[arg-type]


def _graph(saver: BaseCheckpointSaver[Any], *, trim: bool = False) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(MessagesState)
    builder.add_node("chat", _chat)
    builder.add_edge(START, "chat")
    if trim:
        builder.add_node("trim", _trim)
        builder.add_edge("chat", "trim")
        builder.add_edge("trim", END)
    else:
        builder.add_edge("chat", END)
    return builder.compile(checkpointer=saver)


def _sqlite() -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))


def _shown(messages: list[BaseMessage]) -> list[tuple[str, str | None, Any]]:
    return [(m.type, m.id, m.content) for m in messages]


def _transcript_ids(replica: Replica, conv: str, branch: str | None = None) -> list[str]:
    """The LangChain message id each visible turn of the transcript holds."""
    return [replica.get(t.op).payload["meta"]["langchain_id"] for t in replica.transcript(conv, branch=branch)]


def test_the_documented_trim_node_writes_each_message_once() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    ours, theirs = _graph(saver, trim=True), _graph(_sqlite(), trim=True)
    for k, text in enumerate("abcd"):
        for graph in (ours, theirs):
            graph.invoke({"messages": [HumanMessage(text, id=f"h{k}")]}, CONFIG)
    assert _shown(ours.get_state(CONFIG).values["messages"]) == _shown(theirs.get_state(CONFIG).values["messages"])
    conv = saver.conversation("edits")
    assert conv is not None
    turns = [r for r in replica.iter_records(conv) if r.kind in TURNS]
    assert [r.payload["content"] for r in turns] == ["a", "re: a", "b", "re: b", "c", "re: c", "d", "re: d"]
    assert [t.text for t in replica.transcript(conv)] == ["d", "re: d"]
    assert replica.resume(conv, "openai") == saver.resume("edits", "openai") == [
        {"role": "user", "content": "d"}, {"role": "assistant", "content": "re: d"}]
    retracted = [r.payload["reason"] for r in replica.iter_records(conv) if r.kind == "retraction"]
    assert retracted == ["LangGraph RemoveMessage"] * 6
    assert replica.verify().ok


def test_an_edit_supersedes_its_turn_in_place() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    graph.invoke({"messages": [HumanMessage("what is 6 x 7?", id="q")]}, CONFIG)
    graph.invoke({"messages": [HumanMessage("thanks", id="t")]}, CONFIG)
    graph.update_state(CONFIG, {"messages": [HumanMessage("what is 6 x 8?", id="q")]})
    assert [m.content for m in graph.get_state(CONFIG).values["messages"]] == [
        "what is 6 x 8?", "re: what is 6 x 7?", "thanks", "re: thanks"]
    conv = saver.conversation("edits")
    assert conv is not None
    assert [t.text for t in replica.transcript(conv)] == ["what is 6 x 8?", "re: what is 6 x 7?", "thanks", "re: thanks"]
    [edit] = [r for r in replica.iter_records(conv) if r.kind == "supersession"]
    assert edit.payload["content"] == "what is 6 x 8?"
    assert replica.get(edit.payload["target"]).payload["content"] == "what is 6 x 7?"  # the first stays, signed
    assert sum(r.kind in TURNS for r in replica.iter_records(conv)) == 4


def test_an_edit_that_changes_the_kind_retracts_the_turn_and_writes_the_new_one() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    graph.invoke({"messages": [HumanMessage("hi", id="q")]}, CONFIG)
    graph.update_state(CONFIG, {"messages": [AIMessage("(said by the assistant)", id="q")]})
    conv = saver.conversation("edits")
    assert conv is not None
    assert [(t.role.value, t.text) for t in replica.transcript(conv)] == [
        ("assistant", "re: hi"), ("assistant", "(said by the assistant)")]
    assert [m.type for m in graph.get_state(CONFIG).values["messages"]] == ["ai", "ai"]


def test_remove_all_then_add_back_names_the_same_turns() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    for k in range(3):
        graph.invoke({"messages": [HumanMessage(f"m{k}", id=f"h{k}")]}, CONFIG)
    kept = graph.get_state(CONFIG).values["messages"][-2:]
    graph.update_state(CONFIG, {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES),
                                             SystemMessage("summary: m0 and m1 were asked", id="s"), *kept]})
    conv = saver.conversation("edits")
    assert conv is not None
    assert sum(r.kind in TURNS for r in replica.iter_records(conv)) == 6  # m2 and its reply not written again
    assert _transcript_ids(replica, conv) == ["h2", "re-h2"]
    assert [m.content for m in graph.get_state(CONFIG).values["messages"]] == [
        "summary: m0 and m1 were asked", "m2", "re: m2"]
    assert saver.resume("edits", "openai") == [
        {"role": "user", "content": "m2"}, {"role": "assistant", "content": "re: m2"}]
    assert saver.resume("edits", "anthropic") == replica.resume(conv, "anthropic")


# ("add", _): invoke with a new message; ("remove", i): remove the i-th message; ("edit", i): give
# the i-th a new content; ("summarise", _): remove all but the last two and add a summary;
# ("fork", i): invoke on the i-th checkpoint of the history (newest first), as time travel does
OPS = st.lists(st.tuples(st.sampled_from(["add", "remove", "edit", "summarise", "fork"]), st.integers(0, 30)),
               min_size=1, max_size=10)


def _step(graph: CompiledStateGraph[Any, Any, Any, Any], op: str, n: int, k: int) -> None:
    messages = graph.get_state(CONFIG).values.get("messages", [])
    if op == "add" or (op != "fork" and not messages):
        graph.invoke({"messages": [HumanMessage(f"m{k}", id=f"h{k}")]}, CONFIG)
    elif op == "remove":
        graph.update_state(CONFIG, {"messages": [RemoveMessage(id=messages[n % len(messages)].id)]})
    elif op == "edit":
        old = messages[n % len(messages)]
        graph.update_state(CONFIG, {"messages": [old.model_copy(update={"content": f"{old.content} (edit {k})"})]})
    elif op == "summarise":
        summary = AIMessage(f"summary {k}", id=f"s{k}")
        graph.update_state(CONFIG, {"messages": [*(RemoveMessage(id=m.id) for m in messages[:-2]), summary]})
    else:
        history = list(graph.get_state_history(CONFIG))
        config = history[n % len(history)].config if history else CONFIG
        graph.invoke({"messages": [HumanMessage(f"m{k}", id=f"h{k}")]}, config)


@settings(max_examples=20, deadline=None)
@given(OPS)
def test_any_edits_read_back_as_sqlite_saver_and_no_message_repeats(ops: list[tuple[str, int]]) -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    ours, theirs = _graph(saver), _graph(_sqlite())
    for k, (op, n) in enumerate(ops):
        _step(ours, op, n, k)
        _step(theirs, op, n, k)
        assert _shown(ours.get_state(CONFIG).values["messages"]) == _shown(theirs.get_state(CONFIG).values["messages"])
        conv = saver.conversation("edits")
        assert conv is not None
        branches = {r.payload["name"] for r in replica.iter_records(conv) if r.kind == "branch"}
        for branch in [None, *sorted(branches)]:
            ids = _transcript_ids(replica, conv, branch)
            assert [i for i, c in Counter(ids).items() if c > 1] == []
    history = [_shown(s.values.get("messages", [])) for s in ours.get_state_history(CONFIG)]
    assert history == [_shown(s.values.get("messages", [])) for s in theirs.get_state_history(CONFIG)]
    said = [m.content for m in ours.get_state(CONFIG).values["messages"] if m.type != "system"]
    if not any(m.type == "human" for m in ours.get_state(CONFIG).values["messages"]):
        with pytest.raises(NoUserTurnError):  # nothing a provider would take
            saver.resume("edits", "openai")
    else:
        resumed = saver.resume("edits", "openai")
        texts = [t for m in resumed for t in _texts(m["content"])]  # adjacent same-role turns coalesce
        assert texts == said[-len(texts):]
        if "fork" not in {op for op, _ in ops}:
            assert replica.resume(conv, "openai") == resumed
    assert replica.verify().ok


def _texts(content: Any) -> list[str]:
    return [content] if isinstance(content, str) else [b["text"] for b in content if b["type"] == "text"]
