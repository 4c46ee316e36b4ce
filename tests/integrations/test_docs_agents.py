"""The code blocks of docs/integrations-agents.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "integrations-agents.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_doc_has_an_example_per_adapter() -> None:
    assert len(BLOCKS) == 3


@pytest.mark.usefixtures("product_defaults")  # the examples work as shipped
@pytest.mark.parametrize("code", BLOCKS, ids=["openai-agents", "openai-agents-branches", "langchain"])
def test_each_code_block_runs(code: str) -> None:
    exec(compile(code, str(DOC), "exec"), {})
