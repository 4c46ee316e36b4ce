"""`import_openai_agents_session`: an Agents SDK `SQLiteSession` (filled by the SDK's own
`add_items`) moves into the conversation a `ConvgraphSession` continues: `get_items` gives the
SDK's items, the next `add_items` goes on after them, a second run writes nothing, and a
conversation that is another history is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.memory import SQLiteSession
from import_sources import agents_session, assert_resumes, corrupt_row

from convgraph import (
    ImportConflictError,
    ImportSourceError,
    Replica,
    UnknownConversationError,
    import_openai_agents,
)
from convgraph.importers.openai_agents_session import import_openai_agents_session, session_conversation
from convgraph.integrations.openai_agents import ConvgraphSession
from integrations.test_openai_agents import RUN, ScriptedModel, script, weather

pytestmark = pytest.mark.usefixtures("product_defaults")

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look it up."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
     "arguments": '{"city": "Paris"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "18C, clear"},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "It is 18C and clear.", "annotations": []}]},
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [{"type": "input_text", "text": "x" * (300 * 1024)}]},  # past 256 KiB
]
MORE: list[dict[str, Any]] = [{"role": "user", "content": "Thanks!"},
                              {"type": "function_call_output", "call_id": "call_1", "output": "again"}]


def _items(replica: Replica, conv: str) -> list[Any]:
    return asyncio.run(ConvgraphSession(replica, conv).get_items())


def _sdk_items(db: Path, session: str) -> list[Any]:
    s = SQLiteSession(session, db)
    try:
        return asyncio.run(s.get_items())
    finally:
        s.close()


def _count(replica: Replica, conv: str) -> int:
    return sum(1 for _ in replica.iter_records(conv))


def test_get_items_gives_the_sessions_items_and_the_next_add_continues_it(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    stored = agents_session(db, "s1", ITEMS)
    replica = Replica.in_memory()
    report = import_openai_agents_session(replica, db, "s1")
    assert report.conv == session_conversation(replica, "s1") and report.created
    assert (report.imported, report.already, report.unmapped) == (len(ITEMS), 0, ())
    assert _items(replica, report.conv) == stored == ITEMS
    records = list(replica.iter_records(report.conv))
    assert any(r.refs for r in records if r.kind == "user_message")  # the large item is an artifact
    session = ConvgraphSession(replica, report.conv)
    asyncio.run(session.add_items(MORE))  # type: ignore[arg-type]
    again = import_openai_agents_session(replica, db, "s1")  # went on here from all the source holds
    assert (again.imported, again.already) == (0, len(ITEMS))
    assert _items(replica, report.conv) == agents_session(db, "s1", MORE) == ITEMS + MORE
    assert import_openai_agents_session(replica, db, "s1").imported == 0  # the same items went on there
    assert_resumes(replica, report.conv)
    asyncio.run(session.add_items([{"role": "user", "content": "only here"}]))  # type: ignore[list-item]
    agents_session(db, "s1", [{"role": "user", "content": "only there"}])  # now the two differ
    with pytest.raises(ImportConflictError, match=r"\(item 9 differs\)"):
        import_openai_agents_session(replica, db, "s1")


def test_a_runner_goes_on_from_the_moved_session_as_from_the_sdks_own(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    steps = script()  # two runs on the SDK's session (reasoning, calls, outputs, messages), then one more

    async def ask(session: Any, question: str, outputs: list[Any]) -> ScriptedModel:
        model = ScriptedModel(outputs)
        agent = Agent(name="forecaster", instructions="Be brief.", model=model, tools=[weather])
        await Runner.run(agent, question, session=session, run_config=RUN)
        return model

    source = SQLiteSession("s1", db)
    asyncio.run(ask(source, "Weather in Oslo?", steps[:2]))
    asyncio.run(ask(source, "And Rome and Paris?", steps[2:4]))
    types = {i.get("type") for i in _sdk_items(db, "s1")}
    assert {"reasoning", "function_call", "function_call_output", "message"} <= types
    replica = Replica.in_memory()
    report = import_openai_agents_session(replica, db, "s1")
    moved = ConvgraphSession(replica, report.conv)
    assert _items(replica, report.conv) == _sdk_items(db, "s1")
    theirs = asyncio.run(ask(source, "Thanks!", [list(steps[4])]))
    ours = asyncio.run(ask(moved, "Thanks!", [list(steps[4])]))
    source.close()
    assert ours.inputs == theirs.inputs  # the model is sent the same history
    assert _items(replica, report.conv) == _sdk_items(db, "s1")


def test_a_second_import_writes_nothing_and_a_grown_session_only_what_is_new(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    agents_session(db, "s1", ITEMS[:4])
    agents_session(db, "other", [{"role": "user", "content": "not this one"}])
    replica = Replica.in_memory()
    first = import_openai_agents_session(replica, db, "s1")
    held = _count(replica, first.conv)
    again = import_openai_agents_session(replica, db, "s1")
    assert (again.conv, again.imported, again.already, again.changed) == (first.conv, 0, 4, False)
    assert _count(replica, first.conv) == held
    agents_session(db, "s1", ITEMS[4:])
    grown = import_openai_agents_session(replica, db, "s1", into=first.conv)
    assert (grown.imported, grown.already) == (len(ITEMS) - 4, 4)
    assert _items(replica, first.conv) == _sdk_items(db, "s1") == ITEMS


def test_a_conversation_the_message_import_made_is_continued_not_written_twice(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    agents_session(db, "s1", ITEMS[:4])
    replica = Replica.in_memory()
    earlier = import_openai_agents(replica, db, "s1")
    held = _count(replica, earlier.conv)
    agents_session(db, "s1", ITEMS[4:])
    moved = import_openai_agents_session(replica, db, "s1", into=earlier.conv)
    assert (moved.imported, moved.already) == (len(ITEMS) - 4, 4)
    assert _count(replica, earlier.conv) == held + len(ITEMS) - 4
    assert _items(replica, earlier.conv) == _sdk_items(db, "s1") == ITEMS


def test_rows_the_sdk_skips_or_a_session_cannot_hold_are_reported_and_the_rest_equal(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    agents_session(db, "s1", ITEMS[:2])
    corrupt_row(db, "s1")  # SQLiteSession.get_items skips it
    agents_session(db, "s1", [{"type": "function_call", "name": "f"}])  # no call_id: no turn holds it
    agents_session(db, "s1", ITEMS[2:4])
    replica = Replica.in_memory()
    report = import_openai_agents_session(replica, db, "s1")
    assert [(u.key, u.what) for u in report.unmapped] == [("3", "invalid_json"), ("4", "unreadable_item")]
    assert _items(replica, report.conv) == ITEMS[:4]
    assert import_openai_agents_session(replica, db, "s1").imported == 0


def test_a_conversation_that_is_another_history_is_refused_and_nothing_written(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    agents_session(db, "s1", ITEMS[:4])
    replica = Replica.in_memory()
    mine = ConvgraphSession.new(replica, "mine")
    asyncio.run(mine.add_items([{"role": "user", "content": "something else"}]))
    held = _count(replica, mine.session_id)
    with pytest.raises(ImportConflictError, match=r"holds 1 item\(s\) and session 's1' 4, neither the start "
                                                  r"of the other \(item 0 differs\)"):
        import_openai_agents_session(replica, db, "s1", into=mine.session_id)
    assert _count(replica, mine.session_id) == held
    with pytest.raises(UnknownConversationError):
        import_openai_agents_session(replica, db, "s1", into="cg1" + "a" * 32)


def test_no_such_session_or_file_says_what_there_is(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    agents_session(db, "s1", ITEMS[:1])
    with pytest.raises(ImportSourceError, match=r"no session 'nope'.*the sessions it holds: 's1'"):
        import_openai_agents_session(Replica.in_memory(), db, "nope")
    with pytest.raises(ImportSourceError, match="no such file"):
        import_openai_agents_session(Replica.in_memory(), tmp_path / "missing.sqlite", "s1")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ImportSourceError, match="not an Agents SDK SQLiteSession database"):
        import_openai_agents_session(Replica.in_memory(), junk, "s1")
