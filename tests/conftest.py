"""Shared test set-up: hypothesis profiles, small record factories, and a real PostgreSQL.

Profiles: `dev` (default, quick), `ci` (selected by CI=true or HYPOTHESIS_PROFILE=ci:
more examples, no deadline, derandomised so a CI failure reproduces).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import pg
from convgraph import ManualClock, Replica, SigningKey

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
