"""`import_langgraph`: a real `SqliteSaver` thread (a tool-calling graph run by LangGraph) becomes
the conversation's turns, once each, in order, tool calls paired with their results."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from import_sources import assert_resumes, langgraph_thread, update_thread
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from convgraph import ImportSourceError, Replica, Turn, import_langgraph

pytestmark = pytest.mark.usefixtures("product_defaults")


def _shape(m: BaseMessage) -> tuple[Any, ...]:
    """What a message says, as a turn must say it."""
    role = {HumanMessage: "user", AIMessage: "assistant", ToolMessage: "tool"}[type(m)]
    calls = tuple((c["id"], c["name"], c["args"]) for c in getattr(m, "tool_calls", ()))
    return role, m.content, calls, getattr(m, "tool_call_id", None)


def _turn_shape(t: Turn) -> tuple[Any, ...]:
    return t.role.value, t.text, tuple((c.id, c.name, c.input) for c in t.tool_calls), t.tool_use_id


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_imported_transcript_is_the_threads_message_list(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    source = langgraph_thread(db, "t1", [SystemMessage("Be brief."), HumanMessage("1 + 1?")],
                              [HumanMessage("and 5 + 1?")])
    assert [type(m) for m in source].count(ToolMessage) == 2  # the graph did call its tool
    replica = Replica.in_memory()
    report = import_langgraph(replica, db, "t1")
    turns = replica.transcript(report.conv)
    assert [_turn_shape(t) for t in turns] == [_shape(m) for m in source if not isinstance(m, SystemMessage)]
    assert replica.system(report.conv) == "Be brief."
    assert report.created and report.imported == len(source) and report.already == 0 and report.unmapped == ()
    kinds = [r.kind for r in replica.iter_records(report.conv)]
    assert kinds[0] == "genesis" and kinds.count("tool_result") == 2
    calls = [c.id for t in turns for c in t.tool_calls]
    assert calls == [t.tool_use_id for t in turns if t.tool_use_id]  # each call answered, in order
    assert_resumes(replica, report.conv)


def test_a_second_import_writes_nothing_and_a_grown_thread_only_what_is_new(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    langgraph_thread(db, "t1", [HumanMessage("1 + 1?")])
    replica = Replica.in_memory()
    first = import_langgraph(replica, db, "t1")
    heads = replica.heads(first.conv)
    again = import_langgraph(replica, db, "t1", into=first.conv)
    assert (again.imported, again.already, again.created, again.changed) == (0, first.imported, False, False)
    assert replica.heads(first.conv) == heads
    source = langgraph_thread(db, "t1", [HumanMessage("and 5 + 1?")])
    grown = import_langgraph(replica, db, "t1", into=first.conv)
    assert (grown.imported, grown.already) == (len(source) - first.imported, first.imported)
    assert [_turn_shape(t) for t in replica.transcript(first.conv)] == [_shape(m) for m in source]
    assert_resumes(replica, first.conv)


def test_messages_no_turn_holds_are_reported_and_left_out(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    langgraph_thread(db, "t1", [HumanMessage("1 + 1?")])
    odd = ChatMessage(role="critic", content="too slow", id="critic-1")
    blocks = SystemMessage([{"type": "text", "text": "rules"}], id="sys-1")
    source = update_thread(db, "t1", [odd, blocks, HumanMessage("thanks", id="h-9")])
    replica = Replica.in_memory()
    report = import_langgraph(replica, db, "t1")
    assert [(u.key, u.what, u.kept) for u in report.unmapped] == [("critic-1", "chat_message", False),
                                                                  ("sys-1", "system_message", False)]
    assert report.imported == len(source) - 2
    assert replica.transcript(report.conv)[-1].text == "thanks"
    assert_resumes(replica, report.conv)


def test_the_database_is_only_read(tmp_path: Path) -> None:
    """Its file is unchanged (a WAL reader, as any, may leave empty -wal and -shm files)."""
    db = tmp_path / "lg.sqlite"
    langgraph_thread(db, "t1", [HumanMessage("1 + 1?")])
    before = _digest(db)
    import_langgraph(Replica.in_memory(), db, "t1")
    assert _digest(db) == before
    wal = db.with_name(db.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_each_turn_keeps_its_message_as_convgraph_saver_does(tmp_path: Path) -> None:
    """The message less its content in `meta["langchain"]`: with the turn's content, the message."""
    db = tmp_path / "lg.sqlite"
    source = langgraph_thread(db, "t1", [HumanMessage("1 + 1?")])
    replica = Replica.in_memory()
    report = import_langgraph(replica, db, "t1")
    serde = JsonPlusSerializer()
    shells = [(r.payload["meta"]["langchain"], r.payload["content"])
              for r in replica.iter_records(report.conv) if r.kind != "genesis"]
    assert [serde.loads_typed((s["t"], s["b"])).model_copy(update={"content": c}) for s, c in shells] == source


