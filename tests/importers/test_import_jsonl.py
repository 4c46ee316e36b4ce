"""`import_jsonl`: saved logs (legacy `{speaker, text, timestamp}` lines, OpenAI Chat and
Responses messages, Anthropic messages) become turns, told apart by their shape; a log that
grew imports only its new lines; what cannot be read is reported, never guessed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from import_sources import assert_resumes

from convgraph import ImportSourceError, Replica, import_jsonl
from convgraph.importers.formats import ASSISTANT_SPEAKERS, detect

pytestmark = pytest.mark.usefixtures("product_defaults")


def _lines(path: Path, items: list[Any]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items), "utf-8")
    return path


def _shape(replica: Replica, conv: str) -> list[tuple[Any, ...]]:
    return [(t.role.value, t.text, tuple((c.id, c.name, c.input) for c in t.tool_calls), t.tool_use_id)
            for t in replica.transcript(conv)]


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
_line = st.fixed_dictionaries(
    {"speaker": st.sampled_from(["alice", "bob", "assistant", "Bot", "agent"]), "text": _text},
    optional={"timestamp": st.one_of(_text, st.integers(0, 2**53), st.none())},
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_line, min_size=1, max_size=12), st.integers(0, 12))
def test_legacy_lines_round_trip_and_a_rerun_adds_nothing(lines: list[dict[str, Any]], more: int) -> None:
    """Each line is one turn holding its speaker, text and timestamp as written, its role the
    speaker's; the same file again writes nothing, a longer one only its new lines."""
    with tempfile.TemporaryDirectory() as d:
        log = _lines(Path(d) / "chat.jsonl", lines)
        replica = Replica.in_memory()
        report = import_jsonl(replica, log)
        assert (report.format, report.imported, report.unmapped) == ("legacy", len(lines), ())
        records = [r for r in replica.iter_records(report.conv) if r.kind != "genesis"]
        assert [{k: r.payload[k] for k in ("speaker", "text", "timestamp") if k in r.payload}
                for r in records] == lines
        roles = ["assistant" if x["speaker"].casefold() in ASSISTANT_SPEAKERS else "user" for x in lines]
        assert [(t.role.value, t.text) for t in replica.transcript(report.conv)] == list(
            zip(roles, [x["text"] for x in lines], strict=True))
        again = import_jsonl(replica, log, into=report.conv)
        assert (again.imported, again.already) == (0, len(lines))
        _lines(log, [*lines, *lines[:more]])
        grown = import_jsonl(replica, log, into=report.conv)
        assert (grown.imported, grown.already) == (len(lines[:more]), len(lines))


def test_legacy_system_lines_set_the_prompt_and_other_speakers_can_be_the_assistant(tmp_path: Path) -> None:
    log = _lines(tmp_path / "log.jsonl", [
        {"speaker": "system", "text": "Be kind."},
        {"speaker": "ann", "text": "hi", "timestamp": "2024-01-02T03:04:05Z", "channel": "#general"},
        {"speaker": "HAL", "text": "Hello, Ann."},
    ])
    replica = Replica.in_memory()
    report = import_jsonl(replica, log, assistants=["hal"])
    assert replica.system(report.conv) == "Be kind."
    assert [(t.role.value, t.text) for t in replica.transcript(report.conv)] == [
        ("user", "hi"), ("assistant", "Hello, Ann.")]
    ann = next(r for r in replica.iter_records(report.conv) if r.payload.get("speaker") == "ann")
    assert ann.payload["meta"]["jsonl"] == {"channel": "#general"}
    assert_resumes(replica, report.conv)


CHAT = [
    {"role": "system", "content": "You add numbers."},
    {"role": "user", "content": "2 + 2?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4"},
    {"role": "assistant", "content": "It is 4."},
]


def test_openai_chat_messages_as_a_json_array(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT), "utf-8")
    replica = Replica.in_memory()
    report = import_jsonl(replica, path)
    assert (report.format, report.imported, report.unmapped) == ("openai-chat", 5, ())
    assert replica.system(report.conv) == "You add numbers."
    assert _shape(replica, report.conv) == [
        ("user", "2 + 2?", (), None), ("assistant", "", (("call_1", "add", {"a": 2, "b": 2}),), None),
        ("tool", "4", (), "call_1"), ("assistant", "It is 4.", (), None)]
    assert replica.resume(report.conv, "openai") == CHAT[1:]
    assert_resumes(replica, report.conv)


