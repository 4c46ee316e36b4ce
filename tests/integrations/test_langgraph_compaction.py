"""A compacted LangGraph thread reads back whole (docs/integrations.md, *Compaction*): a real
graph with tool calls, an interrupt and a fork, compacted, reads its state and its history
back equal from the snapshot, says what was compacted, and goes on as an uncompacted twin
does; a second replica that syncs it adopts the checkpoint and reads the same."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from convgraph import Replica
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.sync.local import sync_replicas

pytestmark = pytest.mark.usefixtures("product_defaults")

TURNS = ("user_message", "agent_message", "tool_result")
_salt = itertools.count()


def salts() -> bytes:
    return next(_salt).to_bytes(8, "big")


def _graph(saver: ConvgraphSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A gate that interrupts on "ask", an agent that calls `lookup` on "look", and the tool."""

    def gate(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, HumanMessage) and "ask" in str(last.content):
            answer = interrupt({"question": last.content})
            return {"messages": [AIMessage(f"approved: {answer}", id=f"gate-{len(state['messages'])}")]}
        return {}

    def agent(state: MessagesState) -> dict[str, Any]:
        messages: list[AnyMessage] = state["messages"]
        n, last = len(messages), messages[-1]
        if isinstance(last, HumanMessage) and "look" in str(last.content):
            call = {"id": f"call-{n}", "name": "lookup", "args": {"q": last.content}}
            return {"messages": [AIMessage("", id=f"ai-{n}", tool_calls=[call],
                                           response_metadata={"model": "m", "n": n})]}
        return {"messages": [AIMessage(f"re: {last.content}", id=f"ai-{n}", response_metadata={"n": n})]}

    def tools(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {"messages": [ToolMessage(f"found {c['args']['q']}", tool_call_id=c["id"], id=f"tool-{c['id']}")
                             for c in last.tool_calls]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("gate", gate)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "gate")
    builder.add_edge("gate", "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def _config(thread: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _say(graph: CompiledStateGraph[Any, Any, Any, Any], text: str, config: dict[str, Any] | None = None) -> None:
    graph.invoke({"messages": [HumanMessage(text, id=f"h-{text}")]}, config or _config())


def _history(graph: CompiledStateGraph[Any, Any, Any, Any]) -> list[Any]:
    """Every checkpoint of the thread, newest first, as LangGraph's state snapshots show it."""
    return [(s.values, s.next, s.config, s.metadata, s.created_at, s.parent_config,
             [(t.name, t.interrupts) for t in s.tasks]) for s in graph.get_state_history(_config())]


def _build(graph: CompiledStateGraph[Any, Any, Any, Any]) -> None:
    """Tool calls, an answered interrupt, a fork from an older checkpoint, and an interrupt
    left pending."""
    _say(graph, "hi")
    _say(graph, "look up a")
    _say(graph, "ask b")
    graph.invoke(Command(resume="yes"), _config())
    older = next(s for s in graph.get_state_history(_config())
                 if [m.content for m in s.values.get("messages", [])][-1:] == ["re: hi"])
    _say(graph, "look elsewhere", older.config)  # a second child of an older checkpoint: a fork
    _say(graph, "look again")
    _say(graph, "ask c")  # left waiting for its answer


def _reads(saver: ConvgraphSaver, graph: CompiledStateGraph[Any, Any, Any, Any]) -> Any:
    conv = saver.conversation("t1")
    assert conv is not None
    state = graph.get_state(_config())
    return (state.values, state.next, [t.interrupts for t in state.tasks], _history(graph),
            list(saver.list(_config())), saver.resume("t1"), saver.replica.transcript(conv))


def _continue(graph: CompiledStateGraph[Any, Any, Any, Any]) -> list[Any]:
    graph.invoke(Command(resume="later"), _config())
    _say(graph, "look at last")
    return graph.get_state(_config()).values["messages"]


def test_a_compacted_thread_reads_back_whole_and_goes_on_as_before(tmp_path: Path) -> None:
    replica = Replica.open(tmp_path / "home")
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    _build(graph)
    before = _reads(saver, graph)
    assert before[2] and before[2][0][0].value == {"question": "ask c"}  # the interrupt is pending
    assert saver.compacted("t1") is None
    conv = saver.conversation("t1")
    assert conv is not None
    held = [r.cid for r in replica.iter_records(conv)]

    checkpoint = saver.compact("t1")
    assert all(replica.store.get(c) is None for c in held)  # every record before it lost its bytes
    assert _reads(saver, graph) == before  # the same saver, its thread folded again
    fresh = ConvgraphSaver(replica)
    assert _reads(fresh, _graph(fresh)) == before
    replica.close()
    replica = Replica.open(tmp_path / "home")  # a fresh process
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    assert _reads(saver, graph) == before

    compacted = saver.compacted("t1")
    assert compacted is not None and compacted.checkpoint == checkpoint
    assert compacted.records == len(held)
    listed = {(t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"])
              for t in saver.list(_config())}
    assert set(compacted.checkpoints) == listed  # every checkpoint so far, each still listed

    twin = _graph(ConvgraphSaver(Replica.in_memory()))  # the same steps, never compacted
    _build(twin)
    went_on = _continue(graph)
    assert went_on == _continue(twin)
    assert len(_history(graph)) == len(_history(twin))
    turns = [r for r in replica.iter_records(conv) if r.kind in TURNS]  # held: written since
    new = [m.id for m in went_on if m.id not in {m.id for m in before[0]["messages"]}]
    assert len(new) == 6 and [r.payload["meta"]["langchain_id"] for r in turns] == new  # each once
    assert replica.verify().ok
    replica.close()


def test_a_second_replica_adopts_the_compacted_thread_and_reads_the_same(tmp_path: Path) -> None:
    a, b = Replica.open(tmp_path / "a"), Replica.open(tmp_path / "b")
    saver_a = ConvgraphSaver(a)
    graph_a = _graph(saver_a)
    _build(graph_a)
    conv = saver_a.conversation("t1")
    assert conv is not None
    a.write(conv, "grant", {"grantee": b.actor, "rights": ["write"]})  # b may continue a's thread
    saver_b = ConvgraphSaver(b, owners=[a.actor])
    graph_b = _graph(saver_b)
    assert sync_replicas(a, b, salts=salts).converged
    assert _reads(saver_b, graph_b)[:5] == _reads(saver_a, graph_a)[:5]  # b held it all, folded

    saver_a.compact("t1")
    graph_a.invoke(Command(resume="from a"), _config())  # records after the checkpoint
    c = Replica.open(tmp_path / "c")  # one that never saw the thread: it adopts a's checkpoint
    a.write(conv, "grant", {"grantee": c.actor, "rights": ["write"]})
    saver_c = ConvgraphSaver(c, owners=[a.actor])
    graph_c = _graph(saver_c)
    for other in (b, c):
        assert sync_replicas(a, other, salts=salts).converged
    assert c.store.snapshot(conv) is not None  # c holds the compacted records as the snapshot
    expected = _reads(saver_a, graph_a)
    assert _reads(saver_c, graph_c)[:5] == expected[:5]
    assert _reads(saver_b, graph_b)[:5] == expected[:5]
    assert saver_c.compacted("t1") is not None

    _say(graph_c, "look from c")
    assert sync_replicas(a, c, salts=salts).converged
    on_a = graph_a.get_state(_config()).values["messages"]
    assert on_a == graph_c.get_state(_config()).values["messages"]
    assert [m.content for m in on_a[-6:]] == [
        "approved: from a", "re: approved: from a", "look from c", "", "found look from c", "re: found look from c"]
    assert a.verify().ok and b.verify().ok and c.verify().ok
