"""`ConvgraphSaver` against LangGraph's own conformance suite for checkpointers
(`langgraph-checkpoint-conformance`): every capability, base and extended, on an SQLite
replica and on an in-memory one, each suite on a fresh replica."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from convgraph import Replica
from convgraph.integrations.langgraph import ConvgraphSaver

pytestmark = pytest.mark.usefixtures("product_defaults")

EXPECTED_TESTS = 81  # the suite's count in 0.0.2 (pinned): a drop means tests went missing


@pytest.mark.parametrize("store", ["sqlite", "memory"])
def test_convgraph_saver_passes_langgraph_checkpoint_conformance(store: str, tmp_path: Path) -> None:
    homes = iter(range(100))

    @checkpointer_test(name=f"ConvgraphSaver[{store}]")
    async def saver() -> AsyncIterator[ConvgraphSaver]:
        home = tmp_path / f"home{next(homes)}"
        replica = Replica.open(home) if store == "sqlite" else Replica.in_memory()
        yield ConvgraphSaver(replica)
        assert replica.verify().ok  # every record the suite made re-verifies
        replica.close()

    report = asyncio.run(validate(saver))
    results = report.results
    failures = {cap: r.failures for cap, r in results.items() if r.failures}
    assert failures == {}
    assert {cap for cap, r in results.items() if r.detected} == {c.value for c in ALL_CAPABILITIES}
    assert sum(r.tests_passed for r in results.values()) == EXPECTED_TESTS