ANTHROPIC = [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3C"},
        {"type": "text", "text": "And tomorrow?"}]},
    {"role": "assistant", "content": "Colder."},
]


def test_anthropic_messages_split_tool_results_from_the_users_text(tmp_path: Path) -> None:
    replica = Replica.in_memory()
    report = import_jsonl(replica, _lines(tmp_path / "claude.jsonl", ANTHROPIC))
    assert (report.format, report.imported, report.unmapped) == ("anthropic", 5, ())
    assert _shape(replica, report.conv) == [
        ("user", "Weather in Oslo?", (), None),
        ("assistant", "Checking.", (("toolu_1", "weather", {"city": "Oslo"}),), None),
        ("tool", "3C", (), "toolu_1"), ("user", "And tomorrow?", (), None), ("assistant", "Colder.", (), None)]
    wire = replica.resume(report.conv, "anthropic")
    assert wire[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1",
                                     "content": [{"type": "text", "text": "3C"}]}
    assert_resumes(replica, report.conv)
    again = import_jsonl(replica, tmp_path / "claude.jsonl", into=report.conv)
    assert (again.imported, again.already) == (0, 5)


def test_a_saved_responses_request_with_its_input_items(tmp_path: Path) -> None:
    request = {"model": "gpt-x", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Time in Tokyo?"}]},
        {"type": "function_call", "call_id": "c1", "name": "clock", "arguments": '{"tz": "Asia/Tokyo"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "09:00"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "9 am."}]},
    ]}
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request, indent=2), "utf-8")
    replica = Replica.in_memory()
    report = import_jsonl(replica, path)
    assert (report.format, report.imported, report.unmapped) == ("openai-responses", 4, ())
    assert _shape(replica, report.conv) == [
        ("user", "Time in Tokyo?", (), None), ("assistant", "", (("c1", "clock", {"tz": "Asia/Tokyo"}),), None),
        ("tool", "09:00", (), "c1"), ("assistant", "9 am.", (), None)]
    assert_resumes(replica, report.conv)


def test_an_anthropic_request_object_brings_its_system_prompt(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"system": "Terse.", "messages": ANTHROPIC}), "utf-8")
    replica = Replica.in_memory()
    report = import_jsonl(replica, path)
    assert replica.system(report.conv) == "Terse." and report.imported == 6


def test_lines_and_messages_that_cannot_be_held_are_reported_not_written(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([
        json.dumps({"speaker": "ann", "text": "ok"}),
        "{not json",
        json.dumps({"speaker": "ann", "text": "\ud800"}),  # a lone surrogate: no UTF-8 text holds it
        '{"speaker": "ann", "text": "late", "timestamp": NaN}',  # DAG-CBOR has no NaN
        json.dumps({"speaker": "ann", "text": 7}),
        json.dumps({"speaker": "bob", "text": "fine", "timestamp": 2**70}),  # beyond 64 bits
    ]) + "\n", "utf-8")
    replica = Replica.in_memory()
    report = import_jsonl(replica, path)
    assert [(u.key, u.what) for u in report.unmapped] == [
        ("L2", "invalid_json"), ("L5", "not_a_line"), ("L3", "user_message"), ("L4", "user_message"),
        ("L6", "user_message")]
    assert [t.text for t in replica.transcript(report.conv)] == ["ok"]


def test_chat_messages_of_roles_convgraph_does_not_map_are_reported(tmp_path: Path) -> None:
    items = [*CHAT[:2], {"role": "function", "name": "f", "content": "old"},
             {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "add"}}]},
             {"role": "assistant", "content": "fine"}]
    replica = Replica.in_memory()
    report = import_jsonl(replica, _lines(tmp_path / "c.jsonl", items))
    assert [(u.key, u.what) for u in report.unmapped] == [("L3", "function_message"), ("L4", "assistant_message")]
    assert_resumes(replica, report.conv)


