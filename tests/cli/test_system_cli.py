"""`convgraph system` and `transcript --request`, against a real SQLite replica in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import init, run

from convgraph.projections import validity
from convgraph.projections.request import check_request, system_of_request

PROMPT = "Answer in haiku.\nAlways."


def test_system_sets_prints_and_places_the_prompt(tmp_path: Path) -> None:
    home = tmp_path / "r"
    init(home)
    run(home, "say", "hello")
    assert json.loads(run(home, "system", "--json").stdout)["system"] is None
    assert json.loads(run(home, "system", PROMPT, "--json").stdout)["cid"].startswith("b")
    assert run(home, "system").stdout == PROMPT + "\n"
    for provider in validity.PROVIDERS:
        request = json.loads(run(home, "transcript", "--request", provider).stdout)
        assert check_request(provider, request) == []
        assert system_of_request(provider, request) == PROMPT
        if provider == "anthropic":
            assert request == {"messages": [{"content": [{"text": "hello", "type": "text"}], "role": "user"}],
                               "system": PROMPT}
    run(home, "system", "")
    assert json.loads(run(home, "system", "--json").stdout)["system"] is None
    run(home, "append", "system_prompt", '{"content": "via append"}')
    assert run(home, "system").stdout == "via append\n"
