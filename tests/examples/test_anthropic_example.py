"""examples/anthropic_loop.py: a tool and extended thinking on Anthropic Messages, offline."""

from __future__ import annotations

from pathlib import Path

from example_run import PROMPT, assert_valid, run_example


def test_the_anthropic_loop_with_a_tool_and_extended_thinking(tmp_path: Path) -> None:
    out, sent = run_example("anthropic_loop.py", tmp_path, str(tmp_path / "replica"))
    assert out.splitlines() == [
        'tool get_weather({"city": "Paris"}) -> {"city": "Paris", "temp_c": 18, "sky": "sunny"}',
        "answer: Paris: 18 °C and sunny.",
        "requests: 2, turns kept: 4",
        f"thinking blocks kept: 2, system: {PROMPT!r}",
    ]
    assert_valid(sent, PROMPT)
    assert [e["provider"] for e in sent] == ["anthropic", "anthropic"]
    second = sent[1]["body"]
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    # the tool cycle's assistant turn goes back opened by its thinking, signature and all
    assert [b["type"] for b in second["messages"][1]["content"]] == ["thinking", "tool_use"]
    assert second["messages"][2]["content"][0]["type"] == "tool_result"
