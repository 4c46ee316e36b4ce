"""A thread's first read in a fresh saver (`_langgraph_cold.partial`: the checkpoint through the
thread index, only the records it needs) equals the full fold's, checkpoint by checkpoint and
namespace by namespace, over trims, edits, forks, subgraphs, interrupts, compaction, large values,
an encrypting serde, retractions, a thread synced from another replica, and records written
before keyframes and named writes; and the fast path is taken where it promises to be."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, MessagesState, StateGraph, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from convgraph import Replica
from convgraph.integrations import _langgraph_frames as frames
from convgraph.integrations import _langgraph_writes as writing
from convgraph.integrations._langgraph_cold import partial
from convgraph.integrations._large import THRESHOLD
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.sync.local import sync_replicas

pytestmark = pytest.mark.usefixtures("product_defaults")

_salt = itertools.count()


class _Xor:
    """A test cipher (a keystream that repeats): enough to make the serde encrypting."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "xor", bytes(b ^ 0x5A for b in plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor"
        return bytes(b ^ 0x5A for b in ciphertext)


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    page: str


def _config(thread: str = "t", ns: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    return {"configurable": conf}


def _graph(saver: ConvgraphSaver, *, page: str | None = None, trim: bool = False) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Answers each message (and asks on "ask"), puts `page` in a channel of its own, and keeps
    the last two messages when `trim`."""

    def reply(state: State) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, HumanMessage) and "ask" in str(last.content):
            answer = interrupt({"question": last.content})
            return {"messages": [AIMessage(f"approved: {answer}", id=f"gate-{last.id}")]}
        out: dict[str, Any] = {"messages": [AIMessage(f"re: {str(last.content)[:20]}", id=f"a-{last.id}")]}
        return out if page is None else {**out, "page": page}

    def trimmer(state: State) -> dict[str, Any]:
        return {"messages": [RemoveMessage(id=str(m.id)) for m in state["messages"][:-2]]}

    builder = StateGraph(State)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    if trim:
        builder.add_node("trim", trimmer)
        builder.add_edge("reply", "trim")
        builder.add_edge("trim", END)
    else:
        builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def _say(graph: CompiledStateGraph[Any, Any, Any, Any], k: int, config: Any = None, text: str = "m") -> None:
    graph.invoke({"messages": [HumanMessage(f"{text}{k}", id=f"h{k}")]}, config or _config())


def _fast(replica: Replica, thread: str = "t", ns: str = "", **kw: Any) -> bool:
    """Whether a fresh saver's first read of `ns`'s latest checkpoint takes the partial path."""
    saver = ConvgraphSaver(replica, **kw)
    conv = saver.conversation(thread)
    assert conv is not None
    row = saver._index.sync().rows[conv]
    assert row is not None
    return partial(replica, conv, row, ns, None) is not None


def _same_first_reads(replica: Replica, thread: str = "t", **kw: Any) -> int:
    """Each namespace's latest and every live checkpoint, read first by a fresh saver, equal the
    full fold's; how many were compared."""
    full = ConvgraphSaver(replica, **kw)
    listed = list(full.list(_config(thread)))
    for ns in {t.config["configurable"]["checkpoint_ns"] for t in listed}:
        assert ConvgraphSaver(replica, **kw).get_tuple(_config(thread, ns)) == full.get_tuple(_config(thread, ns))
    for tup in listed:
        assert ConvgraphSaver(replica, **kw).get_tuple(tup.config) == tup
    return len(listed)


def _keyframes(replica: Replica, conv: str) -> list[Any]:
    """The messages deltas of the thread's checkpoint records that hold a whole list."""
    out = []
    for r in replica.iter_records(conv):
        delta = r.payload.get("tree", {}).get("messages", {}).get("messages") if r.kind == "code_snapshot" else None
        if delta is not None and "base" not in delta:
            out.append(delta)
    return out


def test_a_long_thread_is_read_first_through_a_keyframe_and_equals_the_full_fold() -> None:
    replica = Replica.in_memory()
    graph = _graph(ConvgraphSaver(replica))
    for k in range(80):
        _say(graph, k)
    conv = ConvgraphSaver(replica).conversation("t")
    assert conv is not None
    assert len(_keyframes(replica, conv)) >= 3  # the first list, then one each 64 deltas at most
    thread = ConvgraphSaver(replica)._thread(conv)
    for ck in thread.checkpoints.values():  # no chain back to a full list passes the bound
        depth, delta = 0, ck.tree["messages"].get("messages")
        while delta is not None:
            depth += 1
            base = delta.get("base")
            delta = None if base is None else thread.by_cid[base].tree["messages"]["messages"]
        assert depth <= frames.KEYFRAME_MIN
    assert _fast(replica)
    assert _same_first_reads(replica) == 240
    assert len(_graph(ConvgraphSaver(replica)).get_state(_config()).values["messages"]) == 160


def test_trims_and_edits_read_first_as_the_full_fold() -> None:
    replica = Replica.in_memory()
    graph = _graph(ConvgraphSaver(replica), trim=True)
    for k in range(6):
        _say(graph, k)
    held = graph.get_state(_config()).values["messages"]
    graph.update_state(_config(), {"messages": [held[0].model_copy(update={"content": "edited"})]})
    assert [m.content for m in _graph(ConvgraphSaver(replica)).get_state(_config()).values["messages"]] == [
        "edited", "re: m5"]
    assert _fast(replica)
    _same_first_reads(replica)


def test_forks_read_first_as_the_full_fold() -> None:
    replica = Replica.in_memory()
    graph = _graph(ConvgraphSaver(replica))
    for k in range(4):
        _say(graph, k)
    history = list(graph.get_state_history(_config()))
    _say(graph, 10, history[5].config, text="fork")
    _say(graph, 11)
    assert len(ConvgraphSaver(replica).forks("t")) == 1
    assert _fast(replica)
    _same_first_reads(replica)


def test_subgraph_namespaces_read_first_as_the_full_fold() -> None:
    replica = Replica.in_memory()

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"sub reply {len(state['messages'])}")]}

    sub = StateGraph(MessagesState)
    sub.add_node("reply", reply)
    sub.add_edge(START, "reply")
    sub.add_edge("reply", END)
    builder = StateGraph(MessagesState)
    builder.add_node("sub", sub.compile(checkpointer=True))
    builder.add_edge(START, "sub")
    builder.add_edge("sub", END)
    graph = builder.compile(checkpointer=ConvgraphSaver(replica))
    for k in range(3):
        _say(graph, k)
    assert _fast(replica) and _fast(replica, ns="sub")
    _same_first_reads(replica)


