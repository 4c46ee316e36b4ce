"""The README's agent loop ("## The agent loop") is run as written, in a subprocess, against the
mock provider APIs served on a real HTTP server at 127.0.0.1, so the block cannot go stale."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
from example_run import EXAMPLES, PROMPT, ROOT, assert_valid, run_script


def readme_loop() -> str:
    """The first python block of the README's "The agent loop" section."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme[readme.index("\n## The agent loop\n"):]
    section = section[:section.index("\n## ", 1)]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found, "README.md's agent loop section has no python block"
    return found.group(1)


def _mock() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mock_providers", EXAMPLES / "mock_providers.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_agent_loop_runs_against_the_mock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = readme_loop()
    assert "replica.request(" in code and "record_response(" in code and "set_system(" in code
    log = tmp_path / "requests.jsonl"
    monkeypatch.setenv("CONVGRAPH_EXAMPLE_LOG", str(log))  # the server runs here, in this process
    server = _mock().serve(0)
    try:
        script = tmp_path / "loop.py"
        script.write_text(code, "utf-8")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "offline")
        out, _ = run_script(script, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert out == "Paris: 18 °C and sunny.\n"
    sent = [json.loads(line) for line in log.read_text("utf-8").splitlines()]
    assert len(sent) == 2
    assert_valid(sent, PROMPT)
    assert (tmp_path / "agent" / "replica.sqlite").exists()
