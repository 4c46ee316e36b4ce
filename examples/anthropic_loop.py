"""An agent loop on Anthropic Messages with a tool and extended thinking, kept in convgraph.

Each turn: `replica.request(conv, "anthropic")` gives `messages=` and `system=` (the
conversation's system prompt), `client.messages.create` answers, `replica.record_response`
keeps the answer (thinking blocks and their signatures byte for byte, since the API refuses
a changed one), and each tool call's result is said back as a `tool` turn. Runs offline: the
client is the official SDK over a mock transport (mock_providers.py). Pass a directory to
keep the replica there (default: in memory).
"""

from __future__ import annotations

import json
import sys

from mock_providers import anthropic_client, get_weather

from convgraph import Replica

TOOLS = [{
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}]


def main() -> None:
    replica = Replica.open(sys.argv[1]) if len(sys.argv) > 1 else Replica.in_memory()
    client = anthropic_client()
    conv = replica.create("weather")
    replica.set_system(conv, "You are a weather assistant. Answer in one short sentence.")
    replica.say(conv, "user", "What's the weather in Paris?")
    calls = 0
    while True:
        response = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=2048, tools=TOOLS,
            thinking={"type": "enabled", "budget_tokens": 1024},
            **replica.request(conv, "anthropic"),
        )
        calls += 1
        replica.record_response(conv, response)
        uses = [b for b in response.content if b.type == "tool_use"]
        if not uses:
            break
        for use in uses:
            result = get_weather(**use.input)
            print(f"tool {use.name}({json.dumps(use.input)}) -> {json.dumps(result)}")
            replica.say(conv, "tool", json.dumps(result), tool_use_id=use.id)
    print(f"answer: {response.content[-1].text}")
    print(f"requests: {calls}, turns kept: {len(replica.transcript(conv))}")
    thinking = [b for t in replica.transcript(conv) for b in t.content if b.get("type") == "thinking"]
    print(f"thinking blocks kept: {len(thinking)}, system: {replica.system(conv)!r}")
    replica.close()


if __name__ == "__main__":
    main()
