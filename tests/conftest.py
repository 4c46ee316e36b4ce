"""Shared test set-up: hypothesis profiles, small record factories, and a real PostgreSQL.

Profiles: `dev` (default, quick), `ci` (selected by CI=true or HYPOTHESIS_PROFILE=ci:
more examples, no deadline, derandomised so a CI failure reproduces).

Legacy writes. Most suites write into legacy conversations ("c", "demo", …): they test the
version-1 rules, which stay supported for ingest and sync. A product replica refuses such
writes (`Config.legacy_writes` is False, docs/authority.md §2), so for the whole session every
`Replica` made in this process is opened with `legacy_writes=True` (`pytest_configure`). A test
of the product default asks for the `product_defaults` fixture (or a module sets
`pytestmark = pytest.mark.usefixtures("product_defaults")`): its replicas keep the config they
are given. Subprocesses (the CLI tests) never see this: they run the product as shipped.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import citus
import pg
from convgraph import Config, ManualClock, Replica, SigningKey

# tests/store/test_citus.py checks a Citus cluster's placement: without one it has nothing to test
collect_ignore = [] if citus.dsn() else ["store/test_citus.py"]

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci",
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") == "true" else "dev")
settings.load_profile(PROFILE)

IN_CI = PROFILE == "ci"

TEST_SEED = bytes(range(32))  # the fixed key of the golden vectors


_PRODUCT_INIT = Replica.__init__


def _allowing_legacy(init: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init)
    def opened(self: Replica, *args: Any, config: Config | None = None, **kwargs: Any) -> None:
        init(self, *args, config=dataclasses.replace(config or Config(), legacy_writes=True), **kwargs)

    return opened


def pytest_configure(config: pytest.Config) -> None:
    """Every replica of the run may write legacy conversations (see the module docstring).

    Installed here, before collection, so test modules that write while they are imported
    (a corpus built at module level) and fixtures of every scope get it too.
    """
    Replica.__init__ = _allowing_legacy(_PRODUCT_INIT)  # type: ignore[method-assign]
    if citus.dsn():  # scripts/test-citus: every store schema is distributed as it is created
        citus.install()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """On Citus, the tables Citus refused to distribute (seen by this process, not xdist workers)."""
    if citus.dsn():
        lines = citus.report()
        terminalreporter.write_sep("=", f"Citus refused {len(lines)} tables (they stayed on the coordinator)")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    Replica.__init__ = _PRODUCT_INIT  # type: ignore[method-assign]


@pytest.fixture
def product_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's replicas behave as shipped: a legacy conversation is read-only."""
    monkeypatch.setattr(Replica, "__init__", _PRODUCT_INIT)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def test_key() -> SigningKey:
    return SigningKey(TEST_SEED)


@pytest.fixture
def replica(clock: ManualClock) -> Iterator[Replica]:
    with Replica.in_memory(clock=clock) as r:
        yield r


@pytest.fixture
def sqlite_replica(tmp_path: Path, clock: ManualClock) -> Iterator[Replica]:
    with Replica.open(tmp_path / "replica", clock=clock) as r:
        yield r


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """A real PostgreSQL (tests/pg.py says which); a test makes its own `pg.fresh_schema`."""
    return pg.dsn()


@pytest.fixture(scope="session", autouse=True)
def _pg_cleanup() -> Iterator[None]:
    """Drop the schemas this session made and stop any throwaway cluster (starts nothing)."""
    yield
    pg.cleanup()
