"""Running a script of examples/ offline, and checking the requests it sent the mock providers.

`run_example` runs it as a subprocess with `CONVGRAPH_EXAMPLE_LOG` set, so the mock
(examples/mock_providers.py) writes down every request body; `assert_valid` checks each one:
system prompt in its provider's place, history provider-valid (`check_request`), and accepted
by the SDK's own call-parameter types (tests/projections/sdk.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from convgraph.projections.request import check_request, system_of_request
from projections.sdk import request_errors

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PROMPT = "You are a weather assistant. Answer in one short sentence."
TESTED = {"anthropic_loop.py", "openai_responses_loop.py", "openai_chat_loop.py", "two_devices.py",
          "mock_providers.py"}
"""The scripts the tests here run (mock_providers.py by every one of them)."""


def run_script(script: Path, tmp_path: Path, *args: str) -> tuple[str, list[dict[str, Any]]]:
    """Run `script` in `tmp_path`; its stdout and the request bodies the mock received."""
    log = tmp_path / "requests.jsonl"
    env = {**os.environ, "CONVGRAPH_EXAMPLE_LOG": str(log),
           "PYTHONPATH": os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    sent = [json.loads(line) for line in log.read_text("utf-8").splitlines()] if log.exists() else []
    return proc.stdout, sent


def run_example(name: str, tmp_path: Path, *args: str) -> tuple[str, list[dict[str, Any]]]:
    """`run_script` of examples/`name`."""
    return run_script(EXAMPLES / name, tmp_path, *args)


def assert_valid(sent: list[dict[str, Any]], prompt: str) -> None:
    """Every request was valid for its provider and carried `prompt` where it belongs."""
    assert sent
    for entry in sent:
        provider, body = entry["provider"], entry["body"]
        assert check_request(provider, body) == [], body
        assert request_errors(provider, body) == [], body
        assert system_of_request(provider, body) == prompt
