"""examples/openai_chat_loop.py: the loop on OpenAI Chat Completions, offline."""

from __future__ import annotations

from pathlib import Path

from example_run import PROMPT, assert_valid, run_example


def test_the_openai_chat_completions_loop(tmp_path: Path) -> None:
    out, sent = run_example("openai_chat_loop.py", tmp_path)
    assert out.splitlines() == [
        'tool get_weather({"city": "Paris"}) -> {"city": "Paris", "temp_c": 18, "sky": "sunny"}',
        "answer: Paris: 18 °C and sunny.",
        f"requests: 2, turns kept: 4, system: {PROMPT!r}",
    ]
    assert_valid(sent, PROMPT)
    assert [m["role"] for m in sent[1]["body"]["messages"]] == ["system", "user", "assistant", "tool"]
