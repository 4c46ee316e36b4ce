"""ConvgraphSession off the event loop, its kept items, and its branches.

The loop: a ticker task counts its turns while a 10k-item `get_items()` is in flight; it
must advance many times, and not at all when the same read runs on the loop's thread (so the
test can fail). A store that records which thread calls it shows that no session method
touches it from the loop's thread. The kept items (integrations/_session_view.py) must equal
a fresh read after any mix of appends, pops, clears, other writers and synced records. The
branch methods are checked against the SDK's own `AdvancedSQLiteSession`, driven by
`agents.Runner` with the scripted model of test_openai_agents.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.extensions.memory.advanced_sqlite_session import AdvancedSQLiteSession
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph import AdapterError, Replica, sync_replicas
from convgraph.core.hlc import system_clock
from convgraph.core.keys import SigningKey
from convgraph.integrations import _session_file, _session_view
from convgraph.integrations.openai_agents import ConvgraphSession
from convgraph.projections import validity
from convgraph.store.memory import MemoryStore
from integrations.test_openai_agents import RUN, ScriptedModel, call, message, reasoning, weather


def items_of_step(i: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"question {i}"},
            {"type": "function_call", "call_id": f"c{i}", "name": "f", "arguments": f'{{"i": {i}}}'},
            {"type": "function_call_output", "call_id": f"c{i}", "output": f"result {i}"},
            {"type": "message", "role": "assistant", "id": f"m{i}", "status": "completed",
             "content": [{"type": "output_text", "text": f"answer {i}", "annotations": []}]}]


async def ticks_during(read: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
    """How many times a concurrent task got the loop while `read()` was in flight."""
    ticks, done = 0, False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)  # the ticker is running
    before = ticks
    result = await read()
    during = ticks - before
    done = True
    await task
    return during, result


def test_the_loop_keeps_running_during_a_10k_read(tmp_path: Path) -> None:
    writer = Replica.open(tmp_path / "r")
    conv = writer.create("long")
    added = [item for i in range(2500) for item in items_of_step(i)]
    asyncio.run(ConvgraphSession(writer, conv).add_items(added))  # type: ignore[arg-type]
    writer.close()

    async def in_a_thread() -> tuple[int, Any]:
        with Replica.open(tmp_path / "r") as fresh:  # nothing kept in memory
            return await ticks_during(lambda: ConvgraphSession(fresh, conv).get_items())

    async def on_the_loop() -> tuple[int, Any]:
        with Replica.open(tmp_path / "r") as fresh:
            session = ConvgraphSession(fresh, conv)

            async def blocking() -> Any:  # the same work, done where the old session did it
                return session._read(None, None)

            return await ticks_during(blocking)

    ticks, items = asyncio.run(in_a_thread())
    assert len(items) == 10_000 and items == added
    assert ticks >= 50
    assert _session_file.path_of(tmp_path / "r", conv, None).exists()
    ticks, items = asyncio.run(in_a_thread())  # read from the items file the first read wrote
    assert items == added and ticks >= 50
    ticks, items = asyncio.run(on_the_loop())
    assert items == added and ticks == 0


class ThreadSpy:
    """A store that notes every thread that calls it."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.threads: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if not callable(found):
            return found

        def spied(*args: Any, **kwargs: Any) -> Any:
            self.threads.add(threading.get_ident())
            return found(*args, **kwargs)

        return spied


def test_no_session_method_touches_the_store_from_the_loops_thread() -> None:
    spy = ThreadSpy(MemoryStore())
    replica = Replica(spy, SigningKey.generate())  # type: ignore[arg-type]
    conv = replica.create("spied")
    session = ConvgraphSession(replica, conv)

    async def everything() -> int:
        spy.threads.clear()
        for i in range(3):
            await session.add_items(items_of_step(i))  # type: ignore[arg-type]
        await session.get_items()
        await session.get_items(limit=2)
        await session.pop_item()
        turns = await session.get_conversation_turns()
        await session.find_turns_by_content("question")
        await session.create_branch_from_turn(turns[1]["turn"], "alt")
        await session.add_items([{"role": "user", "content": "on alt"}])
        await session.list_branches()
        await session.switch_to_branch("main")
        await session.switch_to_branch("alt")
        await session.clear_session()
        return threading.get_ident()

    loop_thread = asyncio.run(everything())
    assert spy.threads and loop_thread not in spy.threads


