"""The conversation commands against a real SQLite replica: run as a real subprocess, or in process
where only argument parsing is at stake."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_cli import init, run

import cli_process
from convgraph.cli.main import cli
from convgraph.projections import validity


def _cid(home: Path, *args: str) -> str:
    return json.loads(run(home, *args, "--json").stdout)["cid"]


def test_say_then_transcript_in_every_format(tmp_path: Path) -> None:
    home = tmp_path / "r"
    init(home)
    run(home, "say", "What is 6 x 7?")
    run(home, "say", "--role", "assistant", "Let me compute.",
        "--tool-call", '{"id": "c1", "name": "calc", "input": {"e": "6*7"}}')
    run(home, "say", "--role", "tool", "--tool-use-id", "c1", "42")
    run(home, "say", "--role", "assistant", "It is 42.")
    text = run(home, "transcript").stdout
    assert "What is 6 x 7?" in text and "[c1] 42" in text and "calc" in text and "4 turns" in text
    turns = json.loads(run(home, "transcript", "--format", "json").stdout)["turns"]
    assert [t["role"] for t in turns] == ["user", "assistant", "tool", "assistant"]
    assert turns[1]["tool_calls"] == [{"id": "c1", "input": {"e": "6*7"}, "name": "calc"}]
    for provider in validity.PROVIDERS:
        wire = json.loads(run(home, "transcript", "--format", provider).stdout)
        assert wire and validity.check(provider, wire) == []
    # the window [tool result, assistant] holds no user turn: it is widened back to the question
    widened = run(home, "transcript", "--format", "anthropic", "--last", "2")
    last = json.loads(widened.stdout)
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant"]
    assert last[0]["content"] == [{"type": "text", "text": "What is 6 x 7?"}]
    assert "widened --last 2 by 2 turn(s)" in widened.stderr
    assert "widened" not in run(home, "transcript", "--format", "anthropic", "--last", "4").stderr
    last = json.loads(run(home, "transcript", "--format", "openai", "--last", "4").stdout)
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant"]


def test_branch_merge_and_checkpoint(tmp_path: Path) -> None:
    home = tmp_path / "r"
    init(home)
    q = _cid(home, "say", "plan a trip")
    run(home, "say", "--role", "assistant", "Lisbon?")
    run(home, "branch", "alt", "--at", q)
    alt = _cid(home, "say", "--role", "assistant", "Porto instead", "--branch", "alt")
    branch_view = [t["content"][0]["text"] for t in
                   json.loads(run(home, "transcript", "--format", "json", "--branch", "alt").stdout)["turns"]]
    assert branch_view == ["plan a trip", "Porto instead"]
    run(home, "merge", "alt", "--accept", alt, "--summary", "Porto it is")
    main = [t["content"][0]["text"] for t in json.loads(run(home, "transcript", "--format", "json").stdout)["turns"]]
    assert main == ["plan a trip", "Lisbon?", "Porto it is"]
    body = json.loads(run(home, "checkpoint", "--compact", "--json").stdout)
    assert body["count"] == 6  # the genesis of the `default` conversation, the first `say` made
    after = [t["content"][0]["text"] for t in json.loads(run(home, "transcript", "--format", "json").stdout)["turns"]]
    assert after == main
    assert "records checked, 0 failed" in run(home, "verify").stdout


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    home = tmp_path / "r"
    init(home)
    proc = run(home, "say", "--role", "tool", "no id", ok=False)
    assert proc.returncode == 2 and "tool_use_id" in proc.stderr
    proc = run(home, "say", "--role", "assistant", "x", "--tool-call", "{nope", ok=False)
    assert proc.returncode == 2 and "--tool-call" in proc.stderr
    proc = run(home, "branch", "alt", "--at", "bafynotacid", ok=False)
    assert proc.returncode == 2


def test_say_with_a_conversation_id_that_is_not_utf8_exits_2(tmp_path: Path) -> None:
    """`convgraph say --conv $'\\xff' x`, as a shell passes it: raw bytes in argv."""
    init(tmp_path / "r")
    env = {**os.environ, "CONVGRAPH_HOME": str(tmp_path / "r")}
    proc = cli_process.run(["say", "--conv", b"\xff", "x"], env=env, timeout=60)
    stderr = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in stderr, stderr
    assert "Invalid value for '--conv'" in stderr and "not valid Unicode text" in stderr
    assert json.loads(run(tmp_path / "r", "conversations", "--json").stdout)["conversations"] == []


@pytest.mark.parametrize("args", [
    ["say", "a\udcffb"],
    ["say", "--branch", "\udcff", "x"],
    ["say", "--role", "tool", "--tool-use-id", "\udcff", "x"],
    ["say", "--role", "assistant", "--tool-call", '{"id": "1", "name": "\udcff"}', "x"],
    ["append", "user_message", '{"content": "\udcff"}'],
    ["append", "user_message", '{"content": "x"}', "--branch", "\udcff"],
    ["log", "--conv", "\udcff"],
    ["transcript", "--conv", "\udcff"],
    ["transcript", "--branch", "\udcff"],
    ["branch", "\udcff", "--at", "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua"],
    ["branch", "b", "--purpose", "\udcff", "--at", "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua"],
    ["merge", "\udcff"],
    ["merge", "b", "--summary", "\udcff"],
    ["checkpoint", "--conv", "\udcff"],
    ["export", "out.car", "--conv", "\udcff"],
    ["sync", "http://127.0.0.1:9", "--conv", "\udcff"],
], ids=lambda args: " ".join(a for a in args if "\udcff" not in a))
def test_every_text_argument_that_is_not_utf8_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "r"), *args])
    assert isinstance(result.exception, SystemExit) and result.exit_code == 2, result.output
    assert "not valid Unicode text" in result.output
    assert not (tmp_path / "r").exists()  # refused before the replica was even opened
