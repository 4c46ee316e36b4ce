"""`ConvgraphSaver` under real LangGraph graphs: messages stored once as turns, the thread
synced to a second replica and resumed there, forks as branches, `retract_thread` as
retractions (`delete_thread`, which forgets: test_langgraph_delete.py)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from convgraph import AdapterError, Replica, SizeLimitError
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.projections.validity import check
from convgraph.sync.local import sync_replicas

pytestmark = pytest.mark.usefixtures("product_defaults")

TURNS = ("user_message", "agent_message", "tool_result")
_salt = itertools.count()


def salts() -> bytes:
    return next(_salt).to_bytes(8, "big")


def _graph(saver: ConvgraphSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    """One node that answers every user message with a fixed assistant message."""

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"reply {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def _config(thread: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _turns(replica: Replica, conv: str) -> list[Any]:
    return [r for r in replica.iter_records(conv) if r.kind in TURNS]


def test_each_message_is_one_turn_record_however_many_steps(tmp_path: Path) -> None:
    replica = Replica.open(tmp_path / "home")
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    steps = 12
    for i in range(steps):
        graph.invoke({"messages": [HumanMessage(f"hi {i}")]}, _config())
    conv = saver.conversation("t1")
    assert conv is not None
    assert len(_turns(replica, conv)) == 2 * steps  # never re-written per checkpoint
    sizes = [len(replica.store.get(r.cid) or b"") for r in replica.iter_records(conv)
             if r.kind == "code_snapshot"]
    assert max(sizes[-6:]) < 1.5 * max(sizes[3:9])  # a checkpoint does not grow with the history
    texts = [t.text for t in replica.transcript(conv)]
    assert texts[:4] == ["hi 0", "reply 1", "hi 1", "reply 3"]
    assert len(texts) == 2 * steps
    messages = graph.get_state(_config()).values["messages"]
    assert [m.content for m in messages] == texts
    assert replica.verify().ok
    replica.close()

    reopened = Replica.open(tmp_path / "home")  # a fresh process reads the same thread back
    again = _graph(ConvgraphSaver(reopened)).get_state(_config()).values["messages"]
    assert again == messages


def test_messages_round_trip_whole_and_those_no_turn_holds_stay_inline() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    sent = [
        SystemMessage("be brief", id="s1"),
        HumanMessage([{"type": "text", "text": "look"}], id="h1", name="ann"),
        AIMessage("", id="a1", tool_calls=[{"id": "call_1", "name": "lookup", "args": {"q": "x"}}],
                  response_metadata={"model": "m"}),
        ToolMessage("found", tool_call_id="call_1", id="t1", status="error"),
        HumanMessage("and?", id="h2"),
    ]
    graph.invoke({"messages": sent}, _config())
    got = graph.get_state(_config()).values["messages"]
    assert got[:5] == sent
    conv = saver.conversation("t1")
    assert conv is not None
    kinds = [r.kind for r in _turns(replica, conv)]
    assert kinds == ["user_message", "agent_message", "tool_result", "user_message", "agent_message"]
    last = {"role": "assistant", "content": [{"type": "text", "text": "reply 5"}]}
    assert replica.resume(conv, "anthropic")[-1] == last  # convgraph's own views read the thread


def test_an_anthropic_style_call_held_twice_in_the_message_resumes_valid() -> None:
    # ChatAnthropic's AIMessage holds each call as a `tool_use` content block and in
    # `tool_calls`: the thread reads back whole, and resume sends the call once
    saver = ConvgraphSaver(Replica.in_memory())
    graph = _graph(saver)
    use = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}}
    sent = [
        HumanMessage("look", id="h1"),
        AIMessage([{"type": "text", "text": "looking"}, use], id="a1",
                  tool_calls=[{"id": "toolu_1", "name": "lookup", "args": {"q": "x"}}]),
        ToolMessage("found", tool_call_id="toolu_1", id="t1"),
        HumanMessage("and?", id="h2"),
    ]
    graph.invoke({"messages": sent}, _config())
    assert graph.get_state(_config()).values["messages"][:4] == sent
    conv = saver.conversation("t1")
    assert conv is not None
    for provider in ("anthropic", "openai", "openai-responses", "gemini"):
        assert check(provider, saver.replica.resume(conv, provider)) == []


def test_a_thread_syncs_to_a_second_replica_and_continues_there(tmp_path: Path) -> None:
    a, b = Replica.open(tmp_path / "a"), Replica.open(tmp_path / "b")
    saver_a = ConvgraphSaver(a)
    graph_a = _graph(saver_a)
    for i in range(3):
        graph_a.invoke({"messages": [HumanMessage(f"from a {i}")]}, _config())
    conv = saver_a.conversation("t1")
    assert conv is not None
    a.write(conv, "grant", {"grantee": b.actor, "rights": ["write"]})  # b may continue a's thread
    assert sync_replicas(a, b, salts=salts).converged

    saver_b = ConvgraphSaver(b, owners=[a.actor])
    graph_b = _graph(saver_b)
    assert saver_b.conversation("t1") == conv
    assert graph_b.get_state(_config()).values == graph_a.get_state(_config()).values
    graph_b.invoke({"messages": [HumanMessage("from b")]}, _config())
    assert sync_replicas(a, b, salts=salts).converged

    on_a = [m.content for m in graph_a.get_state(_config()).values["messages"]]
    assert on_a[-2:] == ["from b", "reply 7"]
    assert on_a == [m.content for m in graph_b.get_state(_config()).values["messages"]]
    assert a.verify().ok and b.verify().ok
    assert len(_turns(a, conv)) == 8


def test_a_fork_from_an_older_checkpoint_is_a_convgraph_branch() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    for i in range(3):
        graph.invoke({"messages": [HumanMessage(f"m{i}")]}, _config())
    history = list(graph.get_state_history(_config()))
    after_first = next(s for s in history if [m.content for m in s.values.get("messages", [])]
                       == ["m0", "reply 1"])
    forked = graph.invoke({"messages": [HumanMessage("other")]}, after_first.config)
    assert [m.content for m in forked["messages"]] == ["m0", "reply 1", "other", "reply 3"]

    conv = saver.conversation("t1")
    assert conv is not None
    branches = [r for r in replica.iter_records(conv) if r.kind == "branch"]
    assert len(branches) == 1
    name = branches[0].payload["name"]
    assert [t.text for t in replica.transcript(conv, branch=name)] == ["m0", "reply 1", "other", "reply 3"]
    assert len(replica.transcript(conv)) == 6  # main is untouched
    latest = graph.get_state(_config()).values["messages"]  # the newest checkpoint: the fork's
    assert [m.content for m in latest] == ["m0", "reply 1", "other", "reply 3"]
    assert replica.verify().ok


def test_retract_thread_retracts_and_the_thread_starts_afresh() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    graph.invoke({"messages": [HumanMessage("secret")]}, _config())
    conv = saver.conversation("t1")
    assert conv is not None
    saver.retract_thread("t1")
    assert graph.get_state(_config()).values == {}
    assert replica.transcript(conv) == []  # the turns are retracted too
    assert replica.records(conv)  # signed retractions: nothing is erased, they sync
    graph.invoke({"messages": [HumanMessage("again")]}, _config())
    assert saver.conversation("t1") == conv  # the same conversation goes on
    assert [m.content for m in graph.get_state(_config()).values["messages"]] == ["again", "reply 1"]
    assert replica.verify().ok


def test_the_async_interface_runs_a_graph() -> None:
    replica = Replica.in_memory()
    graph = _graph(ConvgraphSaver(replica))

    async def run() -> list[Any]:
        for i in range(3):
            await graph.ainvoke({"messages": [HumanMessage(f"a{i}")]}, _config("async"))
        state = await graph.aget_state(_config("async"))
        return [m.content for m in state.values["messages"]]

    assert asyncio.run(run()) == ["a0", "reply 1", "a1", "reply 3", "a2", "reply 5"]


@pytest.mark.parametrize("config", [{}, {"configurable": {}}, {"configurable": {"thread_id": 3.5}},
                                    {"configurable": {"thread_id": "\ud800"}}])
def test_a_config_without_a_usable_thread_id_is_an_adapter_error(config: dict[str, Any]) -> None:
    saver = ConvgraphSaver(Replica.in_memory())
    with pytest.raises(AdapterError, match="thread_id"):
        saver.get_tuple(config)  # type: ignore[arg-type]


def test_put_writes_without_a_checkpoint_and_an_unknown_prune_strategy_are_adapter_errors() -> None:
    saver = ConvgraphSaver(Replica.in_memory())
    with pytest.raises(AdapterError, match="checkpoint_id"):
        saver.put_writes(_config(), [("ch", 1)], "task")  # type: ignore[arg-type]
    with pytest.raises(AdapterError, match="strategy"):
        saver.prune(["t1"], strategy="keep_some")


def test_a_subgraphs_messages_are_not_turns_a_second_time() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"sub reply {len(state['messages'])}")]}

    sub = StateGraph(MessagesState)
    sub.add_node("reply", reply)
    sub.add_edge(START, "reply")
    sub.add_edge("reply", END)
    builder = StateGraph(MessagesState)
    builder.add_node("sub", sub.compile(checkpointer=True))  # the subgraph keeps checkpoints of its own
    builder.add_edge(START, "sub")
    builder.add_edge("sub", END)
    graph = builder.compile(checkpointer=saver)
    for i in range(3):
        graph.invoke({"messages": [HumanMessage(f"q{i}")]}, _config())
    conv = saver.conversation("t1")
    assert conv is not None
    namespaces = {ck.config["configurable"]["checkpoint_ns"] for ck in saver.list(_config())}
    assert namespaces == {"", "sub"}  # no namespace in the config: every namespace's checkpoints
    assert len(_turns(replica, conv)) == 6  # each message once, from the root namespace
    assert [m.content for m in graph.get_state(_config()).values["messages"]][-2:] == ["q2", "sub reply 5"]
    assert replica.verify().ok


def test_a_failed_put_leaves_the_thread_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    write = replica.write

    def refusing(conv: str, kind: str, payload: dict[str, Any], **kw: Any) -> Any:
        if kind == "code_snapshot" and payload["path"].startswith("langgraph/checkpoint"):
            raise SizeLimitError("record too large", limit=1, got=2)  # after the turns were written
        return write(conv, kind, payload, **kw)

    monkeypatch.setattr(replica, "write", refusing)
    with pytest.raises(SizeLimitError):
        graph.invoke({"messages": [HumanMessage("lost")]}, _config("big"))
    monkeypatch.undo()
    assert graph.get_state(_config("big")).values == {}  # no checkpoint landed, nor a turn
    conv = saver.conversation("big")  # LangGraph did record the error, as a pending write
    assert conv is not None
    assert _turns(replica, conv) == []
    graph.invoke({"messages": [HumanMessage("small")]}, _config("big"))
    assert [m.content for m in graph.get_state(_config("big")).values["messages"]] == ["small", "reply 1"]
    assert replica.verify().ok
