"""Property: whatever a graph does (steps, forks from any earlier checkpoint), reading the
thread back from `ConvgraphSaver` gives what LangGraph's own `InMemorySaver` gives, every
message is one turn record, and the replica verifies."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from convgraph import Replica
from convgraph.integrations.langgraph import ConvgraphSaver

pytestmark = pytest.mark.usefixtures("product_defaults")

CONFIG: Any = {"configurable": {"thread_id": "prop"}}
TURNS = ("user_message", "agent_message", "tool_result")

# ("step", n): invoke on the latest checkpoint; ("fork", i): invoke on the i-th checkpoint
# of the history (newest first, modulo its length), as time travel does
OPS = st.lists(st.tuples(st.sampled_from(["step", "fork"]), st.integers(0, 30)), min_size=1, max_size=8)


def _graph(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"reply to {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def _contents(values: dict[str, Any]) -> list[str]:
    return [m.content for m in values.get("messages", [])]


def _run(graph: CompiledStateGraph[Any, Any, Any, Any], ops: list[tuple[str, int]]) -> list[list[str]]:
    """Apply `ops`; the history read back (newest first), as message contents."""
    for k, (op, n) in enumerate(ops):
        config = CONFIG
        if op == "fork":
            history = list(graph.get_state_history(CONFIG))
            if history:
                config = history[n % len(history)].config
        graph.invoke({"messages": [HumanMessage(f"m{k}")]}, config)
    return [_contents(s.values) for s in graph.get_state_history(CONFIG)]


@settings(max_examples=15, deadline=None)
@given(OPS)
def test_a_thread_reads_back_as_langgraphs_own_saver_reads_it(ops: list[tuple[str, int]]) -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    ours, theirs = _graph(saver), _graph(InMemorySaver())
    assert _run(ours, ops) == _run(theirs, ops)
    assert _contents(ours.get_state(CONFIG).values) == _contents(theirs.get_state(CONFIG).values)
    conv = saver.conversation("prop")
    assert conv is not None
    turns = [r for r in replica.iter_records(conv) if r.kind in TURNS]
    assert len(turns) == 2 * len(ops)  # each invoke adds two messages, each one turn, once
    assert replica.verify().ok