def test_concurrent_calls_on_one_session_lose_nothing(tmp_path: Path) -> None:
    with Replica.open(tmp_path / "r") as replica:
        session = ConvgraphSession.new(replica)

        async def together() -> None:
            await asyncio.gather(*(session.add_items(items_of_step(i)) for i in range(20)),  # type: ignore[arg-type]
                                 *(session.get_items(limit=3) for _ in range(10)))
            await asyncio.gather(*(session.pop_item() for _ in range(8)))

        asyncio.run(together())
        items = asyncio.run(session.get_items())
        assert len(items) == 80 - 8  # eight pops took the last two steps
        steps = [items[k:k + 4] for k in range(0, len(items), 4)]
        assert all(step == items_of_step(int(step[0]["content"].split()[1])) for step in steps)  # each whole
        assert len({step[0]["content"] for step in steps}) == 18
        assert items == _session_view.build(replica, session.session_id, None, None).items()


OPS = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 40)),
    st.tuples(st.just("pop"), st.just(0)),
    st.tuples(st.just("clear"), st.just(0)),
    st.tuples(st.just("say"), st.integers(0, 40)),
    st.tuples(st.just("synced"), st.integers(0, 40)),
    st.tuples(st.just("retract-first"), st.just(0)),
    st.tuples(st.just("read"), st.integers(0, 12)),
)


@settings(max_examples=40 if IN_CI else 15, deadline=None)
@given(st.lists(OPS, max_size=12))
def test_the_kept_items_equal_a_fresh_read_after_anything(ops: list[tuple[str, int]]) -> None:
    """Appends, pops, clears, other writers, records synced from another device (whose clocks
    may put them before ours), retractions of early turns: the items read through the kept
    view equal the items read afresh, whole and in every window."""
    replica = Replica.in_memory()
    session = ConvgraphSession.new(replica)
    conv = session.session_id
    other = Replica(MemoryStore(), SigningKey.generate(), clock=lambda: system_clock() - 60_000)
    replica.write(conv, "grant", {"grantee": other.actor, "rights": ["write"]})
    sync_replicas(other, replica)
    for op, n in ops:
        if op == "add":
            asyncio.run(session.add_items(items_of_step(n)))  # type: ignore[arg-type]
        elif op == "pop":
            asyncio.run(session.pop_item())
        elif op == "clear":
            asyncio.run(session.clear_session())
        elif op == "say":
            replica.say(conv, "assistant", f"said {n}")
        elif op == "synced":  # a device a minute behind, that saw what it last synced
            other.say(conv, "user", f"from afar {n}")
            sync_replicas(replica, other)
        elif op == "retract-first" and (turns := replica.transcript(conv)):
            replica.write(conv, "retraction", {"target": turns[0].op})
        fresh = _session_view.build(replica, conv, None, None).items()
        assert asyncio.run(session.get_items()) == fresh
        for limit in (1, 3, n or 1):
            assert asyncio.run(session.get_items(limit=limit)) == fresh[-limit:]


def test_items_read_are_the_callers_to_change() -> None:
    session = ConvgraphSession.new(Replica.in_memory())
    asyncio.run(session.add_items(items_of_step(0)))  # type: ignore[arg-type]
    first = asyncio.run(session.get_items())
    first[3]["content"][0]["text"] = "changed"
    first.append({"role": "user", "content": "mine"})
    assert asyncio.run(session.get_items()) == items_of_step(0)


# ---------------------------------------------------------------------- branches, against the SDK's own


def script() -> list[list[Any]]:
    return [[reasoning(1), call(1, "Oslo")], [message(2, "Oslo: rain.")], [message(3, "Rome: sun.")],
            [message(4, "Paris: sun.")], [call(5, "Rome")], [message(6, "Rome, then: quiet.")],
            [message(7, "Lisbon: warm.")]]


async def drive(session: Any) -> dict[str, Any]:
    """Three runs on main, a branch from turn 2 continued for two runs, a branch of that branch
    from its own turn 3, one run on it; what each session shows at each point."""
    model = ScriptedModel(script())
    agent = Agent(name="forecaster", instructions="Be brief.", model=model, tools=[weather])
    for question in ["Weather in Oslo?", "And Rome?", "And Paris?"]:
        await Runner.run(agent, question, session=session, run_config=RUN)
    seen: dict[str, Any] = {"main turns": await session.get_conversation_turns()}
    assert await session.create_branch_from_turn(2, "rome") == "rome"
    seen["forked"] = await session.get_items()
    for question in ["Rome, really?", "And Lisbon?"]:
        await Runner.run(agent, question, session=session, run_config=RUN)
    seen["rome"] = await session.get_items()
    seen["rome turns"] = await session.get_conversation_turns()
    seen["found"] = await session.find_turns_by_content("LISBON")
    await session.create_branch_from_turn(3, "rome2")
    seen["rome2 forked"] = await session.get_items()
    await session.switch_to_branch("main")
    seen["main"] = await session.get_items()
    seen["main turns again"] = await session.get_conversation_turns()
    seen["rome turns by id"] = await session.get_conversation_turns("rome")
    seen["branches"] = sorted((b["branch_id"], b["message_count"], b["user_turns"], b["is_current"])
                              for b in await session.list_branches())
    await session.switch_to_branch("rome")
    seen["rome again"] = await session.get_items(limit=5)
    seen["sent"] = model.inputs
    return seen


