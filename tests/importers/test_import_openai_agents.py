"""`import_openai_agents`: an Agents SDK `SQLiteSession` (filled by the SDK's own `add_items`)
becomes turns that a `ConvgraphSession` gives back as the very items the SDK stored."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from import_sources import agents_session, assert_resumes, corrupt_row

from convgraph import ImportSourceError, Replica, import_openai_agents
from convgraph.integrations.openai_agents import ConvgraphSession

pytestmark = pytest.mark.usefixtures("product_defaults")

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look it up."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
     "arguments": '{"city": "Paris"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "18C, clear"},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "It is 18C and clear.", "annotations": []}]},
    {"role": "user", "content": [{"type": "input_text", "text": "Thanks!"}]},
]


def _items(replica: Replica, conv: str) -> list[Any]:
    return asyncio.run(ConvgraphSession(replica, conv).get_items())


def test_the_imported_session_gives_back_the_items_the_sdk_stored(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    stored = agents_session(db, "s1", ITEMS)
    replica = Replica.in_memory()
    report = import_openai_agents(replica, db, "s1")
    assert (report.imported, report.already, report.unmapped) == (len(ITEMS), 0, ())
    assert _items(replica, report.conv) == stored == ITEMS
    turns = replica.transcript(report.conv)
    assert [t.role.value for t in turns] == ["user", "assistant", "assistant", "tool", "assistant", "user"]
    assert turns[2].tool_calls[0].id == turns[3].tool_use_id == "call_1"
    assert_resumes(replica, report.conv)


def test_a_second_import_writes_nothing_and_a_grown_session_only_what_is_new(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    agents_session(db, "s1", ITEMS[:4])
    agents_session(db, "other", [{"role": "user", "content": "not this one"}])
    replica = Replica.in_memory()
    first = import_openai_agents(replica, db, "s1")
    heads = replica.heads(first.conv)
    again = import_openai_agents(replica, db, "s1", into=first.conv)
    assert (again.imported, again.already, again.changed) == (0, 4, False)
    assert replica.heads(first.conv) == heads
    stored = agents_session(db, "s1", ITEMS[4:])
    grown = import_openai_agents(replica, db, "s1", into=first.conv)
    assert (grown.imported, grown.already) == (2, 4)
    assert _items(replica, first.conv) == stored == ITEMS
    assert_resumes(replica, first.conv)


def test_what_no_turn_holds_is_reported(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    agents_session(db, "s1", [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
        {"type": "function_call", "name": "f"},  # no call_id: not an item the SDK defines
    ])
    corrupt_row(db, "s1")
    agents_session(db, "s1", [{"role": "assistant", "content": "hello"}])
    replica = Replica.in_memory()
    report = import_openai_agents(replica, db, "s1")
    assert [(u.key, u.what, u.kept) for u in report.unmapped] == [
        ("1", "system_message", True), ("3", "unreadable_item", False), ("4", "invalid_json", False)]
    assert report.imported == 3  # the system message is kept whole: a session gives it back
    turns = replica.transcript(report.conv)
    assert (turns[0].text, turns[0].content) == ("", ())  # the system message: no content
    assert [t.text for t in turns[1:]] == ["hi", "hello"]
    assert replica.resume(report.conv, "openai") == [{"role": "user", "content": "hi"},
                                                     {"role": "assistant", "content": "hello"}]
    assert_resumes(replica, report.conv)


def test_an_unknown_session_or_file_says_what_there_is(tmp_path: Path) -> None:
    db = tmp_path / "agents.sqlite"
    agents_session(db, "s1", ITEMS[:1])
    with pytest.raises(ImportSourceError, match=r"no session 'nope'.*the sessions it holds: 's1'"):
        import_openai_agents(Replica.in_memory(), db, "nope")
    with pytest.raises(ImportSourceError, match="not an Agents SDK SQLiteSession database"):
        import_openai_agents(Replica.in_memory(), db, "s1", messages_table="missing")
    with pytest.raises(ImportSourceError, match="no such file"):
        import_openai_agents(Replica.in_memory(), tmp_path / "missing.sqlite", "s1")


def test_one_session_id_in_two_databases_is_two_histories(tmp_path: Path) -> None:
    """Row ids start at 1 in every database: the key's digest of the item tells them apart."""
    agents_session(tmp_path / "a.sqlite", "s1", [{"role": "user", "content": "from a"}])
    agents_session(tmp_path / "b.sqlite", "s1", [{"role": "user", "content": "from b"}])
    replica = Replica.in_memory()
    report = import_openai_agents(replica, tmp_path / "a.sqlite", "s1")
    other = import_openai_agents(replica, tmp_path / "b.sqlite", "s1", into=report.conv)
    assert (other.imported, other.already) == (1, 0)
    assert [t.text for t in replica.transcript(report.conv)] == ["from a", "from b"]
