"""A compacted `ConvgraphChatMessageHistory` reads back whole (docs/integrations.md,
*Compaction*): messages keep their ids, response metadata, usage and everything else; the
history goes on (add_messages) as an uncompacted twin does; a second replica that syncs it
adopts the checkpoint and reads the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from convgraph import Replica, sync_replicas
from convgraph.integrations.langchain import ConvgraphChatMessageHistory
from integrations.test_langchain import EXCHANGE

pytestmark = pytest.mark.usefixtures("product_defaults")

SENT: list[BaseMessage] = [m.model_copy(update={"id": m.id or f"id-{i}"}) for i, m in enumerate(EXCHANGE)]
MORE: list[BaseMessage] = [HumanMessage("and Paris?", id="h-more"),
                           AIMessage("Sun.", id="a-more", response_metadata={"model_name": "fake"})]


def _reads(history: ConvgraphChatMessageHistory) -> tuple[list[BaseMessage], list[BaseMessage], list[dict[str, object]]]:
    return history.messages, history.last(3), history.resume("openai")


def test_a_compacted_history_reads_back_whole_and_goes_on_as_before(tmp_path: Path) -> None:
    replica = Replica.open(tmp_path / "home")
    history = ConvgraphChatMessageHistory.new(replica, "chat")
    history.add_messages(SENT)
    before = _reads(history)
    assert before[0] == SENT and all(m.id for m in before[0])
    assert before[0][2].response_metadata == {"model_name": "fake", "finish_reason": "tool_calls"}
    held = [r.cid for r in replica.iter_records(history.conv)]

    replica.checkpoint(history.conv, compact=True)
    assert all(replica.store.get(c) is None for c in held)
    assert _reads(history) == before
    replica.close()
    replica = Replica.open(tmp_path / "home")  # a fresh process: read from the snapshot
    history = ConvgraphChatMessageHistory(replica, history.conv)
    assert _reads(history) == before

    twin = ConvgraphChatMessageHistory.new(Replica.in_memory())
    twin.add_messages(SENT)
    for h in (history, twin):
        h.add_messages(MORE)
    assert _reads(history) == _reads(twin)
    assert history.messages == [*SENT, *MORE]
    assert replica.verify().ok
    replica.close()


def test_a_second_replica_adopts_the_compacted_history_and_reads_the_same(tmp_path: Path) -> None:
    a, c = Replica.open(tmp_path / "a"), Replica.open(tmp_path / "c")
    ours = ConvgraphChatMessageHistory.new(a, "chat")
    ours.add_messages(SENT)
    a.checkpoint(ours.conv, compact=True)
    ours.add_messages(MORE[:1])
    assert sync_replicas(a, c).converged
    assert c.store.snapshot(ours.conv) is not None  # c adopted the checkpoint
    theirs = ConvgraphChatMessageHistory(c, ours.conv)
    assert _reads(theirs) == _reads(ours)
    assert theirs.messages == [*SENT, *MORE[:1]]
    assert a.verify().ok and c.verify().ok