def test_a_file_of_no_known_format_is_refused_saying_what_was_expected(tmp_path: Path) -> None:
    path = _lines(tmp_path / "odd.jsonl", [{"who": "ann", "said": "hi"}])
    with pytest.raises(ImportSourceError, match=r"cannot tell the format of .*legacy \{speaker, text, "
                                                r"timestamp\}.*Anthropic.*first item is \{\"who\""):
        import_jsonl(Replica.in_memory(), path)
    (tmp_path / "empty.jsonl").write_text("\n", "utf-8")
    with pytest.raises(ImportSourceError, match="holds no message"):
        import_jsonl(Replica.in_memory(), tmp_path / "empty.jsonl")
    (tmp_path / "prose.txt").write_text("Dear diary,\ntoday\n", "utf-8")
    with pytest.raises(ImportSourceError, match=r"first item is not JSON \(line 1 is not JSON"):
        import_jsonl(Replica.in_memory(), tmp_path / "prose.txt")
    (tmp_path / "latin.jsonl").write_bytes(b'{"speaker": "Jos\xe9"}\n')
    with pytest.raises(ImportSourceError, match="not UTF-8"):
        import_jsonl(Replica.in_memory(), tmp_path / "latin.jsonl")
    with pytest.raises(ImportSourceError, match="unknown format 'yaml'"):
        import_jsonl(Replica.in_memory(), path, fmt="yaml")


@pytest.mark.parametrize(("items", "fmt"), [
    ([{"speaker": "a", "text": "b"}], "legacy"),
    ([{"role": "user", "content": "hi"}], "openai-chat"),  # plain text reads the same in both
    ([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "1"}], "openai-chat"),
    ([{"role": "user", "content": "hi"}, {"type": "function_call", "call_id": "c"}], "openai-responses"),
    ([{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}], "openai-responses"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "openai-chat"),
    ([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}],
     "anthropic"),
    ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "anthropic"),  # the same turns either way
    ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}, {"role": "critic", "content": "x"}], None),
    ([{"role": "system", "content": "s"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "n", "input": {}}]}], "anthropic"),  # a system role tells nothing
    ([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], "openai-chat"),
    ([{"role": "user", "content": 5}, {"role": "user", "content": {"type": "text"}}], None),
    ([{"who": "a"}], None),
    ([], None),
])
def test_detect_names_the_format_the_items_show(items: list[Any], fmt: str | None) -> None:
    assert detect(items) == fmt


def test_two_logs_of_one_name_never_pass_for_each_other_and_reformatting_changes_nothing(tmp_path: Path) -> None:
    """The key is the place and a digest of the item: another `chat.jsonl` is other messages,
    the same lines spaced differently are the same ones."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _lines(tmp_path / "a" / "chat.jsonl", [{"speaker": "ann", "text": "one"}])
    second = _lines(tmp_path / "b" / "chat.jsonl", [{"speaker": "ann", "text": "two"}])
    replica = Replica.in_memory()
    report = import_jsonl(replica, first)
    other = import_jsonl(replica, second, into=report.conv)
    assert (other.imported, other.already) == (1, 0)
    first.write_text('{ "text" : "one",   "speaker" : "ann" }\n', "utf-8")
    assert import_jsonl(replica, first, into=report.conv).imported == 0
    assert [t.text for t in replica.transcript(report.conv)] == ["one", "two"]


def test_an_anthropic_tool_result_keeps_is_error(tmp_path: Path) -> None:
    failed = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Bergen"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such city", "is_error": True},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "rain", "is_error": False}]},
        {"role": "assistant", "content": "Rain in Bergen."},
    ]
    replica = Replica.in_memory()
    report = import_jsonl(replica, _lines(tmp_path / "failed.jsonl", failed))
    results = [r.payload for r in replica.iter_records(report.conv) if r.kind == "tool_result"]
    assert [(p["tool_use_id"], p.get("is_error", False)) for p in results] == [("toolu_1", True), ("toolu_2", False)]
    wire = replica.resume(report.conv, "anthropic")
    sent = [b for m in wire if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_result"]
    assert [b.get("is_error", False) for b in sent] == [True, False]
    assert_resumes(replica, report.conv)