def test_an_unknown_thread_or_file_says_what_there_is(tmp_path: Path) -> None:
    db = tmp_path / "lg.sqlite"
    langgraph_thread(db, "t1", [HumanMessage("hi")])
    with pytest.raises(ImportSourceError, match=r"no thread 'nope'.*the threads it holds: 't1'"):
        import_langgraph(Replica.in_memory(), db, "nope")
    with pytest.raises(ImportSourceError, match="no such file"):
        import_langgraph(Replica.in_memory(), tmp_path / "missing.sqlite", "t1")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(ImportSourceError, match="not a LangGraph SqliteSaver database"):
        import_langgraph(Replica.in_memory(), junk, "t1")
    with pytest.raises(ImportSourceError, match=r"no list channel 'notes'.*channels: .*messages"):
        import_langgraph(Replica.in_memory(), db, "t1", channel="notes")


def test_an_anthropic_style_tool_use_block_is_one_call_and_invalid_calls_are_reported(tmp_path: Path) -> None:
    """ChatAnthropic puts each call in the content as a `tool_use` block and in `tool_calls`:
    the turn holds it once, so no request repeats its id."""
    db = tmp_path / "lg.sqlite"
    call = {"id": "toolu_1", "name": "add", "args": {"a": 1}}
    source = update_thread(db, "t1", [
        HumanMessage("1 + 1?", id="h1"),
        AIMessage([{"type": "text", "text": "Adding."},
                   {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}],
                  tool_calls=[call], id="a1"),
        ToolMessage("2", tool_call_id="toolu_1", id="t1"),
        AIMessage("", invalid_tool_calls=[{"id": "bad", "name": "add", "args": "{oops", "error": "not JSON",
                                           "type": "invalid_tool_call"}], id="a2"),
        AIMessage("It is 2.", id="a3"),
    ])
    replica = Replica.in_memory()
    report = import_langgraph(replica, db, "t1")
    assert report.imported == len(source)
    assert [(u.key, u.what, u.kept) for u in report.unmapped] == [("a2", "invalid_tool_calls", True)]
    adding = replica.transcript(report.conv)[1]
    assert adding.content == ({"type": "text", "text": "Adding."},)
    assert [(c.id, c.input) for c in adding.tool_calls] == [("toolu_1", {"a": 1})]
    assert_resumes(replica, report.conv)


def test_a_message_edited_in_the_thread_since_its_import_is_reported_not_written_again(tmp_path: Path) -> None:
    """`add_messages` replaces a message by id: the conversation keeps what it imported, and says so."""
    db = tmp_path / "lg.sqlite"
    source = langgraph_thread(db, "t1", [HumanMessage("1 + 1?", id="q1")])
    replica = Replica.in_memory()
    report = import_langgraph(replica, db, "t1")
    update_thread(db, "t1", [HumanMessage("2 + 2?", id="q1")])
    again = import_langgraph(replica, db, "t1", into=report.conv)
    assert (again.imported, again.already) == (0, len(source))
    assert [(u.key, u.what, u.kept) for u in again.unmapped] == [("q1", "changed", False)]
    assert replica.transcript(report.conv)[0].text == "1 + 1?"
