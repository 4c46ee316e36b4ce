"""ConvgraphChatMessageHistory keeps what SQLChatMessageHistory keeps: a message of megabytes
(stored as an artifact the turn names), and metadata DAG-CBOR cannot hold (NaN, infinities,
integers beyond 64 bits, keys that look like tags), read back equal, here and after sync."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from convgraph import Replica, sync_replicas
from convgraph.integrations._large import THRESHOLD
from convgraph.integrations.langchain import ConvgraphChatMessageHistory

ODD: dict[str, Any] = {"low": -math.inf, "high": math.inf, "huge": 2**80, "neg": -(2**70),
                       "$cg": "float", "nested": [{"$cg": "int", "v": "1"}, {"$$cg": 2}]}


def test_metadata_dag_cbor_cannot_hold_round_trips() -> None:
    replica = Replica.in_memory()
    history = ConvgraphChatMessageHistory.new(replica)
    sent = [HumanMessage("hi", additional_kwargs={"odd": ODD, "nan": math.nan}, id="h1"),
            AIMessage("calc", tool_calls=[{"name": "f", "args": {"x": 2**65, "y": -math.inf},
                                           "id": "c1", "type": "tool_call"}],
                      response_metadata=ODD, id="a1"),
            ToolMessage([{"type": "text", "text": "r"}, {"type": "data", "$cg": 1}], tool_call_id="c1")]
    history.add_messages(sent)
    got = history.messages
    nan = got[0].additional_kwargs.pop("nan")
    assert math.isnan(nan)
    sent[0].additional_kwargs.pop("nan")
    assert got == sent
    assert replica.verify().ok


@pytest.mark.parametrize("size", [5_000_000, 50_000_000])
def test_a_message_of_megabytes_is_an_artifact_the_turn_names(tmp_path: Path, size: int) -> None:
    replica = Replica.open(tmp_path / "a")
    history = ConvgraphChatMessageHistory.new(replica)
    page = os.urandom(size // 2).hex()
    history.add_messages([HumanMessage("fetch it"), ToolMessage(page, tool_call_id="t", id="big")])
    history.add_messages([AIMessage("done")])  # the history goes on
    got = history.messages
    assert got[1].content == page and got[1].id == "big" and got[2] == AIMessage("done")
    turn = replica.transcript(history.conv)[1]
    named = replica.get(turn.op).refs
    assert len(named) == 1 and len(replica.store.get(turn.op) or b"") < THRESHOLD
    assert replica.verify().ok
    other = Replica.open(tmp_path / "b")
    sync_replicas(other, replica)
    assert other.missing_artifacts(history.conv) == []
    assert ConvgraphChatMessageHistory(other, history.conv).messages[1].content == page
    assert other.verify().ok
    replica.close()
    other.close()
