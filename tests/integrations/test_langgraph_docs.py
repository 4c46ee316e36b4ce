"""The Python blocks of docs/integrations.md run, in order, in one namespace: the usage the
docs show cannot drift from what the saver does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "integrations.md"

pytestmark = pytest.mark.usefixtures("product_defaults")


def test_the_python_blocks_of_the_integrations_doc_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 2
    namespace: dict[str, object] = {"__name__": "integrations_doc"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)


def test_the_readme_agent_frameworks_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (DOC.parents[1] / "README.md").read_text()
    section = readme.split("### Agent frameworks", 1)[1]
    snippet = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)[0]
    namespace: dict[str, object] = {"__name__": "readme"}
    exec(compile(re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)[0], "doc", "exec"),
         namespace)  # defines `builder`, the graph the snippet compiles
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, "README.md", "exec"), namespace)
    replica = namespace["saver"].replica  # type: ignore[attr-defined]
    assert [t.text for t in replica.transcript(namespace["conv"])] == ["hi", "you said: hi"]
    assert (tmp_path / ".convgraph" / "replica.sqlite").exists()
