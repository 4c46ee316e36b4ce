"""`pip install -e '.[dev]'` installs everything the tests import, so a contributor who
skips `scripts/test` still gets a suite that collects.

Every module imported anywhere under `tests/` is the standard library, first-party
(`convgraph` and the tests' own helper modules), or comes from a distribution that
pyproject.toml declares, pinned, in `dependencies` or the `dev` extra (with the extras it
names, `convgraph[all]`): the lists `.[dev]` installs. Something that only arrives as another package's dependency is not
declared, and fails here.
"""

from __future__ import annotations

import ast
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pins

TESTS = Path(__file__).parent


def _imported(path: Path) -> set[str]:
    """Top-level names of every absolute import in the file, wherever it sits in it."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def _first_party() -> set[str]:
    # pytest puts tests/ on sys.path, so its files and folders import by their bare names
    local = {p.stem for p in TESTS.rglob("*.py")} | {p.name for p in TESTS.rglob("*") if p.is_dir()}
    # tests of bench/'s helpers put bench/ on sys.path too (tests/bench/test_instances.py)
    bench = {p.stem for p in (TESTS.parent / "bench").glob("*.py")}
    return local | bench | {"convgraph", "tests"}


def _dev_install() -> dict[str, str]:
    declared = pins.project()
    requirements = [*declared["dependencies"], *pins.extra(declared["optional-dependencies"], "dev")]
    return {pins.requirement_name(r): r for r in requirements}


def test_every_third_party_module_the_tests_import_is_declared_for_dev() -> None:
    declared = _dev_install()
    distributions = packages_distributions()
    skip = set(sys.stdlib_module_names) | _first_party()
    modules = sorted({m for p in TESTS.rglob("*.py") for m in _imported(p)} - skip)
    undeclared = {
        m: distributions.get(m, ["(not installed)"])
        for m in modules
        if not any(pins.normal(d) in declared for d in distributions.get(m, ()))
    }
    assert undeclared == {}, f"add to the dev extra in pyproject.toml: {undeclared}"
    assert {"hypothesis", "pytest", "schemathesis"} <= set(modules)  # the walk does see imports


def test_the_dev_extra_pins_exact_versions() -> None:
    dev = pins.extra(pins.project()["optional-dependencies"], "dev")
    assert [r for r in dev if "==" not in r] == []
