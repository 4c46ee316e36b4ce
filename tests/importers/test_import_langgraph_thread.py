"""`import_langgraph_thread`: a real `SqliteSaver` thread (subgraph, interrupt, resume, fork,
a message past 256 KiB) moves whole into `ConvgraphSaver`: every checkpoint, write and fork
reads back as the source's, the next `invoke` continues it as `SqliteSaver` would, a second
run writes nothing, and a thread that is another history is refused."""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from import_sources import forked_thread, held_graph, langgraph_thread
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from convgraph import ImportConflictError, ImportSourceError, Replica
from convgraph.importers import langgraph_thread as importer
from convgraph.importers.langgraph_thread import import_langgraph_thread
from convgraph.integrations.langgraph import ConvgraphSaver

pytestmark = pytest.mark.usefixtures("product_defaults")
THREAD: Any = {"configurable": {"thread_id": "t1"}}
BIG = "x" * (300 * 1024)  # past the 256 KiB a record holds inline


def _tuples(saver: Any, config: Any = THREAD) -> list[tuple[Any, ...]]:
    return [(t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes) for t in saver.list(config)]


def _count(replica: Replica, conv: str) -> int:
    return sum(1 for _ in replica.iter_records(conv))


def test_every_checkpoint_write_and_fork_reads_back_as_the_sources(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    forked_thread(db, "t1", big=BIG)
    replica = Replica.in_memory()
    report = import_langgraph_thread(replica, db, "t1")
    ours = ConvgraphSaver(replica)
    with SqliteSaver.from_conn_string(str(db)) as source:
        theirs = _tuples(source)
        assert _tuples(ours) == theirs
        namespaces = {t[0]["configurable"]["checkpoint_ns"] for t in theirs}
        assert len(namespaces) == 3  # the root and the subgraph's two runs
        assert any(pending for *_, pending in theirs)  # the interrupt waits as a pending write
        src, dst = held_graph().compile(checkpointer=source), held_graph().compile(checkpointer=ours)
        assert dst.get_state(THREAD, subgraphs=True) == src.get_state(THREAD, subgraphs=True)
        assert list(dst.get_state_history(THREAD)) == list(src.get_state_history(THREAD))
        assert dst.get_state(THREAD).next == ("tools",)
    assert (report.created, report.checkpoints, report.checkpoints_already, report.forks) == (True, len(theirs), 0, 1)
    assert report.writes > 0 and report.writes_already == 0 and report.changed
    records = list(replica.iter_records(report.conv))
    assert report.records == len(records)
    turns = [r for r in records if r.kind in ("user_message", "agent_message", "tool_result")]
    assert report.turns == len(turns)
    assert any(r.refs for r in turns)  # the large message is an artifact its turn names, as the saver makes it
    assert ConvgraphSaver(replica).conversation("t1") == report.conv


def test_the_next_invoke_continues_it_as_sqlite_saver_does(tmp_path: Path) -> None:
    db, mine = tmp_path / "lg.sqlite", tmp_path / "continued.sqlite"
    forked_thread(db, "t1")
    replica = Replica.in_memory()
    import_langgraph_thread(replica, db, "t1")
    shutil.copy(db, mine)
    with SqliteSaver.from_conn_string(str(mine)) as source:
        src, dst = held_graph().compile(checkpointer=source), held_graph().compile(checkpointer=ConvgraphSaver(replica))
        assert dst.invoke(Command(resume=True), THREAD) == src.invoke(Command(resume=True), THREAD)
        after_src, after_dst = src.get_state(THREAD), dst.get_state(THREAD)
        assert after_dst.values == after_src.values and after_dst.next == after_src.next == ()
        assert after_dst.values["messages"][-1].content == "the answer is 6"
        # the new checkpoints have ids of their own; the history says the same states, in order
        assert [s.values for s in dst.get_state_history(THREAD)] == [s.values for s in src.get_state_history(THREAD)]


def test_a_second_import_writes_nothing_and_a_grown_thread_only_what_is_new(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    forked_thread(db, "t1")
    replica = Replica.in_memory()
    first = import_langgraph_thread(replica, db, "t1")
    held = _count(replica, first.conv)
    again = import_langgraph_thread(replica, db, "t1")
    assert _count(replica, first.conv) == held
    assert (again.changed, again.created, again.records, again.checkpoints, again.writes) == (False, False, 0, 0, 0)
    assert (again.checkpoints_already, again.writes_already) == (first.checkpoints, first.writes)
    with SqliteSaver.from_conn_string(str(db)) as source:  # the source goes on: the import brings what is new
        held_graph().compile(checkpointer=source).invoke(Command(resume=True), THREAD)
        grown = import_langgraph_thread(replica, db, "t1")
        assert grown.checkpoints > 0 and grown.checkpoints_already == first.checkpoints
        assert _tuples(ConvgraphSaver(replica)) == _tuples(source)


def test_an_import_cut_short_holds_a_start_of_the_thread_and_a_second_run_completes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "lg.sqlite"
    forked_thread(db, "t1")
    with SqliteSaver.from_conn_string(str(db)) as source:
        theirs = _tuples(source)
    monkeypatch.setattr(importer, "_BATCH", 3)
    calls = 0
    put = ConvgraphSaver.put

    def failing(self: ConvgraphSaver, *args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 8:
            raise OSError("disk full")
        return put(self, *args)

    monkeypatch.setattr(ConvgraphSaver, "put", failing)
    replica = Replica.in_memory()
    with pytest.raises(OSError, match="disk full"):
        import_langgraph_thread(replica, db, "t1")
    cut = _tuples(ConvgraphSaver(replica))
    assert 0 < len(cut) < len(theirs)
    held = {t[0]["configurable"]["checkpoint_id"] for t in cut}
    assert all(t[3] is None or t[3]["configurable"]["checkpoint_id"] in held for t in cut)  # parents first
    monkeypatch.setattr(ConvgraphSaver, "put", put)
    done = import_langgraph_thread(replica, db, "t1")
    assert done.checkpoints_already == len(cut) and _tuples(ConvgraphSaver(replica)) == theirs


def test_the_database_is_only_read(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    forked_thread(db, "t1")
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    import_langgraph_thread(Replica.in_memory(), db, "t1")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_a_thread_that_is_another_history_is_refused_and_nothing_written(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    forked_thread(db, "t1")
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    held_graph().compile(checkpointer=saver).invoke({"messages": [HumanMessage("mine", id="m")]}, THREAD)
    conv = saver.conversation("t1")
    assert conv is not None
    held = _count(replica, conv)
    with pytest.raises(ImportConflictError, match=r"holds checkpoint '.*', but the source does not hold it") as err:
        import_langgraph_thread(replica, db, "t1")
    assert err.value.conv == conv and _count(replica, conv) == held


def test_a_thread_that_went_on_here_is_left_as_it_is_until_the_source_goes_on_too(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    forked_thread(db, "t1")
    replica = Replica.in_memory()
    report = import_langgraph_thread(replica, db, "t1")
    held_graph().compile(checkpointer=ConvgraphSaver(replica)).invoke(Command(resume=True), THREAD)  # goes on here
    held = _count(replica, report.conv)
    again = import_langgraph_thread(replica, db, "t1")  # the source holds nothing new: nothing to do
    assert (again.records, again.checkpoints, again.writes, _count(replica, report.conv)) == (0, 0, 0, held)
    assert again.checkpoints_already == report.checkpoints  # the source's, not those made here since
    with SqliteSaver.from_conn_string(str(db)) as source:  # the source goes on too: two histories now
        held_graph().compile(checkpointer=source).invoke(Command(resume=False), THREAD)
    with pytest.raises(ImportConflictError, match=r"(but the source does not hold it|wrote to it what the source "
                                                  r"does not hold) \(and the source holds more\)"):
        import_langgraph_thread(replica, db, "t1")
    assert _count(replica, report.conv) == held


def test_a_write_the_source_does_not_hold_is_another_history_when_the_source_grows(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    forked_thread(db, "t1")
    replica = Replica.in_memory()
    report = import_langgraph_thread(replica, db, "t1")
    saver = ConvgraphSaver(replica)
    latest = saver.get_tuple(THREAD)
    assert latest is not None
    saver.put_writes(latest.config, [("messages", [HumanMessage("not in the source", id="x")])], "other-task")
    assert import_langgraph_thread(replica, db, "t1").records == 0
    with SqliteSaver.from_conn_string(str(db)) as source:
        held_graph().compile(checkpointer=source).invoke(Command(resume=True), THREAD)
    held = _count(replica, report.conv)
    with pytest.raises(ImportConflictError, match="task 'other-task' wrote to it what the source does not hold"):
        import_langgraph_thread(replica, db, "t1")
    assert _count(replica, report.conv) == held


def test_no_such_thread_or_no_langgraph_database_says_what_there_is(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    langgraph_thread(db, "t1", [HumanMessage("1 + 1?")])
    with pytest.raises(ImportSourceError, match=r"no thread 'nope'.*the threads it holds: 't1'"):
        import_langgraph_thread(Replica.in_memory(), db, "nope")
    with pytest.raises(ImportSourceError, match="no such file"):
        import_langgraph_thread(Replica.in_memory(), tmp_path / "missing.sqlite", "t1")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ImportSourceError, match="not a LangGraph SqliteSaver database"):
        import_langgraph_thread(Replica.in_memory(), junk, "t1")


# a thread's history: ask a question, answer its interrupt (approve or refuse), fork at the nth
# checkpoint back (update_state), in any order LangGraph allows
_STEPS = st.lists(st.one_of(st.just(("ask", 0)), st.just(("approve", 0)), st.just(("refuse", 0)),
                            st.tuples(st.just("fork"), st.integers(0, 30))), min_size=1, max_size=6)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_STEPS)
def test_any_history_of_asks_answers_and_forks_reads_back_as_the_source(
    tmp_path: Path, steps: list[tuple[str, int]],
) -> None:
    db = tmp_path / f"lg-{abs(hash(tuple(steps)))}.sqlite"
    db.unlink(missing_ok=True)
    with SqliteSaver.from_conn_string(str(db)) as source:
        graph = held_graph().compile(checkpointer=source)
        for i, (step, n) in enumerate(steps):
            waiting = bool(graph.get_state(THREAD).next)
            if step == "ask" or not list(source.list(THREAD)):
                graph.invoke({"messages": [HumanMessage(f"{i} + 1?", id=f"h{i}")]}, THREAD)
            elif step in ("approve", "refuse") and waiting:
                graph.invoke(Command(resume=step == "approve"), THREAD)
            elif step == "fork":
                history = list(graph.get_state_history(THREAD))
                fork = {"messages": [HumanMessage(f"fork {i}", id=f"f{i}")]}
                graph.update_state(history[n % len(history)].config, fork)
        replica = Replica.in_memory()
        first = import_langgraph_thread(replica, db, "t1")
        assert _tuples(ConvgraphSaver(replica)) == _tuples(source)
        children = Counter((t[0]["configurable"]["checkpoint_ns"], t[3]["configurable"]["checkpoint_id"])
                           for t in _tuples(source) if t[3] is not None)
        assert first.forks == sum(n - 1 for n in children.values())  # a second child of one parent: a branch
        again = import_langgraph_thread(replica, db, "t1")
        assert (again.records, again.checkpoints_already) == (0, first.checkpoints)