def test_an_interrupt_reads_first_as_the_full_fold_and_compaction_takes_the_full_fold() -> None:
    replica = Replica.in_memory()
    graph = _graph(ConvgraphSaver(replica), page="p")
    _say(graph, 0)
    _say(graph, 1, text="ask")
    state = _graph(ConvgraphSaver(replica)).get_state(_config())
    assert state.next == ("reply",) and state.tasks[0].interrupts  # pending writes read first
    assert _fast(replica)
    _same_first_reads(replica)
    graph.invoke(Command(resume="yes"), _config())
    _say(graph, 2)
    ConvgraphSaver(replica).compact("t")
    _say(graph, 3)
    assert not _fast(replica)  # a snapshot: only the full fold reads it
    _same_first_reads(replica)


def test_retracted_writes_and_a_pruned_line_read_first_as_the_full_fold() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    _say(graph, 0)
    _say(graph, 1, text="ask")
    conv = saver.conversation("t")
    assert conv is not None
    latest = saver._thread(conv).latest("")
    assert latest is not None
    writes = sorted(saver._thread(conv).write_records("", latest.id))
    assert writes
    replica.write(conv, "retraction", {"target": writes[0], "reason": "test"})
    assert _fast(replica)
    _same_first_reads(replica)
    saver.prune(["t"])
    _same_first_reads(replica)
    saver.retract_thread("t")
    assert ConvgraphSaver(replica).get_tuple(_config()) is None


