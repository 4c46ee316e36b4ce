"""The thread index behind `ConvgraphSaver.list(None, filter=…)` and `threads(…)`: whatever was
written, retracted, synced in, or done to its file, every answer equals the scan of every
conversation it replaced, and `check_index` finds the index equal to a rebuild."""

from __future__ import annotations

import datetime
import decimal
import itertools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from convgraph import Replica
from convgraph.integrations._langgraph_index import INDEX_FILE, digest
from convgraph.integrations._langgraph_index_state import decode, encode
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.sync.local import sync_replicas

pytestmark = pytest.mark.usefixtures("product_defaults")

# values Python compares equal across types (1, 1.0, True), values JSON cannot hold (a date), None
VALUES = [0, 1, 1.0, True, False, 2.5, "1", "a", "b", None, [1, "a"], (1, "a"), (1.0, "a"), {"k": 1},
          {"k": 1.0}, datetime.date(2024, 1, 1), decimal.Decimal(1)]
KEYS = ["user", "topic", "step", "source"]
THREADS = ["a", "b", "c", "d"]
_clock = itertools.count(1)

META = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
FILTER = st.dictionaries(st.sampled_from(KEYS), st.sampled_from([*VALUES, 7, "zz"]), max_size=2)
OP = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(THREADS), META, st.integers(0, 5)),
    st.tuples(st.just("delete_thread"), st.sampled_from(THREADS)),
    st.tuples(st.just("delete_for_runs"), st.sampled_from([repr(v) for v in VALUES])),
    st.tuples(st.just("prune"), st.sampled_from(THREADS)),
    st.tuples(st.just("compact"), st.sampled_from(THREADS)),
)


def put(saver: ConvgraphSaver, thread: str, meta: dict[str, Any], fork: int = 0) -> None:
    """A checkpoint of `thread` with `meta` (run_id: meta's user's repr), on its `fork`-th newest one."""
    history = list(saver.list({"configurable": {"thread_id": thread}}))
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    if history:
        config = history[fork % len(history)].config
    ck = empty_checkpoint()
    ck["id"] = str(uuid6(clock_seq=next(_clock)))
    ck["channel_values"] = {"messages": [HumanMessage(f"m{ck['id']}", id=f"m-{ck['id']}")]}
    ck["channel_versions"] = {"messages": next(_clock)}
    saver.put(config, ck, {**meta, "run_id": repr(meta.get("user"))}, {"messages": ck["channel_versions"]["messages"]})


def scanned_threads(saver: ConvgraphSaver) -> list[tuple[str, str]]:
    """(thread id, conversation) of every conversation whose genesis marks a LangGraph thread."""
    threads = []
    for conv in saver.replica.conversations():
        first = saver.replica.first(conv)
        mark = first.payload.get("meta", {}).get("langgraph") if first is not None and first.kind == "genesis" else None
        if mark is not None:
            threads.append((mark["thread_id"], conv))
    return sorted(threads)


def scan(saver: ConvgraphSaver, wanted: dict[str, Any], limit: int | None = None) -> list[tuple[str, str]]:
    """What `list(None, filter=wanted, limit=limit)` gave before the index: every conversation's
    genesis read, every thread folded, every checkpoint's metadata compared."""
    out = []
    for thread_id, conv in scanned_threads(saver):
        for ck in saver._thread(conv).listed(None):
            metadata = saver._meta(ck)
            if not any(metadata.get(k) != v for k, v in wanted.items()):
                out.append((thread_id, ck.id))
    return out[:limit] if limit is not None else out


