"""pyproject.toml's requirements read the way pip reads them, for the tests that check what the
project declares (test_dev_dependencies, test_packaging)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

PYPROJECT = Path(__file__).parent.parent / "pyproject.toml"


def project() -> dict[str, Any]:
    """The `[project]` table."""
    return tomllib.loads(PYPROJECT.read_text())["project"]


def normal(name: str) -> str:
    """A distribution name normalized as PEP 503 says."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The normalized distribution name a requirement string names."""
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert found, requirement
    return normal(found.group())


def extra(extras: dict[str, list[str]], name: str) -> list[str]:
    """The extra's requirements, with `convgraph[a,b]` (one extra naming others) expanded."""
    found = []
    for requirement in extras[name]:
        named = re.fullmatch(r"convgraph\[([a-z0-9,-]+)\]", requirement)
        found += [r for other in named.group(1).split(",") for r in extra(extras, other)] if named else [requirement]
    return found
