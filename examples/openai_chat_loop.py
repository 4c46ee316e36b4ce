"""The same agent loop on OpenAI Chat Completions: the system prompt leads `messages=`.

`replica.request(conv, "openai")` gives `messages=` opened by one `{"role": "system"}`
message; `client.chat.completions.create` answers; `replica.record_response` keeps the
assistant message and its tool calls. Runs offline against the official SDK over a mock
transport (mock_providers.py).
"""

from __future__ import annotations

import json
import sys

from mock_providers import get_weather, openai_client

from convgraph import Replica

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}}]


def main() -> None:
    replica = Replica.open(sys.argv[1]) if len(sys.argv) > 1 else Replica.in_memory()
    client = openai_client()
    conv = replica.create("weather")
    replica.set_system(conv, "You are a weather assistant. Answer in one short sentence.")
    replica.say(conv, "user", "What's the weather in Paris?")
    calls = 0
    while True:
        request = replica.request(conv, "openai")  # messages=, the system prompt first
        completion = client.chat.completions.create(model="gpt-4o", tools=TOOLS, **request)
        calls += 1
        replica.record_response(conv, completion)
        message = completion.choices[0].message
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))
            print(f"tool {call.function.name}({call.function.arguments}) -> {json.dumps(result)}")
            replica.say(conv, "tool", json.dumps(result), tool_use_id=call.id)
    print(f"answer: {message.content}")
    print(f"requests: {calls}, turns kept: {len(replica.transcript(conv))}, system: {replica.system(conv)!r}")
    replica.close()


if __name__ == "__main__":
    main()