@pytest.mark.parametrize("sealed", [True, False])
def test_large_values_and_a_keyframe_held_as_an_artifact_read_first_as_the_full_fold(
    monkeypatch: pytest.MonkeyPatch, sealed: bool,
) -> None:
    monkeypatch.setattr(frames, "KEYFRAME_MIN", 2)
    replica = Replica.in_memory()
    kw: dict[str, Any] = {"serde": EncryptedSerializer(_Xor())} if sealed else {}
    graph = _graph(ConvgraphSaver(replica, **kw), page="x" * (THRESHOLD + 10))
    big = "y" * (THRESHOLD // 2)
    first = [SystemMessage(big + "1", id="s1"), SystemMessage(big + "2", id="s2"), HumanMessage(big, id="h1")]
    graph.invoke({"messages": first}, _config())  # system messages stay inline: a list past THRESHOLD
    for k in range(2, 6):
        _say(graph, k)
    conv = ConvgraphSaver(replica, **kw).conversation("t")
    assert conv is not None
    assert any(type(d["spans"]) is dict for d in _keyframes(replica, conv))  # a keyframe as an artifact
    assert _fast(replica, **kw)
    _same_first_reads(replica, **kw)
    assert replica.verify().ok


def test_records_written_before_keyframes_and_named_writes_read_first_as_the_full_fold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    replica = Replica.in_memory()
    with monkeypatch.context() as old:  # the saver as it wrote before: no keyframe, writes not named
        old.setattr(writing, "keyframe_due", lambda *_: False)
        old.setattr(writing, "WRITES_NAMED", "not_read")
        graph = _graph(ConvgraphSaver(replica))
        for k in range(40):
            _say(graph, k)
    conv = ConvgraphSaver(replica).conversation("t")
    assert conv is not None
    assert len(_keyframes(replica, conv)) == 1  # only the first list
    assert not _fast(replica)
    _same_first_reads(replica)
    _say(_graph(ConvgraphSaver(replica)), 40)  # continued today: a keyframe at once (80 deltas back)
    assert len(_keyframes(replica, conv)) == 2
    assert _fast(replica)
    _same_first_reads(replica)


def test_a_thread_synced_from_another_replica_reads_first_as_the_full_fold(tmp_path: Path) -> None:
    a, b = Replica.open(tmp_path / "a"), Replica.open(tmp_path / "b")
    graph_a = _graph(ConvgraphSaver(a))
    for k in range(3):
        _say(graph_a, k)
    conv = ConvgraphSaver(a).conversation("t")
    assert conv is not None
    a.write(conv, "grant", {"grantee": b.actor, "rights": ["write"]})
    assert sync_replicas(a, b, salts=lambda: next(_salt).to_bytes(8, "big")).converged
    _say(_graph(ConvgraphSaver(b, owners=[a.actor])), 3)
    assert sync_replicas(a, b, salts=lambda: next(_salt).to_bytes(8, "big")).converged
    for replica, owners in ((a, []), (b, [a.actor])):
        assert _fast(replica, owners=owners)
        _same_first_reads(replica, owners=owners)
    a.close()
    b.close()


OPS = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "remove", "edit", "fork", "ask"]),
                         st.integers(0, 30)), min_size=1, max_size=14)


@settings(max_examples=25, deadline=None)
@given(OPS)
def test_a_first_read_equals_the_full_fold_whatever_the_graph_did(ops: list[tuple[str, int]]) -> None:
    replica = Replica.in_memory()
    graph = _graph(ConvgraphSaver(replica))
    for k, (op, n) in enumerate(ops):
        state = graph.get_state(_config())
        held = list(state.values.get("messages", [])) if state.values else []
        if state.next:  # an interrupt waits: answer it first
            graph.invoke(Command(resume=f"r{k}"), _config())
        elif op == "remove" and held:
            graph.update_state(_config(), {"messages": [RemoveMessage(id=str(held[n % len(held)].id))]})
        elif op == "edit" and held:
            graph.update_state(_config(), {"messages": [held[n % len(held)].model_copy(update={"content": f"e{k}"})]})
        elif op == "fork" and (history := list(graph.get_state_history(_config()))):
            _say(graph, k, history[n % len(history)].config, text="fork")
        else:
            _say(graph, k, text="ask" if op == "ask" else "m")
    assert _fast(replica)  # nothing compacted or pruned, versions all the saver's: the fast path holds
    _same_first_reads(replica)