def listed(saver: ConvgraphSaver, wanted: dict[str, Any], limit: int | None = None) -> list[tuple[str, str]]:
    return [(t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_id"])
            for t in saver.list(None, filter=wanted, limit=limit)]


def agree(saver: ConvgraphSaver, wanted: dict[str, Any], limit: int | None = None) -> None:
    """Every search the index answers equals the scan: list by filter (and limit), threads by
    filter, by title (with and without the filter) and by owner."""
    want = scan(saver, wanted, limit)
    assert listed(saver, wanted, limit) == want
    threads = sorted({t for t, _ in scan(saver, wanted)})
    assert [i.thread_id for i in saver.threads(filter=wanted)] == threads
    live = sorted({t for t, _ in scan(saver, {})})
    for t in THREADS[:2]:
        title = f"LangGraph thread {t}"
        assert [i.thread_id for i in saver.threads(title=title)] == [x for x in live if x == t]
        assert [i.thread_id for i in saver.threads(title=title, filter=wanted)] == [x for x in threads if x == t]
    rooted = {t: first.actor for t, conv in scanned_threads(saver) if (first := saver.replica.first(conv))}
    for owner in {*rooted.values(), b"\x00" * 32}:
        assert [i.thread_id for i in saver.threads(owner=owner)] == [t for t in live if rooted[t] == owner]


def apply(saver: ConvgraphSaver, op: tuple[Any, ...]) -> None:
    if op[0] == "put":
        put(saver, op[1], op[2], op[3])
    elif op[0] == "delete_thread":
        saver.delete_thread(op[1])
    elif op[0] == "delete_for_runs":
        saver.delete_for_runs([op[1]])
    elif op[0] == "prune":
        saver.prune([op[1]])
    elif saver.conversation(op[1]) is not None:
        saver.compact(op[1])


@settings(max_examples=25, deadline=None)
@given(st.lists(OP, min_size=1, max_size=10), st.lists(FILTER, min_size=1, max_size=3),
       st.sampled_from([None, 1, 3]))
def test_listing_by_metadata_equals_the_full_scan_after_writes_and_deletes(
    ops: list[tuple[Any, ...]], filters: list[dict[str, Any]], limit: int | None,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        replica = Replica.open(Path(tmp) / "home")
        saver = ConvgraphSaver(replica)
        for op in ops:
            apply(saver, op)
            for wanted in filters:
                agree(saver, wanted, limit)
        assert saver.check_index() == []  # rows and postings alike
        state = saver._index.sync()
        body = encode(state, "s")
        again = decode(body, "s")
        assert again is not None and encode(again, "s") == body  # its lines written again as read
        assert again == state
        saver.rebuild_index()  # written to the file: a fresh saver starts from it
        replica.close()
        with Replica.open(Path(tmp) / "home") as again:
            fresh = ConvgraphSaver(again)
            for wanted in filters:
                agree(fresh, wanted, limit)
            for op in ops[:3]:  # and goes on from there, rows and postings still as the file gave them
                apply(fresh, op)
                for wanted in filters:
                    agree(fresh, wanted, limit)
            state = fresh._index.sync()  # partly as read, partly changed since: written, read back whole
            assert decode(encode(state, "s"), "s") == state
            assert fresh.check_index() == []


def test_equal_values_of_other_types_digest_alike_and_others_do_not() -> None:
    assert digest(1) == digest(1.0) == digest(True)
    assert digest({"k": [1, "a"]}) == digest({"k": [1.0, "a"]})
    assert digest("1") != digest(1)
    assert digest(0) != digest(None)
    assert digest(datetime.date(2024, 1, 1)) is None  # matched on the loaded value
    assert digest(float("nan")) is None


def test_a_thread_synced_from_another_replica_is_found_there() -> None:
    a, b = Replica.in_memory(), Replica.in_memory()
    ours, theirs = ConvgraphSaver(a), ConvgraphSaver(b)
    put(ours, "x", {"user": "u1"})
    put(theirs, "y", {"user": "u1"})
    assert listed(theirs, {"user": "u1"}) == scan(theirs, {"user": "u1"})  # the index caught up once
    sync_replicas(a, b)
    put(ours, "z", {"user": "u1"})
    put(ours, "x", {"user": "u2"})
    sync_replicas(a, b)
    agree(theirs, {"user": "u1"})
    assert {t for t, _ in listed(theirs, {"user": "u1"})} == {"x", "y", "z"}
    assert [i.thread_id for i in theirs.threads(owner=a.actor)] == ["x", "z"]
    assert [i.thread_id for i in theirs.threads(title="LangGraph thread y")] == ["y"]
    ours.retract_thread("z")  # a delete everywhere: the retractions sync
    sync_replicas(a, b)
    agree(theirs, {"user": "u1"})
    assert theirs.check_index() == []


def test_a_compacted_thread_is_found_whole() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    for i in range(3):
        put(saver, "c", {"user": f"u{i}"})
    assert len(listed(saver, {})) == 3
    saver.compact("c")
    put(saver, "c", {"user": "u9"})
    for wanted in ({}, {"user": "u0"}, {"user": "u9"}):
        agree(saver, wanted)
    assert ConvgraphSaver(replica).check_index() == []  # a rebuild meets the compacted thread mid-stream


@pytest.mark.parametrize("damage", ["garbage", "truncated", "forged", "foreign", "stale"])
def test_a_damaged_stale_or_foreign_index_file_is_rebuilt(tmp_path: Path, damage: str) -> None:
    home = tmp_path / "home"
    with Replica.open(home) as replica:
        saver = ConvgraphSaver(replica)
        for i, thread in enumerate(THREADS):
            put(saver, thread, {"user": f"u{i % 2}"})
        saver.rebuild_index()
        kept = (home / INDEX_FILE).read_bytes()
        put(saver, "late", {"user": "u0"})
        saver.rebuild_index()
    path = home / INDEX_FILE
    if damage == "garbage":
        path.write_bytes(b"\x00not an index")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-40])
    elif damage == "forged":  # another thread's user swapped in: the signature no longer holds
        head, body = path.read_bytes().split(b"\n", 1)
        path.write_bytes(head + b"\n" + body.replace(digest("u0").encode(), digest("u1").encode()))
    elif damage == "foreign":  # a valid index, signed by another replica for its own records
        with Replica.open(tmp_path / "other") as other:
            other_saver = ConvgraphSaver(other)
            put(other_saver, "elsewhere", {"user": "u0"})
            other_saver.rebuild_index()
        path.write_bytes((tmp_path / "other" / INDEX_FILE).read_bytes())
    else:  # an older file of this replica: valid, behind, caught up from its cursor
        path.write_bytes(kept)
    with Replica.open(home) as replica:
        fresh = ConvgraphSaver(replica)
        for wanted in ({}, {"user": "u0"}, {"user": "u1"}):
            agree(fresh, wanted)
        assert {t for t, _ in listed(fresh, {"user": "u0"})} == {"a", "c", "late"}
        assert fresh.check_index() == []