def test_branches_behave_as_on_advanced_sqlite_session() -> None:
    replica = Replica.in_memory()
    ours = ConvgraphSession.new(replica, "branching")
    theirs = AdvancedSQLiteSession(session_id="reference", create_tables=True)
    expected, got = asyncio.run(drive(theirs)), asyncio.run(drive(ours))
    for key in expected:
        if "turns" in key or key == "found":
            assert _no_time(got[key]) == _no_time(expected[key]), key
            assert all(isinstance(t["timestamp"], str) for t in got[key])
        else:
            assert got[key] == expected[key], key
    assert [t["full_content"] for t in got["rome turns"]] == \
        ["Weather in Oslo?", "Rome, really?", "And Lisbon?"]
    # convgraph keeps one fork of main, shared: the main turn before the fork is stored once
    records = replica.records(ours.session_id)
    assert sum(r.kind == "branch" for r in records) == 2
    assert sum(r.payload.get("content") == [{"type": "text", "text": "Weather in Oslo?"}] for r in records) == 1
    assert replica.verify().ok


def test_a_branch_syncs_and_resumes_like_any_conversation() -> None:
    replica = Replica.in_memory()
    session = ConvgraphSession.new(replica)
    asyncio.run(drive(session))
    other = Replica.in_memory()
    sync_replicas(other, replica)
    for branch in (None, "rome", "rome2"):
        mine = ConvgraphSession(replica, session.session_id, branch=branch)
        assert asyncio.run(ConvgraphSession(other, session.session_id, branch=branch).get_items()) \
            == asyncio.run(mine.get_items())
        wire = mine.resume("anthropic")
        assert validity.check("anthropic", wire) == []
    assert replica.transcript(session.session_id, branch="rome")[0].text == "Weather in Oslo?"


def test_branch_methods_refuse_what_does_not_map() -> None:
    session = ConvgraphSession.new(Replica.in_memory())
    asyncio.run(session.add_items(items_of_step(0)))  # type: ignore[arg-type]
    for turn in (0, 2):
        with pytest.raises(AdapterError, match="not a user turn"):
            asyncio.run(session.create_branch_from_turn(turn))
    with pytest.raises(AdapterError, match="no branch"):
        asyncio.run(session.switch_to_branch("nowhere"))
    name = asyncio.run(session.create_branch_from_turn(1))
    assert name.startswith("branch_from_turn_1_") and session.branch == name
    assert asyncio.run(session.get_items()) == []  # nothing before the first turn
    asyncio.run(session.switch_to_branch("main"))
    for taken in (name, "main", " "):
        with pytest.raises(AdapterError, match="empty or taken"):
            asyncio.run(session.create_branch_from_turn(1, taken))
    with pytest.raises(AdapterError, match="no user turn contains"):
        asyncio.run(session.create_branch_from_content("absent"))
    assert asyncio.run(session.create_branch_from_content("QUESTION 0", "q")) == "q"


def _no_time(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.items() if k != "timestamp"} for t in turns]


def test_a_view_moved_twice_from_the_same_state_gives_the_same_items() -> None:
    """A move that was not kept (a commit landed meanwhile) leaves what it appended in the
    lists it shares with its source; moving that source again must not read them."""
    replica = Replica.in_memory()
    conv = replica.create()
    replica.say(conv, "user", "one")
    source = _session_view.build(replica, conv, None, None)
    replica.say(conv, "assistant", "two")
    first = _session_view.move(replica, source, conv, None, replica.store.change_token())
    replica.say(conv, "user", "three")
    again = _session_view.move(replica, source, conv, None, replica.store.change_token())
    assert first is not None and again is not None
    assert [i["content"] for i in first.items()] == [[{"type": "input_text", "text": "one"}], "two"]
    assert again.items() == _session_view.build(replica, conv, None, None).items()
    assert first.items() == [first.items()[0], {"type": "message", "role": "assistant", "content": "two"}]
