"""Real histories to import, made by the libraries that own their formats: a LangGraph graph
run on a `SqliteSaver` database, an Agents SDK `SQLiteSession` filled by `add_items`."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.memory import SQLiteSession
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from convgraph import Replica
from convgraph.projections.validity import PROVIDERS, check


def _agent(state: MessagesState) -> dict[str, Any]:
    """A scripted model: a user turn gets a tool call, a tool result gets an answer."""
    n = len(state["messages"])
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(f"the answer is {last.content}")]}
    return {"messages": [AIMessage("", tool_calls=[{"id": f"call_{n}", "name": "add", "args": {"a": n, "b": 1}}])]}


def _tools(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    return {"messages": [ToolMessage(str(c["args"]["a"] + c["args"]["b"]), tool_call_id=c["id"])
                         for c in last.tool_calls]}


def _route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def langgraph_thread(db: Path, thread: str, *inputs: Sequence[AnyMessage]) -> list[BaseMessage]:
    """Run a tool-calling graph on `thread` of SqliteSaver database `db`, once per input;
    return the thread's messages as SqliteSaver gives them back."""
    builder = StateGraph(MessagesState)
    builder.add_node("agent", _agent)
    builder.add_node("tools", _tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _route, ["tools", END])
    builder.add_edge("tools", "agent")
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread}}
        for messages in inputs:
            graph.invoke({"messages": list(messages)}, config)
        return thread_messages(saver, thread)


def update_thread(db: Path, thread: str, messages: Sequence[AnyMessage]) -> list[BaseMessage]:
    """Add `messages` to the thread as LangGraph's `update_state` does (a real checkpoint)."""
    builder = StateGraph(MessagesState)
    builder.add_node("agent", _agent)
    builder.add_edge(START, "agent")
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.update_state({"configurable": {"thread_id": thread}}, {"messages": list(messages)})
        return thread_messages(saver, thread)


def _held_tools(state: MessagesState) -> dict[str, Any]:
    """The tool node, asking a person first (`interrupt`): the answer is the call's sum, or a refusal."""
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    ok = interrupt({"approve": [c["id"] for c in last.tool_calls]})
    return {"messages": [ToolMessage(str(c["args"]["a"] + c["args"]["b"]) if ok else "refused",
                                     tool_call_id=c["id"], id=f"tool-{c['id']}") for c in last.tool_calls]}


def _noted(state: MessagesState) -> dict[str, Any]:
    n = len(state["messages"])
    return {"messages": [AIMessage(f"noted {n}", id=f"note-{n}")]}


def _named_agent(state: MessagesState) -> dict[str, Any]:
    """`_agent` with ids of its own, so two runs of the graph say the same messages."""
    reply = _agent(state)["messages"][0]
    return {"messages": [reply.model_copy(update={"id": f"ai-{len(state['messages'])}"})]}


def held_graph() -> StateGraph[Any]:
    """A graph with a subgraph (`sub` notes how many messages there are), a scripted model and
    a tool node that interrupts for approval before it runs."""
    sub = StateGraph(MessagesState)
    sub.add_node("note", _noted)
    sub.add_edge(START, "note")
    builder = StateGraph(MessagesState)
    builder.add_node("sub", sub.compile())
    builder.add_node("agent", _named_agent)
    builder.add_node("tools", _held_tools)
    builder.add_edge(START, "sub")
    builder.add_edge("sub", "agent")
    builder.add_conditional_edges("agent", _route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


def forked_thread(db: Path, thread: str, big: str = "") -> None:
    """Run `held_graph` on `thread` of SqliteSaver database `db`: a question answered after an
    approval (interrupt, resume), a fork (`update_state` on an older checkpoint), and a second
    question on the fork, left waiting at its interrupt. `big`: text of a message in the fork."""
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph = held_graph().compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": thread}}
        graph.invoke({"messages": [HumanMessage("1 + 1?", id="h1")]}, config)
        graph.invoke(Command(resume=True), config)
        older = list(graph.get_state_history(config))[3].config
        graph.update_state(older, {"messages": [HumanMessage(f"forked{big}", id="hf")]})
        graph.invoke({"messages": [HumanMessage("and 5 + 1?", id="h2")]}, config)


def thread_messages(saver: SqliteSaver, thread: str) -> list[BaseMessage]:
    tup = saver.get_tuple({"configurable": {"thread_id": thread}})
    assert tup is not None
    return list(tup.checkpoint["channel_values"]["messages"])


def agents_session(db: Path, session: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add `items` to `session` of database `db` with `SQLiteSession.add_items`; return what
    `get_items` then gives."""
    async def run() -> list[Any]:
        s = SQLiteSession(session, db)
        try:
            await s.add_items(list(items))  # type: ignore[arg-type]
            return await s.get_items()
        finally:
            s.close()

    return asyncio.run(run())


def corrupt_row(db: Path, session: str) -> None:
    """A row that is not JSON, as a damaged file would hold (the SDK skips such rows)."""
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)", (session, "{oops"))


def assert_resumes(replica: Replica, conv: str) -> None:
    """The conversation resumes for every provider with no violation of its rules."""
    for provider in PROVIDERS:
        wire = replica.resume(conv, provider)
        assert wire, provider
        assert check(provider, wire) == [], provider
