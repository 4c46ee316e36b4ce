"""`ConvgraphStore` answers as LangGraph's own `InMemoryStore` and `SqliteStore` do, keeps its
memory as signed records two replicas share, and runs in a real graph."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore, GetOp, PutOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from convgraph import ManualClock, Replica
from convgraph.errors import AdapterError
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.integrations.langgraph_store import ConvgraphStore
from convgraph.sync.local import sync_replicas

DOC = Path(__file__).parents[2] / "docs" / "integrations-store.md"

labels = st.sampled_from(["a", "b", "c"])
namespaces = st.lists(labels, min_size=1, max_size=3).map(tuple)
keys = st.sampled_from(["k1", "k2", "k3"])
values = st.fixed_dictionaries(
    {"n": st.integers(0, 2), "s": st.sampled_from(["x", "y"]), "b": st.booleans()},
    optional={"tags": st.lists(st.sampled_from(["p", "q"]), max_size=2),
              "deep": st.fixed_dictionaries({"v": st.integers(0, 2)})},
)
number_ops = st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"])
filters = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["n", "s", "b"]), st.none(), min_size=1, max_size=2).flatmap(
        lambda chosen: st.fixed_dictionaries({
            field: {"n": st.one_of(st.integers(0, 2), st.dictionaries(number_ops, st.integers(0, 2), min_size=1, max_size=2)),
                    "s": st.one_of(st.sampled_from(["x", "y"]),
                                   st.dictionaries(st.sampled_from(["$eq", "$ne"]), st.sampled_from(["x", "y"]),
                                                   min_size=1)),
                    "b": st.booleans()}[field]
            for field in chosen})),
)
BATTERY = [
    *({"n": {op: v}} for op in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte") for v in range(3)),
    *({"n": v} for v in range(3)), {"s": "x"}, {"s": {"$ne": "x"}}, {"b": True}, {"b": {"$ne": True}},
    {"tags": ["p"]},  # a nested map filter: SqliteStore reads its keys as operators, so not here {"n": {"$gte": 1, "$lt": 2}, "s": "y"},
]
paths = st.lists(st.one_of(labels, st.just("*")), max_size=2).map(tuple)

puts = st.tuples(st.just("put"), namespaces, keys, values)
deletes = st.tuples(st.just("delete"), namespaces, keys)
gets = st.tuples(st.just("get"), namespaces, keys)
searches = st.tuples(st.just("search"), st.lists(labels, max_size=2).map(tuple), filters,
                     st.sampled_from([1, 2, 100]), st.sampled_from([0, 1, 3]),
                     st.sampled_from([None, "x", "anything"]))
lists = st.tuples(st.just("list"), st.one_of(st.none(), paths), st.one_of(st.none(), paths),
                  st.sampled_from([None, 1, 2]), st.sampled_from([1, 3, 100]), st.sampled_from([0, 1]))
batches = st.tuples(st.just("batch"), st.lists(st.one_of(puts, deletes, gets), min_size=1, max_size=4))
operations = st.lists(st.one_of(puts, puts, deletes, gets, searches, searches, lists, batches), max_size=25)


def _sqlite_store() -> SqliteStore:
    store = SqliteStore(sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None))
    store.setup()
    return store


def _plain(found: Any) -> Any:
    """What two stores must agree on: values, keys and namespaces, never timestamps."""
    if found is None:
        return None
    if isinstance(found, list):
        return [_plain(x) for x in found]
    if isinstance(found, tuple):
        return found
    return (found.namespace, found.key, json.dumps(found.value, sort_keys=True))


def _as_op(step: tuple[Any, ...]) -> GetOp | PutOp:
    if step[0] == "put":
        return PutOp(step[1], step[2], step[3])
    if step[0] == "delete":
        return PutOp(step[1], step[2], None)
    return GetOp(step[1], step[2])


def _run(store: BaseStore, step: tuple[Any, ...]) -> Any:
    kind = step[0]
    if kind == "put":
        return store.put(step[1], step[2], step[3])
    if kind == "delete":
        return store.delete(step[1], step[2])
    if kind == "get":
        return _plain(store.get(step[1], step[2]))
    if kind == "search":
        _, prefix, filter, limit, offset, query = step
        return _plain(store.search(prefix, filter=filter, limit=limit, offset=offset, query=query))
    if kind == "list":
        _, prefix, suffix, max_depth, limit, offset = step
        return store.list_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit,
                                     offset=offset)
    return [_plain(r) for r in store.batch([_as_op(s) for s in step[1]])]


def _everything(store: BaseStore) -> list[Any]:
    return sorted(_plain(store.search((), limit=10_000)))


@given(operations)
def test_random_operations_answer_as_langgraphs_own_stores(steps: list[tuple[Any, ...]]) -> None:
    ours, memory, sqlite = ConvgraphStore(Replica.in_memory()), InMemoryStore(), _sqlite_store()
    for step in steps:
        got, in_memory, in_sqlite = _run(ours, step), _run(memory, step), _run(sqlite, step)
        if step[0] == "search":
            # LangGraph's stores order a search differently (InMemoryStore: by insertion; the SQL
            # stores: newest update first, ties as the table scans them); ours: newest first, no
            # ties. So a page is compared by its size, and the whole answer as a set.
            assert len(got) == len(in_memory) == len(in_sqlite)
            whole = (*step[:3], 10000, 0, step[5])
            assert sorted(_run(ours, whole)) == sorted(_run(memory, whole)) == sorted(_run(sqlite, whole))
        elif step[0] == "list":
            # InMemoryStore also lists namespaces that hold nothing any more (all deleted, or only
            # read): the SQL store and ours list those holding an item
            assert got == in_sqlite
            whole = (*step[:4], 10000, 0)
            assert set(_run(ours, whole)) <= set(_run(memory, whole))
        else:
            assert got == in_memory == in_sqlite
    assert _everything(ours) == _everything(memory) == _everything(sqlite)
    for filter in BATTERY:  # every filter form on whatever the steps left
        whole = ("search", (), filter, 10_000, 0, None)
        assert sorted(_run(ours, whole)) == sorted(_run(memory, whole)) == sorted(_run(sqlite, whole))
    assert ours.replica.verify().ok


def test_a_search_pages_newest_update_first() -> None:
    clock = ManualClock()
    store = ConvgraphStore(Replica.in_memory(clock=clock))
    for key in ("k1", "k2", "k3"):
        store.put(("a",), key, {"key": key})
        clock.advance(1)
    store.put(("a",), "k1", {"key": "k1", "again": True})
    assert [i.key for i in store.search(("a",))] == ["k1", "k3", "k2"]
    assert [i.key for i in store.search(("a",), limit=1, offset=1)] == ["k3"]
    first = store.get(("a",), "k1")
    assert first is not None and first.created_at < first.updated_at  # created by its first put


def test_filters_the_reference_stores_disagree_on_are_pinned() -> None:
    store = ConvgraphStore(Replica.in_memory())
    store.put(("a",), "with", {"n": 3, "s": "b", "deep": {"v": 1, "w": 2}})
    store.put(("a",), "without", {"s": "c"})
    keys = lambda f: sorted(i.key for i in store.search(("a",), filter=f))  # noqa: E731
    assert keys({"n": {"$gt": 1}}) == ["with"]  # a missing field is no match (InMemoryStore raises)
    assert keys({"s": {"$gte": "b"}}) == ["with", "without"]  # text compares as text, as in SQL
    assert keys({"n": {"$ne": 3}}) == ["without"]  # as InMemoryStore: a missing field is not 3
    assert keys({"n": {"$gt": "x"}}) == []
    assert keys({"deep": {"v": 1}}) == ["with"]  # field by field, as InMemoryStore (SqliteStore raises)
    with pytest.raises(AdapterError, match="unsupported filter operator"):
        store.search(("a",), filter={"n": {"$in": [3]}})


def test_query_is_ignored_by_default_and_a_substring_when_asked() -> None:
    replica = Replica.in_memory()
    plain, matching = ConvgraphStore(replica), ConvgraphStore(replica, match_query=True)
    plain.put(("m",), "1", {"text": "Likes Coffee"})
    plain.put(("m",), "2", {"text": "likes tea"})
    assert len(plain.search(("m",), query="coffee")) == 2
    assert [i.key for i in matching.search(("m",), query="COFFEE")] == ["1"]
    assert [i.key for i in matching.search(("m",), query="likes")] == ["2", "1"]


def test_ttl_expires_at_the_clock_and_reads_refresh_it() -> None:
    clock = ManualClock()
    store = ConvgraphStore(Replica.in_memory(clock=clock))
    store.put(("s",), "short", {"v": 1}, ttl=1)  # minutes
    store.put(("s",), "kept", {"v": 2})
    clock.advance(50_000)
    assert store.get(("s",), "short") is not None  # refreshes: now expires at 110 s
    clock.advance(50_000)
    assert store.get(("s",), "short", refresh_ttl=False) is not None
    clock.advance(20_001)
    assert store.get(("s",), "short") is None
    assert [i.key for i in store.search(("s",))] == ["kept"]
    assert store.sweep_ttl() == 1
    versions = store.history(("s",), "short")
    assert [v.value for v in versions] == [{"v": 1}, None]  # the sweep recorded the end


def test_ttl_config_sets_a_default_and_can_read_without_refreshing() -> None:
    clock = ManualClock()
    store = ConvgraphStore(Replica.in_memory(clock=clock), ttl={"default_ttl": 2, "refresh_on_read": False})
    store.put(("s",), "k", {"v": 1})
    clock.advance(100_000)
    assert store.search(("s",))[0].key == "k"  # read, not refreshed
    clock.advance(20_001)
    assert store.get(("s",), "k") is None and store.list_namespaces() == []
    store.put(("s",), "forever", {"v": 2}, ttl=None)
    clock.advance(10**9)
    assert store.get(("s",), "forever") is not None


def test_a_value_no_record_can_hold_is_refused_and_nothing_is_written() -> None:
    store = ConvgraphStore(Replica.in_memory())
    with pytest.raises(AdapterError, match="cannot be stored"):
        store.put(("a",), "k", {"n": float("nan")})
    assert store.conversation is None and store.search(()) == []


def test_two_replicas_share_one_memory_and_every_version_names_its_author(tmp_path: Path) -> None:
    laptop, phone = Replica.open(tmp_path / "laptop"), Replica.open(tmp_path / "phone")
    mine = ConvgraphStore(laptop)
    mine.put(("user", "1"), "food", {"likes": "pizza"})
    conv = mine.conversation
    assert conv is not None
    laptop.write(conv, "grant", {"grantee": phone.actor, "rights": ["write"]})
    assert sync_replicas(laptop, phone).converged

    theirs = ConvgraphStore(phone, owners=[laptop.actor])
    assert theirs.conversation == conv
    assert theirs.get(("user", "1"), "food").value == {"likes": "pizza"}  # type: ignore[union-attr]
    theirs.put(("user", "1"), "food", {"likes": "sushi"})
    assert sync_replicas(laptop, phone).converged
    assert mine.get(("user", "1"), "food").value == {"likes": "sushi"}  # type: ignore[union-attr]
    assert [(v.actor, v.value) for v in mine.history(("user", "1"), "food")] == [
        (laptop.actor, {"likes": "pizza"}), (phone.actor, {"likes": "sushi"})]
    assert laptop.verify().ok and phone.verify().ok


def test_a_graph_node_reads_and_writes_memories_through_the_injected_store(tmp_path: Path) -> None:
    def remember(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
        said = str(state["messages"][-1].content)
        store.put(("user", "memories"), f"m{len(state['messages'])}-{said}", {"text": said})
        known = sorted(i.value["text"] for i in store.search(("user", "memories"), limit=100))
        return {"messages": [AIMessage(" / ".join(known))]}

    builder = StateGraph(MessagesState)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    a, b = Replica.open(tmp_path / "a"), Replica.open(tmp_path / "b")
    store_a = ConvgraphStore(a)
    graph_a = builder.compile(checkpointer=ConvgraphSaver(a), store=store_a)
    graph_a.invoke({"messages": [HumanMessage("tea")]}, {"configurable": {"thread_id": "t-a"}})
    conv = store_a.conversation
    assert conv is not None
    a.write(conv, "grant", {"grantee": b.actor, "rights": ["write"]})
    assert sync_replicas(a, b).converged

    graph_b = builder.compile(checkpointer=ConvgraphSaver(b), store=ConvgraphStore(b, owners=[a.actor]))
    out = graph_b.invoke({"messages": [HumanMessage("jazz")]}, {"configurable": {"thread_id": "t-b"}})
    assert out["messages"][-1].content == "jazz / tea"  # the phone's node sees the laptop's memory
    assert sync_replicas(a, b).converged
    out = asyncio.run(graph_a.ainvoke({"messages": [HumanMessage("rain")]}, {"configurable": {"thread_id": "t-a"}}))
    assert out["messages"][-1].content == "jazz / rain / tea"


def test_reads_fold_only_what_arrived_since_the_last_one() -> None:
    replica = Replica.in_memory()
    store = ConvgraphStore(replica)
    store.put(("a",), "k", {"v": 1})
    calls: list[object] = []
    arrived = replica.arrived

    def counting(conv: str, mark: Any = None) -> Any:
        got = arrived(conv, mark)
        calls.append(len(got.entries))
        return got

    replica.arrived = counting  # type: ignore[method-assign]
    for _ in range(3):
        store.get(("a",), "k")
    store.put(("a",), "k2", {"v": 2})
    assert calls == [0, 0, 0, 0, 1]  # nothing folded twice: the put's record once


def test_a_compacted_store_reads_back_the_same() -> None:
    replica = Replica.in_memory()
    store = ConvgraphStore(replica)
    for i in range(5):
        store.put(("a", str(i % 2)), f"k{i}", {"i": i})
    store.delete(("a", "0"), "k0")
    before = (_plain(store.search(("a",))), store.list_namespaces(), len(store.history(("a", "0"), "k0")))
    conv = store.conversation
    assert conv is not None
    replica.checkpoint(conv, compact=True)
    assert (_plain(store.search(("a",))), store.list_namespaces(), len(store.history(("a", "0"), "k0"))) == before
    fresh = ConvgraphStore(replica)
    assert _plain(fresh.search(("a",))) == before[0]


def test_the_python_blocks_of_the_store_doc_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert blocks
    namespace: dict[str, object] = {"__name__": "store_doc"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)


def test_the_async_methods_and_a_delete_of_nothing() -> None:
    replica = Replica.in_memory()
    store = ConvgraphStore(replica)

    async def use() -> Any:
        await store.aput(("a",), "k", {"v": 1})
        await store.adelete(("a",), "gone")  # holds nothing: writes nothing
        return await store.aget(("a",), "k"), await store.asearch(("a",)), await store.alist_namespaces()

    item, found, listed = asyncio.run(use())
    assert item.value == {"v": 1} and [i.key for i in found] == ["k"] and listed == [("a",)]
    conv = store.conversation
    assert conv is not None
    assert [r.kind for r in replica.records(conv)] == ["genesis", "code_snapshot"]
