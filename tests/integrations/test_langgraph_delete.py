"""`ConvgraphSaver.delete_thread` forgets the thread's conversation on this replica: its bytes
leave the SQLite file, the thread index drops it, other threads and other replicas keep theirs,
and the thread id used again starts a new generation that reads back alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph.state import CompiledStateGraph

from convgraph import Replica
from convgraph.integrations._langgraph_index import INDEX_FILE
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.replica.home import DB_FILE
from convgraph.sync.local import sync_replicas
from integrations.test_langgraph import _graph

pytestmark = pytest.mark.usefixtures("product_defaults")

SECRET = "the-launch-code-4417"


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _contents(graph: CompiledStateGraph[Any, Any, Any, Any], thread: str) -> list[Any]:
    return [m.content for m in graph.get_state(_config(thread)).values.get("messages", [])]


def _on_disk(home: Path) -> bytes:
    db = home / DB_FILE
    wal = Path(f"{db}-wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_delete_thread_frees_its_bytes_and_keeps_the_other_thread(tmp_path: Path) -> None:
    home = tmp_path / "home"
    replica = Replica.open(home)
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    for i in range(30):
        graph.invoke({"messages": [HumanMessage(f"{SECRET} {i}")]}, _config("doomed"))
        graph.invoke({"messages": [HumanMessage(f"kept {i}")]}, _config("kept"))
    kept = _contents(graph, "kept")
    saver.threads()  # the index file is written with both threads in it
    assert SECRET.encode() in _on_disk(home)
    size = len(_on_disk(home))
    saver.delete_thread("doomed")
    assert SECRET.encode() not in _on_disk(home)
    assert len(_on_disk(home)) < size
    assert _contents(graph, "doomed") == [] and saver.conversation("doomed") is None
    assert _contents(graph, "kept") == kept
    assert [t.thread_id for t in saver.threads()] == ["kept"]
    assert saver.check_index() == [] and b"doomed" not in (home / INDEX_FILE).read_bytes()
    assert replica.verify().ok
    again = ConvgraphSaver(replica)  # a fresh saver reads the index file back
    assert [t.thread_id for t in again.threads()] == ["kept"] and again.check_index() == []
    replica.close()


def test_the_thread_id_used_again_starts_afresh_in_a_new_generation() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    graph.invoke({"messages": [HumanMessage("old")]}, _config("t1"))
    old = saver.conversation("t1")
    saver.delete_thread("t1")
    saver.delete_thread("t1")  # nothing held: nothing to do
    graph.invoke({"messages": [HumanMessage("new")]}, _config("t1"))
    new = saver.conversation("t1")
    assert new is not None and new != old
    assert _contents(graph, "t1") == ["new", "reply 1"]
    graph.invoke({"messages": [HumanMessage("new")]}, _config("never deleted"))
    assert len(list(saver.list(_config("t1")))) == len(list(saver.list(_config("never deleted"))))
    genesis = replica.first(new)
    assert genesis is not None and genesis.payload["meta"]["langgraph"] == {"thread_id": "t1", "generation": 1}
    saver.delete_thread("t1")
    graph.invoke({"messages": [HumanMessage("third")]}, _config("t1"))
    third = replica.first(saver.conversation("t1") or "")
    assert third is not None and third.payload["meta"]["langgraph"]["generation"] == 2
    assert _contents(graph, "t1") == ["third", "reply 1"]
    assert [t.thread_id for t in saver.threads()] == ["never deleted", "t1"] and saver.check_index() == []
    assert replica.verify().ok


def test_other_replicas_keep_the_thread_and_sync_does_not_bring_it_back() -> None:
    ours, peer = Replica.in_memory(), Replica.in_memory()
    saver, theirs = ConvgraphSaver(ours), ConvgraphSaver(peer, owners=[ours.actor])
    graph, their_graph = _graph(saver), _graph(theirs)
    for i in range(3):
        graph.invoke({"messages": [HumanMessage(f"m{i}")]}, _config("t1"))
    sync_replicas(ours, peer)
    whole = _contents(their_graph, "t1")
    saver.delete_thread("t1")
    sync_replicas(ours, peer)
    sync_replicas(peer, ours)
    assert _contents(graph, "t1") == [] and saver.threads() == []
    assert _contents(their_graph, "t1") == whole and peer.verify().ok
    # used again here, then synced: the peer holds both generations and reads the newest
    graph.invoke({"messages": [HumanMessage("fresh")]}, _config("t1"))
    sync_replicas(ours, peer)
    assert len(peer.conversations()) == 2
    their_fresh = ConvgraphSaver(peer, owners=[ours.actor])
    assert _contents(_graph(their_fresh), "t1") == ["fresh", "reply 1"]
    assert [t.thread_id for t in their_fresh.threads()] == ["t1"]
    assert their_fresh.check_index() == []


def test_retract_thread_deletes_everywhere() -> None:
    ours, peer = Replica.in_memory(), Replica.in_memory()
    saver, theirs = ConvgraphSaver(ours), ConvgraphSaver(peer, owners=[ours.actor])
    graph = _graph(saver)
    graph.invoke({"messages": [HumanMessage("m0")]}, _config("t1"))
    sync_replicas(ours, peer)
    saver.retract_thread("t1")
    sync_replicas(ours, peer)
    assert _contents(_graph(theirs), "t1") == [] and theirs.threads() == []
