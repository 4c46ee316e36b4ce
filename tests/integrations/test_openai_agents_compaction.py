"""A compacted `ConvgraphSession` reads back whole (docs/integrations-agents.md, *Compaction*):
reasoning with its encrypted content, system, developer and item_reference items, function
calls, ids and statuses come back equal from the snapshot; the session goes on (add_items,
a Runner run, a branch) as an uncompacted twin does; a second replica that syncs it adopts
the checkpoint and reads the same."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner

from convgraph import Replica, sync_replicas
from convgraph.integrations.openai_agents import ConvgraphSession
from integrations.test_openai_agents import RUN, ScriptedModel, call, message, reasoning, weather

pytestmark = pytest.mark.usefixtures("product_defaults")

ITEMS: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "developer", "content": [{"type": "input_text", "text": "No emoji."}]},
    {"role": "user", "content": "Weather in Oslo?"},
    reasoning(1).model_dump(exclude_unset=True),
    call(1, "Oslo").model_dump(exclude_unset=True),
    {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
    message(2, "Oslo: rain.").model_dump(exclude_unset=True),
    {"type": "item_reference", "id": "msg_0"},
    {"role": "user", "content": "And Rome?"},
    {"type": "message", "role": "assistant", "id": "msg_3", "status": "completed",
     "content": [{"type": "output_text", "text": "Quiet.", "annotations": []}]},
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _reads(session: ConvgraphSession) -> Any:
    async def reads() -> Any:
        return (await session.get_items(), await session.get_items(limit=3), await session.list_branches(),
                await session.get_conversation_turns())

    return run(reads())


async def _go_on(session: ConvgraphSession) -> tuple[Any, list[Any]]:
    """add_items, a Runner run on a scripted model, then a branch from the first user turn."""
    await session.add_items([{"role": "user", "content": "Paris?"}])  # type: ignore[list-item]
    model = ScriptedModel([[reasoning(4), call(4, "Paris")], [message(5, "Paris: sun.")]])
    agent = Agent(name="forecaster", instructions="Be brief.", model=model, tools=[weather])
    await Runner.run(agent, "And now?", session=session, run_config=RUN)
    await session.create_branch_from_turn(1, "again")
    await session.add_items([{"role": "user", "content": "Weather in Bergen?"}])  # type: ignore[list-item]
    branch = await session.get_items()
    await session.switch_to_branch("main")
    return (await session.get_items(), branch), model.inputs


def test_a_compacted_session_reads_back_whole_and_goes_on_as_before(tmp_path: Path) -> None:
    replica = Replica.open(tmp_path / "home")
    session = ConvgraphSession.new(replica, "forecast")
    run(session.add_items(ITEMS))  # type: ignore[arg-type]
    before = _reads(session)
    assert before[0] == ITEMS
    conv = session.session_id
    held = [r.cid for r in replica.iter_records(conv)]

    replica.checkpoint(conv, compact=True)
    assert all(replica.store.get(c) is None for c in held)
    assert _reads(session) == before  # the kept view, moved on past the checkpoint
    assert _reads(ConvgraphSession(replica, conv)) == before
    replica.close()
    replica = Replica.open(tmp_path / "home")  # a fresh process: read from the snapshot
    session = ConvgraphSession(replica, conv)
    assert _reads(session) == before

    twin = ConvgraphSession.new(Replica.in_memory(), "twin")
    run(twin.add_items(ITEMS))  # type: ignore[arg-type]
    went_on = run(_go_on(session))
    assert went_on == run(_go_on(twin))  # the same items, and the model was sent the same input
    assert went_on[0][0][:len(ITEMS)] == ITEMS  # the fork holds what came before user turn 1
    assert went_on[0][1] == [*ITEMS[:2], {"role": "user", "content": "Weather in Bergen?"}]
    assert replica.verify().ok
    replica.close()


def test_a_second_replica_adopts_the_compacted_session_and_reads_the_same(tmp_path: Path) -> None:
    a = Replica.open(tmp_path / "a")
    ours = ConvgraphSession.new(a, "forecast")
    run(ours.add_items(ITEMS))  # type: ignore[arg-type]
    b = Replica.open(tmp_path / "b")
    theirs = ConvgraphSession(b, ours.session_id)
    assert sync_replicas(a, b).converged
    assert _reads(theirs) == _reads(ours)  # b's view is kept, then moved on by what b adopts

    a.checkpoint(ours.session_id, compact=True)
    run(ours.add_items([{"role": "user", "content": "after"}]))  # type: ignore[list-item]
    c = Replica.open(tmp_path / "c")  # held nothing before: adopts
    for other in (b, c):
        assert sync_replicas(a, other).converged
    assert c.store.snapshot(ours.session_id) is not None
    expected = _reads(ours)
    assert expected[0] == [*ITEMS, {"role": "user", "content": "after"}]
    assert _reads(ConvgraphSession(c, ours.session_id)) == expected
    assert _reads(theirs) == expected
    assert a.verify().ok and b.verify().ok and c.verify().ok
