"""`convgraph import-from langgraph | openai-agents | jsonl`: into a new conversation aliased
SOURCE:ID (or `--into`), a second run writes nothing, what was not mapped is listed on stderr
and in `--json`, a source that cannot be read exits 2 saying why."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from convgraph import Replica, is_rooted
from convgraph.cli import aliases
from convgraph.cli.main import cli
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.integrations.openai_agents import ConvgraphSession
from importers.import_sources import agents_session, assert_resumes, forked_thread, langgraph_thread

pytestmark = pytest.mark.usefixtures("product_defaults")


def cg(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["--home", str(home), *args], obj={}, env={"COLUMNS": "200"})
    assert result.exit_code == code, (result.output, result.exception)
    return result


def _json(result: Result) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(result.stdout)
    return body


LOG = [{"speaker": "ann", "text": "hi", "timestamp": "2024-01-02T03:04:05Z"},
       {"speaker": "assistant", "text": "hello"}]


def test_jsonl_imports_once_into_a_conversation_aliased_by_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cg(home, "init")
    log = tmp_path / "chat.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in LOG) + "oops\n", "utf-8")
    first = cg(home, "import-from", "jsonl", str(log))
    conv = first.stdout.strip()
    assert is_rooted(conv) and aliases.load(home) == {"jsonl:chat.jsonl": conv}
    assert "imported 2 record(s) from jsonl 'chat.jsonl' (legacy) into a new conversation" in first.stderr
    assert "unmapped L3 invalid_json: line 3 is not JSON" in first.stderr
    again = _json(cg(home, "import-from", "jsonl", str(log), "--json"))
    assert {k: again[k] for k in ("conv", "alias", "created", "imported", "already", "format")} == {
        "conv": conv, "alias": "jsonl:chat.jsonl", "created": False, "imported": 0, "already": 2,
        "format": "legacy"}
    assert again["unmapped"] == [{"key": "L3", "what": "invalid_json", "kept": False,
                                  "reason": "line 3 is not JSON (Expecting value: line 1 column 1 (char 0))"}]
    shown = json.loads(cg(home, "transcript", "--format", "json", "--conv", "jsonl:chat.jsonl").stdout)
    assert [(t["role"], t["content"][0]["text"]) for t in shown["turns"]] == [("user", "hi"), ("assistant", "hello")]


def test_into_names_an_existing_conversation_or_the_alias_of_a_new_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cg(home, "init")
    project = cg(home, "new", "project", "--alias", "proj").stdout.strip()
    log = tmp_path / "a.jsonl"
    log.write_text(json.dumps(LOG[0]) + "\n", "utf-8")
    into = _json(cg(home, "import-from", "jsonl", str(log), "--into", "proj", "--json"))
    assert (into["conv"], into["created"], into["imported"]) == (project, False, 1)
    fresh = _json(cg(home, "import-from", "jsonl", str(log), "--into", "notes", "--title", "Notes", "--json"))
    assert fresh["created"] and aliases.load(home)["notes"] == fresh["conv"] != project
    missing = "cg1" + "a" * 32
    failed = cg(home, "import-from", "jsonl", str(log), "--into", missing, code=2)
    assert f"no conversation '{missing}' in this replica to import into" in failed.stderr
    assert set(aliases.load(home)) == {"proj", "notes"}


def test_langgraph_thread_from_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cg(home, "init")
    db = tmp_path / "lg.sqlite"
    source = langgraph_thread(db, "t-7", [HumanMessage("1 + 1?")])
    made = _json(cg(home, "import-from", "langgraph", str(db), "--thread", "t-7", "--json"))
    assert (made["alias"], made["imported"], made["source"], made["origin"]) == (
        "langgraph:t-7", len(source), "langgraph", "t-7")
    assert _json(cg(home, "import-from", "langgraph", str(db), "--thread", "t-7", "--json"))["imported"] == 0
    with Replica.open(home) as replica:
        assert [t.text for t in replica.transcript(made["conv"])] == [str(m.content) for m in source]
        assert_resumes(replica, made["conv"])
    failed = cg(home, "import-from", "langgraph", str(db), "--thread", "t-8", code=2)
    assert "no thread 't-8'" in failed.stderr and "'t-7'" in failed.stderr


def test_openai_agents_session_from_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cg(home, "init")
    db = tmp_path / "agents.sqlite"
    agents_session(db, "s1", [{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "hi"},
                              {"role": "assistant", "content": "hello"}])
    made = cg(home, "import-from", "openai-agents", str(db), "--session", "s1")
    assert "unmapped 1 developer_message (kept in meta, left out of resume)" in made.stderr
    report = _json(cg(home, "import-from", "openai-agents", str(db), "--session", "s1", "--json"))
    assert (report["alias"], report["imported"], report["already"]) == ("openai-agents:s1", 0, 3)
    assert report["unmapped"][0]["kept"] is True


def test_a_whole_langgraph_thread_from_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cg(home, "init")
    db = tmp_path / "lg.sqlite"
    forked_thread(db, "t-7")
    moved = cg(home, "import-from", "langgraph", str(db), "--thread", "t-7", "--as-thread")
    conv = moved.stdout.strip()
    assert f"moved LangGraph thread 't-7' into a new conversation {conv}: " in moved.stderr
    assert f"convgraph transcript --conv {conv}" in moved.stderr
    again = _json(cg(home, "import-from", "langgraph", str(db), "--thread", "t-7", "--as-thread", "--json"))
    assert (again["conv"], again["records"], again["checkpoints"], again["created"]) == (conv, 0, 0, False)
    config: Any = {"configurable": {"thread_id": "t-7"}}
    with Replica.open(home) as replica, SqliteSaver.from_conn_string(str(db)) as source:
        ours = list(ConvgraphSaver(replica).list(config))
        assert [(t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes) for t in ours] == [
            (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes) for t in source.list(config)]
        assert again["checkpoints_already"] == len(ours)
    refused = cg(home, "import-from", "langgraph", str(db), "--thread", "t-7", "--as-thread", "--into", "x", code=2)
    assert "--into and --title do not apply" in refused.stderr


def test_an_agents_session_for_a_convgraph_session_from_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cg(home, "init")
    db = tmp_path / "agents.sqlite"
    items = [{"role": "user", "content": "hi"}, {"type": "function_call", "call_id": "c1", "name": "f",
                                                  "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    stored = agents_session(db, "s1", items)
    made = _json(cg(home, "import-from", "openai-agents", str(db), "--session", "s1", "--as-session", "--json"))
    assert (made["alias"], made["imported"], made["already"], made["created"]) == ("openai-agents:s1", 3, 0, True)
    again = _json(cg(home, "import-from", "openai-agents", str(db), "--session", "s1", "--as-session", "--json"))
    assert (again["conv"], again["imported"], again["already"]) == (made["conv"], 0, 3)
    with Replica.open(home) as replica:
        assert asyncio.run(ConvgraphSession(replica, made["conv"]).get_items()) == stored
    cg(home, "new", "other", "--alias", "other")
    cg(home, "say", "--conv", "other", "not the session")
    refused = cg(home, "import-from", "openai-agents", str(db), "--session", "s1", "--as-session", "--into", "other",
                 code=2)
    assert "another history, not imported into" in refused.stderr


def test_a_file_of_no_known_format_exits_2_saying_what_was_expected(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cg(home, "init")
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"who": "ann"}\n', "utf-8")
    failed = cg(home, "import-from", "jsonl", str(odd), code=2)
    assert "cannot tell the format of" in failed.stderr and "Anthropic messages" in failed.stderr
    assert aliases.load(home) == {}  # nothing named, nothing written
    forced = _json(cg(home, "import-from", "jsonl", str(odd), "--format", "legacy", "--json"))
    assert forced["imported"] == 0 and forced["unmapped"][0]["what"] == "not_a_line"


def test_the_readme_import_block_runs_as_written(tmp_path: Path) -> None:
    """README.md's "Importing histories you already have", run by bash on sources the libraries made."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text("utf-8")
    found = re.search(r"### Importing histories you already have\n.*?```sh\n(.*?)```", readme, re.S)
    assert found is not None
    langgraph_thread(tmp_path / "checkpoints.sqlite", "support-42", [HumanMessage("My order is late.")])
    agents_session(tmp_path / "agents.sqlite", "oslo", [{"role": "user", "content": "Weather in Oslo?"}])
    (tmp_path / "chat.jsonl").write_text("".join(json.dumps(x) + "\n" for x in LOG), "utf-8")
    env = {**os.environ, "CONVGRAPH_HOME": str(tmp_path / "home"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(["convgraph", "init"], env=env, cwd=tmp_path, check=True, capture_output=True, timeout=60)
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", found.group(1)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert set(aliases.load(tmp_path / "home")) == {"langgraph:support-42", "support", "jsonl:chat.jsonl"}
