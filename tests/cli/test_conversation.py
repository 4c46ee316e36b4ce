"""The conversation commands, run as a real subprocess against a real SQLite replica."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import run

from convgraph.projections import validity


def _cid(home: Path, *args: str) -> str:
    return json.loads(run(home, *args, "--json").stdout)["cid"]


def test_say_then_transcript_in_every_format(tmp_path: Path) -> None:
    home = tmp_path / "r"
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
    last = json.loads(run(home, "transcript", "--format", "anthropic", "--last", "2").stdout)
    assert last == []  # the window [tool result, assistant] holds no user turn: nothing valid to send
    last = json.loads(run(home, "transcript", "--format", "openai", "--last", "4").stdout)
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant"]


def test_branch_merge_and_checkpoint(tmp_path: Path) -> None:
    home = tmp_path / "r"
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
    assert body["count"] == 5
    after = [t["content"][0]["text"] for t in json.loads(run(home, "transcript", "--format", "json").stdout)["turns"]]
    assert after == main
    assert "records checked, 0 failed" in run(home, "verify").stdout


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    home = tmp_path / "r"
    proc = run(home, "say", "--role", "tool", "no id", ok=False)
    assert proc.returncode == 2 and "tool_use_id" in proc.stderr
    proc = run(home, "say", "--role", "assistant", "x", "--tool-call", "{nope", ok=False)
    assert proc.returncode == 2 and "--tool-call" in proc.stderr
    proc = run(home, "branch", "alt", "--at", "bafynotacid", ok=False)
    assert proc.returncode == 2
