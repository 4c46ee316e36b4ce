"""Two devices continue one conversation: a laptop on Anthropic, a phone on OpenAI Responses.

The laptop roots the conversation, sets its system prompt, lets the phone write, and runs a
turn of the agent loop. The two replicas sync (the same reconciliation as over HTTP, in one
process here); the phone asks a follow-up and runs the loop on another provider, reading the
same system prompt from the conversation; they sync again and hold the same records, heads,
system prompt and transcript. Runs offline (mock_providers.py). Pass a directory to keep the
two replicas there (default: a temporary one).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from mock_providers import anthropic_client, get_weather, openai_client

from convgraph import Replica, sync_replicas


def anthropic_turn(replica: Replica, conv: str) -> str:
    client = anthropic_client()
    tools = [{"name": "get_weather", "description": "Current weather for a city.",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    while True:
        response = client.messages.create(model="claude-sonnet-4-5", max_tokens=2048, tools=tools,
                                          thinking={"type": "enabled", "budget_tokens": 1024},
                                          **replica.request(conv, "anthropic"))
        replica.record_response(conv, response)
        uses = [b for b in response.content if b.type == "tool_use"]
        if not uses:
            return str(response.content[-1].text)
        for use in uses:
            replica.say(conv, "tool", json.dumps(get_weather(**use.input)), tool_use_id=use.id)


def responses_turn(replica: Replica, conv: str) -> str:
    client = openai_client()
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
              "additionalProperties": False}
    tools: list[Any] = [{"type": "function", "name": "get_weather", "description": "Weather for a city.",
                         "strict": True, "parameters": schema}]
    while True:
        response = client.responses.create(model="gpt-5", tools=tools, store=False,
                                           **replica.request(conv, "openai-responses"))
        replica.record_response(conv, response)
        fcs = [item for item in response.output if item.type == "function_call"]
        if not fcs:
            return response.output_text
        for fc in fcs:
            result = get_weather(**json.loads(fc.arguments))
            replica.say(conv, "tool", json.dumps(result), tool_use_id=fc.call_id)


def main(home: Path) -> None:
    with Replica.open(home / "laptop") as laptop, Replica.open(home / "phone") as phone:
        conv = laptop.create("travel")
        laptop.write(conv, "grant", {"grantee": phone.actor, "rights": ["read", "write"]})
        laptop.set_system(conv, "You are a travel assistant. Answer in one short sentence.")
        laptop.say(conv, "user", "What's the weather in Paris?")
        print(f"laptop: {anthropic_turn(laptop, conv)}")

        report = sync_replicas(phone, laptop, [conv])
        print(f"sync 1: phone took {report.convs[conv].accepted_here} records, converged {report.converged}")
        print(f"phone sees system: {phone.system(conv)!r}")
        phone.say(conv, "user", "And in Lisbon?")
        print(f"phone: {responses_turn(phone, conv)}")

        report = sync_replicas(laptop, phone, [conv])
        print(f"sync 2: laptop took {report.convs[conv].accepted_here} records, converged {report.converged}")
        same = (laptop.heads(conv) == phone.heads(conv) and laptop.transcript(conv) == phone.transcript(conv)
                and laptop.request(conv, "anthropic") == phone.request(conv, "anthropic"))
        turns, records = len(laptop.transcript(conv)), len(laptop.records(conv))
        print(f"same on both: {same}, turns: {turns}, records: {records}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