def test_an_index_that_differs_from_the_records_is_reported_and_rebuilt(tmp_path: Path) -> None:
    with Replica.open(tmp_path / "home") as replica:
        saver = ConvgraphSaver(replica)
        put(saver, "a", {"user": "u0"})
        assert saver.check_index() == []
        state = saver._index.sync()
        row = next(r for r in state.rows.values() if r is not None)
        row.checkpoints.clear()  # as a bug would leave it: the thread's checkpoints lost
        assert listed(saver, {"user": "u0"}) == []
        assert len(saver.check_index()) == 1
        saver.rebuild_index()
        assert saver.check_index() == []
        agree(saver, {"user": "u0"})


def test_a_rolled_back_write_leaves_nothing_in_the_index(tmp_path: Path) -> None:
    with Replica.open(tmp_path / "home") as replica:
        saver = ConvgraphSaver(replica)
        put(saver, "a", {"user": "u0"})
        seen: list[set[str]] = []

        def write_then_fail() -> None:
            with replica.transaction():
                put(saver, "b", {"user": "u0"})
                seen.append({t for t, _ in listed(saver, {"user": "u0"})})
                raise RuntimeError

        with pytest.raises(RuntimeError):
            write_then_fail()
        assert seen == [{"a", "b"}]  # seen inside the transaction
        put(saver, "c", {"user": "u1"})
        agree(saver, {"user": "u0"})
        assert [t for t, _ in listed(saver, {"user": "u0"})] == ["a"]
        assert saver.check_index() == []


@pytest.mark.parametrize("damage", ["dropped", "added", "title", "order"])
def test_postings_that_differ_from_the_rows_are_reported_and_rebuilt(tmp_path: Path, damage: str) -> None:
    with Replica.open(tmp_path / "home") as replica:
        saver = ConvgraphSaver(replica)
        put(saver, "a", {"user": "u0"})
        put(saver, "b", {"user": "u1"})
        postings = saver._index.sync().postings
        if damage == "dropped":  # as a bug would leave it: a thread no longer posted under its user
            postings.meta[("user", digest("u0") or "")].clear()
            assert listed(saver, {"user": "u0"}) == []
        elif damage == "added":
            postings.add("nowhere", {"user": digest("u1") or ""})
        elif damage == "title":
            postings.titles.clear()
            assert saver.threads(title="LangGraph thread a") == []
        else:
            postings.order.reverse()
        found = saver.check_index()
        assert len(found) == 1 and "postings" in found[0]
        saver.rebuild_index()
        assert saver.check_index() == []
        agree(saver, {"user": "u0"})


def test_a_value_with_no_normal_form_is_a_candidate_for_every_filter() -> None:
    saver = ConvgraphSaver(Replica.in_memory())
    put(saver, "a", {"user": decimal.Decimal(1)})  # no normal form, yet equal to 1, 1.0 and True
    put(saver, "b", {"user": 1})
    put(saver, "c", {"user": datetime.date(2024, 1, 1)})
    for wanted in ({"user": 1}, {"user": True}, {"user": 2}, {"user": datetime.date(2024, 1, 1)}):
        agree(saver, wanted)
    assert {t for t, _ in listed(saver, {"user": 1.0})} == {"a", "b"}


def test_a_file_written_again_after_reading_holds_what_changed_and_what_was_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Replica.open(home) as replica:
        saver = ConvgraphSaver(replica)
        for i, thread in enumerate(THREADS):
            put(saver, thread, {"user": f"u{i % 2}", "topic": thread})
        saver.rebuild_index()
    with Replica.open(home) as replica:
        saver = ConvgraphSaver(replica)
        agree(saver, {"user": "u0"})  # some postings and rows decoded, the rest still as read
        put(saver, "0-new", {"user": "u1"})  # a new thread, sorted first, numbered last
        put(saver, "c", {"user": "u1", "topic": "c"})
        saver.delete_thread("b")
        saver._index._write(saver._index.sync())  # as every 256 changes: not a rebuild
    with Replica.open(home) as replica:
        saver = ConvgraphSaver(replica)
        for wanted in ({}, {"user": "u0"}, {"user": "u1"}, {"topic": "c"}, {"topic": "b"}):
            agree(saver, wanted)
        assert {t for t, _ in listed(saver, {"user": "u1"})} == {"0-new", "c", "d"}
        assert saver.check_index() == []
