"""ConvgraphSession keeps what SQLiteSession keeps: an item of megabytes (stored as an artifact
the turn names), and values DAG-CBOR cannot hold (NaN, infinities, integers beyond 64 bits,
keys that look like tags), read back equal, here, after a fresh read and after sync."""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path
from typing import Any

import pytest

from convgraph import Replica, sync_replicas
from convgraph.integrations._large import THRESHOLD
from convgraph.integrations.openai_agents import ConvgraphSession

ODD: dict[str, Any] = {"low": -math.inf, "high": math.inf, "huge": 2**80, "neg": -(2**70),
                       "$cg": "float", "nested": [{"$cg": "int", "v": "1"}, {"$$cg": 2}]}


def test_values_dag_cbor_cannot_hold_round_trip(tmp_path: Path) -> None:
    replica = Replica.open(tmp_path / "a")
    session = ConvgraphSession.new(replica)
    items: list[Any] = [
        {"role": "user", "content": "hi", "metadata": ODD},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"x": 1}', "extra": ODD},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "r",
                                                                     "score": 2**100}]},
        {"type": "reasoning", "id": "rs", "summary": [], "odd": ODD},
        {"role": "system", "content": "s", "odd": ODD},
    ]
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.get_items()) == items
    replica.close()
    fresh = Replica.open(tmp_path / "a")  # read afresh: from the records, not the view
    assert asyncio.run(ConvgraphSession(fresh, session.session_id).get_items()) == items
    assert fresh.verify().ok
    fresh.close()


def test_a_nan_round_trips() -> None:
    session = ConvgraphSession.new(Replica.in_memory())
    asyncio.run(session.add_items([{"role": "user", "content": "hi", "score": math.nan}]))
    (got,) = asyncio.run(session.get_items())
    assert math.isnan(got.pop("score")) and got == {"role": "user", "content": "hi"}


@pytest.mark.parametrize("size", [5_000_000, 50_000_000])
def test_an_item_of_megabytes_is_an_artifact_the_turn_names(tmp_path: Path, size: int) -> None:
    replica = Replica.open(tmp_path / "a")
    session = ConvgraphSession.new(replica)
    shot = os.urandom(size // 2).hex()
    big = {"role": "user", "content": [{"type": "input_image", "image_url": f"data:image/png;base64,{shot}"}]}
    call = {"type": "function_call", "call_id": "c1", "name": "scrape", "arguments": "{}"}
    page = {"type": "function_call_output", "call_id": "c1", "output": shot}
    asyncio.run(session.add_items([big, call, page]))
    asyncio.run(session.add_items([{"role": "assistant", "content": "done"}]))  # it goes on
    items = [big, call, page, {"role": "assistant", "content": "done"}]
    assert asyncio.run(session.get_items()) == items
    turns = replica.transcript(session.session_id)
    assert [len(replica.get(t.op).refs) for t in turns] == [1, 0, 1, 0]
    assert all(len(replica.store.get(t.op) or b"") < THRESHOLD for t in turns)
    assert replica.verify().ok
    other = Replica.open(tmp_path / "b")
    sync_replicas(other, replica)
    assert other.missing_artifacts(session.session_id) == []
    assert asyncio.run(ConvgraphSession(other, session.session_id).get_items()) == items
    assert other.verify().ok
    replica.close()
    other.close()
