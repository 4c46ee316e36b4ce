"""The public face: `__all__` is sorted, complete and importable (after httpx's test)."""

from __future__ import annotations

import ast
import doctest
import re
import subprocess
import sys
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
               "integrations", "resume_cache", "importers", "replica_code", "suggestions", "replica_reads",
               "replica_forget"}
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


def test_the_lazy_table_is_what_type_checkers_see() -> None:
    # __init__ imports each public name under TYPE_CHECKING and looks it up in _EXPORTS at run
    # time: both must name the same module for every name, and together be __all__
    tree = ast.parse(Path(convgraph.__file__ or "").read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    static = {a.name: n.module for n in guarded.body if isinstance(n, ast.ImportFrom) for a in n.names}
    lazy = {name: module for module, names in convgraph._EXPORTS.items() for name in names}
    assert static == lazy
    assert sorted(lazy) == convgraph.__all__


def test_import_convgraph_imports_none_of_its_modules() -> None:
    code = "import sys, convgraph; print(sorted(m for m in sys.modules if m.startswith('convgraph')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['convgraph']"
    code = "from convgraph import Replica, fold; import convgraph; print(convgraph.Replica is Replica)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        convgraph.no_such_name  # noqa: B018 - the lookup is the test
    assert not hasattr(convgraph, "_FROM_nothing")


def test_the_api_page_names_every_public_member_of_replica() -> None:
    """docs/api.md lists `Replica`'s members by name (its read side is a base class, and
    mkdocstrings would order inherited members apart): a method left off would vanish."""
    page = (Path(__file__).parent.parent / "docs" / "api.md").read_text()
    block = page.split("::: convgraph.Replica\n", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^ {8}- (\w+)$", block, re.MULTILINE)
    public = {n for n in dir(convgraph.Replica) if not n.startswith("_")}
    assert len(listed) == len(set(listed))
    assert set(listed) == public
