"""examples/two_devices.py: two replicas continue one conversation, with syncs between; and
every script in examples/ has a test here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from example_run import EXAMPLES, TESTED, assert_valid, run_example


def test_two_devices_continue_one_conversation(tmp_path: Path) -> None:
    out, sent = run_example("two_devices.py", tmp_path, str(tmp_path / "homes"))
    prompt = "You are a travel assistant. Answer in one short sentence."
    assert out.splitlines() == [
        "laptop: Paris: 18 °C and sunny.",
        "sync 1: phone took 7 records, converged True",
        f"phone sees system: {prompt!r}",
        "phone: Lisbon: 23 °C and clear.",
        "sync 2: laptop took 4 records, converged True",
        "same on both: True, turns: 8, records: 11",
    ]
    assert_valid(sent, prompt)
    assert [e["provider"] for e in sent] == ["anthropic", "anthropic", "openai-responses", "openai-responses"]
    # the phone continues the laptop's history on another provider: Anthropic's thinking is not sent
    phone_input = sent[2]["body"]["input"]
    assert "thinking" not in json.dumps(phone_input) and len(phone_input) == 5
    assert (tmp_path / "homes" / "laptop" / "replica.sqlite").exists()


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_example_is_run_by_a_test(name: str) -> None:
    assert name in TESTED, f"examples/{name} has no test in tests/examples"
