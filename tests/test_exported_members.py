"""The public face: `__all__` is sorted, complete and importable (after httpx's test)."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

import convgraph


def test_all_is_sorted_and_importable() -> None:
    assert convgraph.__all__ == sorted(convgraph.__all__)
    for name in convgraph.__all__:
        assert getattr(convgraph, name) is not None


def test_every_public_name_is_exported() -> None:
    public = {n for n in dir(convgraph) if not n.startswith("_")}
    modules = {"adoption", "cli", "core", "errors", "graph", "ingest", "integrity", "migration", "projections", "replica",
               "replica_checkpoints", "replica_drafts", "replica_folds", "replica_home", "replica_intake", "replica_verify",
               "replica_writes", "server", "store", "sync", "witnessing", "artifacts", "replica_artifacts", "artifact_checks",
               "checkpointing", "collector", "turn_index", "witness_client", "witness_policy", "viewer",
               "integrations", "resume_cache", "importers", "replica_code", "replica_reads"}
    assert public - modules == set(convgraph.__all__)


@pytest.mark.usefixtures("product_defaults")  # the examples work as shipped
def test_package_docstring_examples_run() -> None:
    assert doctest.testmod(convgraph).failed == 0


@pytest.mark.usefixtures("product_defaults")
def test_readme_python_example_runs(tmp_path: Path, monkeypatch: object) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.S)
    assert block is not None
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(block.group(1), "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    assert (tmp_path / "laptop" / "replica.sqlite").exists()
