"""`convgraph system` and `transcript --request`, against a real SQLite replica in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import run

from convgraph.projections import validity
from convgraph.projections.request import check_request, system_of_request


def test_system_sets_prints_and_places_the_prompt(tmp_path: Path) -> None:
    home = tmp_path / "r"
    run(home, "say", "hello")
    assert json.loads(run(home, "system", "--json").stdout)["system"] is None
    cid = json.loads(run(home, "system", "Answer in haiku.\nAlways.", "--json").stdout)["cid"]
    assert cid.startswith("b")
    assert run(home, "system").stdout == "Answer in haiku.\nAlways.\n"
    shown = json.loads(run(home, "system", "--json").stdout)
    assert shown["system"] == "Answer in haiku.\nAlways."
    for provider in validity.PROVIDERS:
        request = json.loads(run(home, "transcript", "--request", provider).stdout)
        assert check_request(provider, request) == []
        assert system_of_request(provider, request) == "Answer in haiku.\nAlways."
        if provider == "anthropic":
            assert request == {"messages": [{"content": [{"text": "hello", "type": "text"}], "role": "user"}],
                               "system": "Answer in haiku.\nAlways."}
    run(home, "system", "")
    assert run(home, "system").stderr.strip() == "no system prompt"
    assert json.loads(run(home, "transcript", "--request", "openai-responses").stdout) == {
        "input": [{"content": [{"text": "hello", "type": "input_text"}], "role": "user"}]}
    run(home, "append", "system_prompt", '{"content": "via append"}')
    assert run(home, "system").stdout == "via append\n"
