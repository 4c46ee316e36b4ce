"""The same agent loop on the OpenAI Responses API: `instructions=` carries the system prompt.

`replica.request(conv, "openai-responses")` gives `input=` (reasoning items replayed to the
model that made them, function calls and their outputs paired) and `instructions=`;
`client.responses.create` answers; `replica.record_response` keeps every output item. Runs
offline against the official SDK over a mock transport (mock_providers.py).
"""

from __future__ import annotations

import json
import sys

from mock_providers import get_weather, openai_client

from convgraph import Replica

TOOLS = [{
    "type": "function", "name": "get_weather", "description": "Current weather for a city.", "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                   "additionalProperties": False},
}]


def main() -> None:
    replica = Replica.open(sys.argv[1]) if len(sys.argv) > 1 else Replica.in_memory()
    client = openai_client()
    conv = replica.create("weather")
    replica.set_system(conv, "You are a weather assistant. Answer in one short sentence.")
    replica.say(conv, "user", "What's the weather in Lisbon?")
    calls = 0
    while True:
        response = client.responses.create(
            model="gpt-5", tools=TOOLS, reasoning={"effort": "low"}, include=["reasoning.encrypted_content"],
            store=False, **replica.request(conv, "openai-responses"),
        )
        calls += 1
        replica.record_response(conv, response)
        fcs = [item for item in response.output if item.type == "function_call"]
        if not fcs:
            break
        for fc in fcs:
            result = get_weather(**json.loads(fc.arguments))
            print(f"tool {fc.name}({fc.arguments}) -> {json.dumps(result)}")
            replica.say(conv, "tool", json.dumps(result), tool_use_id=fc.call_id)
    print(f"answer: {response.output_text}")
    print(f"requests: {calls}, turns kept: {len(replica.transcript(conv))}")
    reasoning = [b for t in replica.transcript(conv) for b in t.content if b.get("type") == "reasoning"]
    print(f"reasoning items kept: {len(reasoning)}, system: {replica.system(conv)!r}")
    replica.close()


if __name__ == "__main__":
    main()
