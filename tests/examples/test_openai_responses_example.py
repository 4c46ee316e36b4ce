"""examples/openai_responses_loop.py: the loop on OpenAI Responses, offline."""

from __future__ import annotations

from pathlib import Path

from example_run import PROMPT, assert_valid, run_example


def test_the_openai_responses_loop(tmp_path: Path) -> None:
    out, sent = run_example("openai_responses_loop.py", tmp_path)
    assert out.splitlines() == [
        'tool get_weather({"city": "Lisbon"}) -> {"city": "Lisbon", "temp_c": 23, "sky": "clear"}',
        "answer: Lisbon: 23 °C and clear.",
        "requests: 2, turns kept: 4",
        f"reasoning items kept: 2, system: {PROMPT!r}",
    ]
    assert_valid(sent, PROMPT)
    assert [item.get("type") for item in sent[1]["body"]["input"]][1:] == [
        "reasoning", "function_call", "function_call_output"]
