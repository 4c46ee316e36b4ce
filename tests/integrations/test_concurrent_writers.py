"""Two writers on one thread, session, history or store: nothing is lost, and every replica
that holds the same records reads the same (docs/adapters.md, "Concurrent writers").

A LangGraph thread's second writer becomes an explicit fork (a convgraph branch when one
replica sees both writes, `Fork.concurrent` when two replicas synced them later); a session or a
chat history keeps both writers' items, merged in canonical order; a memory item keeps both
versions, the later in canonical order winning on every replica.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from convgraph import Replica
from convgraph.integrations.langchain import ConvgraphChatMessageHistory
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.integrations.langgraph_store import ConvgraphStore
from convgraph.integrations.openai_agents import ConvgraphSession
from convgraph.sync.local import sync_replicas

CONFIG: Any = {"configurable": {"thread_id": "shared"}}


def _graph(saver: ConvgraphSaver, wait: threading.Barrier | None = None) -> CompiledStateGraph[Any]:
    def reply(state: MessagesState) -> dict[str, Any]:
        if wait is not None:
            wait.wait(timeout=30)  # both runs have read the thread before either writes its answer
        return {"messages": [AIMessage(f"re: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def _texts(graph: CompiledStateGraph[Any], config: Any = CONFIG) -> list[str]:
    return [str(m.content) for m in graph.get_state(config).values["messages"]]


def _shared(owner: Replica, other: Replica, conv: str) -> None:
    owner.write(conv, "grant", {"grantee": other.actor, "rights": ["write"]})
    assert sync_replicas(owner, other).converged


def test_two_replicas_that_continue_a_thread_offline_fork_it_and_lose_nothing(tmp_path: Path) -> None:
    laptop, phone = Replica.open(tmp_path / "laptop"), Replica.open(tmp_path / "phone")
    on_laptop = ConvgraphSaver(laptop)
    laptop_graph = _graph(on_laptop)
    laptop_graph.invoke({"messages": [HumanMessage("start")]}, CONFIG)
    conv = on_laptop.conversation("shared")
    assert conv is not None
    _shared(laptop, phone, conv)
    on_phone = ConvgraphSaver(phone, owners=[laptop.actor])
    phone_graph = _graph(on_phone)

    laptop_graph.invoke({"messages": [HumanMessage("from laptop")]}, CONFIG)
    phone_graph.invoke({"messages": [HumanMessage("from phone")]}, CONFIG)
    assert sync_replicas(laptop, phone).converged

    # one head on both: the newest checkpoint, the phone's
    assert _texts(laptop_graph) == _texts(phone_graph) == ["start", "re: start", "from phone", "re: from phone"]
    # the fork is explicit, the same on both replicas, and names the other line's tip
    (fork,) = on_laptop.forks("shared")
    assert on_phone.forks("shared") == [fork]
    assert fork.concurrent and len(fork.lines) == 2
    assert [line.branch for line in fork.lines] == [None, None]
    (other,) = [line for line in fork.lines if not line.head]
    tip = {"configurable": {"thread_id": "shared", "checkpoint_id": other.tip}}
    assert _texts(laptop_graph, tip) == ["start", "re: start", "from laptop", "re: from laptop"]
    # nothing lost: both writers' messages are in the history and in convgraph's transcript
    seen = {str(m.content) for s in laptop_graph.get_state_history(CONFIG) for m in s.values["messages"]}
    assert {"from laptop", "re: from laptop", "from phone", "re: from phone"} <= seen
    said = [t.text for t in laptop.transcript(conv)]
    assert sorted(said) == sorted(["start", "re: start", "from laptop", "re: from laptop",
                                   "from phone", "re: from phone"])
    # the other line goes on from its tip's config, as time travel does
    laptop_graph.invoke({"messages": [HumanMessage("back to mine")]}, tip)
    assert _texts(laptop_graph)[-4:] == ["from laptop", "re: from laptop", "back to mine", "re: back to mine"]
    assert laptop.verify().ok and phone.verify().ok


def test_two_writers_on_one_replica_put_the_second_on_a_branch(tmp_path: Path) -> None:
    replica = Replica.open(tmp_path / "r")
    saver = ConvgraphSaver(replica)
    _graph(saver).invoke({"messages": [HumanMessage("start")]}, CONFIG)
    both = threading.Barrier(2)
    graph = _graph(saver, both)
    errors: list[BaseException] = []

    def run(text: str) -> None:
        try:
            graph.invoke({"messages": [HumanMessage(text)]}, CONFIG)
        except BaseException as exc:  # collected: the test asserts none
            errors.append(exc)

    runs = [threading.Thread(target=run, args=(t,)) for t in ("one", "two")]
    for r in runs:
        r.start()
    for r in runs:
        r.join(timeout=60)
    assert not errors and not any(r.is_alive() for r in runs)

    forks = saver.forks("shared")
    assert len(forks) == 1 and not forks[0].concurrent  # one replica saw both: a real branch
    branched = [line for line in forks[0].lines if line.branch is not None]
    assert len(branched) == 1 and branched[0].branch == f"langgraph/{branched[0].checkpoint_id}"
    conv = saver.conversation("shared")
    assert conv is not None
    assert any(r.kind == "branch" and r.payload["name"] == branched[0].branch for r in replica.iter_records(conv))
    # both runs' answers are kept: one on the head, the other on its line
    tips = [{"configurable": {"thread_id": "shared", "checkpoint_id": line.tip}} for line in forks[0].lines]
    answers = {_texts(graph, tip)[-1] for tip in tips}
    assert answers == {"re: one", "re: two"}
    assert replica.verify().ok


def _items(who: str) -> list[list[Any]]:
    return [[{"role": "user", "content": f"{who}: question"}],
            [{"type": "function_call", "call_id": f"call-{who}", "name": "look", "arguments": "{}",
              "id": f"fc_{who}"},
             {"type": "function_call_output", "call_id": f"call-{who}", "output": "found"},
             {"type": "message", "role": "assistant", "id": f"msg_{who}", "status": "completed",
              "content": [{"type": "output_text", "text": f"{who}: answer", "annotations": []}]}]]


def test_two_replicas_writing_one_session_keep_every_item_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        laptop, phone = Replica.open(tmp_path / "laptop"), Replica.open(tmp_path / "phone")
        mine = ConvgraphSession.new(laptop)
        await mine.add_items([{"role": "user", "content": "hello"}])
        _shared(laptop, phone, mine.session_id)
        theirs = ConvgraphSession(phone, mine.session_id)
        for a, b in zip(_items("laptop"), _items("phone"), strict=True):  # interleaved in time
            await mine.add_items(a)
            await theirs.add_items(b)
        assert sync_replicas(laptop, phone).converged
        merged = await mine.get_items()
        assert merged == await theirs.get_items()  # the same list on both
        flat_laptop = [i for batch in _items("laptop") for i in batch]
        flat_phone = [i for batch in _items("phone") for i in batch]
        assert len(merged) == 1 + len(flat_laptop) + len(flat_phone)  # every item once
        for own in (flat_laptop, flat_phone):  # each writer's items in its own order
            assert [i for i in merged if i in own] == own
        # what a provider is sent is repaired: each call right before its own output
        sent = mine.resume("openai-responses")
        calls = [k for k, i in enumerate(sent) if i.get("type") == "function_call"]
        assert len(calls) == 2 and all(sent[k + 1].get("call_id") == sent[k]["call_id"] for k in calls)
        assert laptop.verify().ok and phone.verify().ok

    asyncio.run(scenario())


def test_two_replicas_writing_one_chat_history_keep_every_message_once(tmp_path: Path) -> None:
    laptop, phone = Replica.open(tmp_path / "laptop"), Replica.open(tmp_path / "phone")
    mine = ConvgraphChatMessageHistory.new(laptop, "chat")
    mine.add_messages([HumanMessage("hello")])
    _shared(laptop, phone, mine.conv)
    theirs = ConvgraphChatMessageHistory(phone, mine.conv)
    mine.add_messages([HumanMessage("laptop asks"), AIMessage("laptop answer")])
    theirs.add_messages([HumanMessage("phone asks"), AIMessage("phone answer")])
    assert sync_replicas(laptop, phone).converged
    merged = [str(m.content) for m in mine.messages]
    assert merged == [str(m.content) for m in theirs.messages]
    assert sorted(merged) == sorted(["hello", "laptop asks", "laptop answer", "phone asks", "phone answer"])
    assert merged.index("laptop asks") < merged.index("laptop answer")
    assert merged.index("phone asks") < merged.index("phone answer")


def test_two_replicas_writing_one_memory_item_keep_both_versions(tmp_path: Path) -> None:
    laptop, phone = Replica.open(tmp_path / "laptop"), Replica.open(tmp_path / "phone")
    mine = ConvgraphStore(laptop)
    mine.put(("user", "1"), "food", {"likes": "pizza"})
    conv = mine.conversation
    assert conv is not None
    _shared(laptop, phone, conv)
    theirs = ConvgraphStore(phone, owners=[laptop.actor])
    mine.put(("user", "1"), "food", {"likes": "pasta"})  # neither has seen the other's write
    theirs.put(("user", "1"), "food", {"likes": "sushi"})
    assert sync_replicas(laptop, phone).converged
    here, there = mine.get(("user", "1"), "food"), theirs.get(("user", "1"), "food")
    assert here is not None and there is not None and here.value == there.value
    versions = mine.history(("user", "1"), "food")
    assert versions == theirs.history(("user", "1"), "food")
    assert sorted(v.value["likes"] for v in versions if v.value) == ["pasta", "pizza", "sushi"]
    assert here.value == versions[-1].value  # the later in canonical order wins, on both
