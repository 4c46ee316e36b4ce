"""The replica's cached resume answers (`replica/resume_cache.py`): at every step of any history they
are the uncached answers byte for byte, whoever changed the store and however; and no caller
can change a later answer by changing the one it got."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pg
from conftest import IN_CI
from convgraph import ManualClock, MemoryStore, Replica, SigningKey, SqliteStore
from convgraph.core.cid import CID
from convgraph.errors import ConvgraphError
from convgraph.projections.resume import PROVIDERS, to_provider
from convgraph.projections.state import ConvState
from convgraph.projections.transcript import resume_window
from convgraph.projections.turn import ToolCall
from convgraph.replica.resume_cache import MAX_NEW, ResumeCache
from convgraph.store.base import Store
from convgraph.store.postgres import PostgresStore
from projections.window_world import BRANCHES, T0, World, ops

THINKING = {"type": "thinking", "thinking": "let me think", "signature": "RXFzaWduYXR1cmU="}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"}
THOUGHT = {"type": "thought", "thought": True, "text": "pondering", "thought_signature": b"\x01sig"}
OPAQUE = {"anthropic": THINKING, "openai-responses": REASONING, "gemini": THOUGHT}
OPENING = [("user", 0, 1, None), ("assistant", 1, 2, None), ("user", 2, 3, None)]  # something to resume
STEPS = ["ingest", "ingest", "elsewhere", "elsewhere", "say", "say", "think", "compact", "reindex"]


def _outcome(read: Callable[[], object]) -> str:
    """What a read gave, as text that tells every type apart (1 from 1.0 from True, str from bytes)."""
    try:
        return repr(read())
    except ConvgraphError as exc:
        return f"{type(exc).__name__}: {exc}"


def _folded(r: Replica, conv: str) -> ConvState | ConvgraphError:
    """The full fold the uncached answers read, or the error folding gave (each answer's)."""
    try:
        return r.visible(conv)
    except ConvgraphError as exc:
        return exc


def _uncached(state: ConvState | ConvgraphError, provider: str | None, branch: str | None, last: int | None) -> object:
    if isinstance(state, ConvgraphError):
        raise state
    window = resume_window(state, branch=branch, last=last)  # from the full fold
    return window if provider is None else to_provider(window.turns, provider)


def _same_answers(r: Replica, conv: str, data: st.DataObject, main: int | None) -> None:
    """Main's window with the same `last` every time (so that it moves on), a branch's any."""
    state = _folded(r, conv)  # once: nothing is written while the answers are compared
    for branch in (None, BRANCHES[0]):
        last = main if branch is None else data.draw(st.sampled_from([None, 1, 3, 6]), label="last")
        want = _outcome(partial(_uncached, state, None, branch, last))
        for _ in range(2):  # the second one is answered from the cache
            assert _outcome(partial(r.resume_window, conv, branch=branch, last=last)) == want
        for provider in PROVIDERS:
            want = _outcome(partial(_uncached, state, provider, branch, last))
            got = [_outcome(partial(r.resume, conv, provider, branch=branch, last=last)) for _ in range(2)]
            assert got == [want, want], provider


def _elsewhere(kind: str, home: Path, key: SigningKey) -> Replica | None:
    """Another connection to the observer's SQLite file: its commits move PRAGMA data_version."""
    if kind != "sqlite":
        return None
    return Replica(SqliteStore(home / "observer.sqlite"), key, clock=ManualClock(T0 + 10**7))


@pytest.mark.parametrize("rooted", [False, True], ids=["legacy", "rooted"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_at_every_step_the_cached_resume_is_the_uncached_one_byte_for_byte(
    kind: str, rooted: bool, tmp_path: Path
) -> None:
    made = iter(range(10**6))

    @settings(max_examples=(40 if kind == "memory" else 25) * (4 if IN_CI else 1))
    @given(script=ops(3, max_size=24, revoke=rooted), data=st.data())
    def run(script: list[tuple[Any, ...]], data: st.DataObject) -> None:
        world = World.rooted() if rooted else World.new(3)
        conv = world.conv
        for op in [*OPENING, *script]:
            world.run(op)
        order = data.draw(st.permutations(world.made), label="arrival")
        home = tmp_path / f"e{next(made)}"
        home.mkdir()
        store: Store = MemoryStore() if kind == "memory" else SqliteStore(home / "observer.sqlite")
        clock = ManualClock(T0 + 10**7)
        observer = Replica(store, SigningKey(b"\x09" * 32), clock=clock)
        other = _elsewhere(kind, home, SigningKey(b"\x0b" * 32))
        i, main = 0, data.draw(st.sampled_from([None, 1, 2, 4]), label="main's last")
        try:
            _same_answers(observer, conv, data, main)
            while i < len(order):
                step = data.draw(st.sampled_from(STEPS), label="step")
                clock.advance(1)
                if step in ("ingest", "elsewhere"):  # late records land mid-line, retractions mid-window
                    n = data.draw(st.integers(1, 3), label="batch")
                    (other or observer if step == "elsewhere" else observer).ingest(
                        [r.data for r in order[i : i + n]])
                    i += n
                elif rooted:
                    continue  # the observer holds no capability: it only ingests
                elif step in ("say", "think") and observer.heads(conv):
                    provider = data.draw(st.sampled_from(sorted(OPAQUE)), label="provider")
                    if step == "say":
                        observer.say(conv, data.draw(st.sampled_from(["user", "assistant"])), "mine")
                    else:
                        observer.write(conv, "agent_message", {"role": "assistant", "provider": provider,
                                                               "content": [OPAQUE[provider], {"type": "text", "text": "ok"}]})
                elif step == "compact" and observer.heads(conv):
                    observer.checkpoint(conv, compact=True)
                elif step == "reindex":  # rows wiped behind the cache's back, then rebuilt
                    observer.store.reindex(conv, [])
                    observer.repair_index()
                _same_answers(observer, conv, data, main)
        finally:
            if kind != "memory":
                observer.close()
            if other is not None:
                other.close()

    run()


def test_changing_an_answer_changes_no_later_answer() -> None:
    r = Replica.in_memory(SigningKey(b"\x07" * 32), clock=ManualClock(T0))
    r.say("c", "user", "look it up")
    r.write("c", "agent_message", {"role": "assistant", "provider": "anthropic",
                                   "content": [THINKING, {"type": "text", "text": "ok"}],
                                   "tool_calls": [{"id": "t1", "name": "lookup", "input": {"q": ["x"]}}]})
    r.say("c", "tool", "found", tool_use_id="t1")
    for provider in PROVIDERS:
        want = repr(r.resume("c", provider))
        for _ in range(3):  # the answer rendered again and kept, then each copy of the kept one
            got = r.resume("c", provider)
            assert repr(got) == want, provider
            got.append({"role": "user", "content": "next"})  # what an agent loop does with it
            for message in got:
                for value in list(message.values()):
                    if isinstance(value, list):
                        value.append("x")
                        for part in value:
                            if isinstance(part, dict):
                                part["cache_control"] = {"type": "ephemeral"}
                                for inner in part.values():
                                    if isinstance(inner, dict):
                                        inner["changed"] = True
        assert repr(r.resume("c", provider)) == want, provider
        window = r.resume_window("c")
        window.turns.clear()
        assert r.resume_window("c").turns


def test_nothing_is_kept_from_inside_a_transaction_that_rolls_back() -> None:
    r = Replica.in_memory(SigningKey(b"\x07" * 32), clock=ManualClock(T0))
    r.say("c", "user", "first")
    want = repr(r.resume("c"))

    def roll_back() -> None:
        with r.store.transaction():
            r.say("c", "user", "never landed")
            assert "never landed" in repr(r.resume("c"))
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        roll_back()
    assert repr(r.resume("c")) == want


def test_the_cache_keeps_at_most_its_limit_of_answers() -> None:
    r = Replica.in_memory(SigningKey(b"\x07" * 32), clock=ManualClock(T0))
    for k in range(6):
        r.say("c", "user", f"turn {k}")
    cache = ResumeCache(r.store, r._window, limit=3)
    for last in range(1, 7):
        assert cache.resume("c", "openai", branch=None, last=last) == r.resume("c", "openai", last=last)
    assert len(cache._held[1]) == 3


LOOP = ["step", "step", "step", "late", "retract", "supersede", "branch turn", "reopen"]


LOOP_EXAMPLES = {"memory": 30, "sqlite": 20, "postgres": 6}


def _opener(kind: str, home: Path, used: list[str]) -> Callable[[], Store]:
    """Connections to one fresh store: each call opens another (a memory store has only the
    one). On PostgreSQL the schema of the example before, emptied (`pg.emptied`), if any."""
    if kind == "memory":
        memory = MemoryStore()
        return lambda: memory
    if kind == "sqlite":
        return lambda: SqliteStore(home / "agent.sqlite")
    dsn = pg.dsn()
    schema = pg.emptied(dsn, used[0]) if used else pg.fresh_schema(dsn)
    used[:] = [schema]
    return lambda: PostgresStore(dsn, schema=schema, pool_size=2)


@pytest.mark.parametrize("kind", sorted(LOOP_EXAMPLES))
def test_an_agent_loop_window_moved_on_is_the_uncached_one(kind: str, tmp_path: Path) -> None:
    """Every resume follows a write (the case windows move on for), now and then a late turn of
    another device lands inside the window, or a recent turn is retracted or superseded."""
    made, used = iter(range(10**6)), list[str]()

    @settings(max_examples=LOOP_EXAMPLES[kind] * (4 if IN_CI else 1))
    @given(script=st.lists(st.sampled_from(LOOP), min_size=3, max_size=25), last=st.sampled_from([1, 2, 5]),
           data=st.data())
    def run(script: list[str], last: int, data: st.DataObject) -> None:
        home = tmp_path / f"l{next(made)}"
        home.mkdir()
        clock, late_clock = ManualClock(T0), ManualClock(T0)
        connect = _opener(kind, home, used)
        agent = Replica(connect(), SigningKey(b"\x0c" * 32), clock=clock)
        device = Replica.in_memory(SigningKey(b"\x0d" * 32), clock=late_clock)
        written = [agent.say("c", "user", "start")]
        try:
            for k, action in enumerate(script):
                clock.advance(2)
                if action == "step":
                    call = [ToolCall(f"t{k}", "lookup", {"q": k})]
                    written += [agent.say("c", "user", f"ask {k}"), agent.say("c", "assistant", "", tool_calls=call),
                                agent.say("c", "tool", f"found {k}", tool_use_id=f"t{k}")]
                elif action == "late":  # stamped when the device last synced: it lands mid-line
                    device.ingest([r.data for r in agent.iter_records()])
                    late = device.say("c", data.draw(st.sampled_from(["user", "assistant"])), f"late {k}")
                    agent.ingest([late.data])
                    late_clock.advance(1)
                elif action in ("retract", "supersede"):
                    target = data.draw(st.sampled_from(written[-4:]))
                    if action == "retract":
                        agent.write("c", "retraction", {"target": target.cid})
                    else:
                        agent.write("c", "supersession", {"target": target.cid, "content": f"edited {k}"})
                elif action == "branch turn":
                    agent.branch("c", "b1", written[-1].cid)
                    written.append(agent.say("c", "user", f"aside {k}", branch="b1"))
                elif kind != "memory":  # another connection writes: only the store's token tells
                    with Replica(connect(), SigningKey(b"\x0e" * 32), clock=clock) as other:
                        written.append(other.say("c", "user", f"elsewhere {k}"))
                state = _folded(agent, "c")
                for provider in PROVIDERS:
                    want = _outcome(partial(_uncached, state, provider, None, last))
                    assert _outcome(partial(agent.resume, "c", provider, last=last)) == want, (action, provider)
                assert _outcome(partial(agent.resume_window, "c", last=last)) == _outcome(
                    partial(_uncached, state, None, None, last))
        finally:
            if kind != "memory":
                agent.close()

    run()


class _Counting(MemoryStore):
    """A memory store that remembers how many records each `since` handed out."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[int] = []

    def since(self, cursor: int, conv: str) -> tuple[list[tuple[CID, bytes]], int]:
        found = super().since(cursor, conv)
        self.handed.append(len(found[0]))
        return found


def test_a_window_far_behind_is_read_again_not_moved_over_everything_since() -> None:
    store = _Counting()
    r = Replica(store, SigningKey(b"\x07" * 32), clock=ManualClock(T0))
    r.say("c", "user", "first")
    r.resume("c", last=2)
    for k in range(MAX_NEW + 5):
        r.say("c", "user", f"turn {k}")
    got = r.resume("c", last=2)
    assert store.handed == []  # read again, not moved over everything since
    assert got == to_provider(resume_window(r.visible("c"), last=2).turns, "anthropic")
    before = len(store.handed)  # the fold above reads with `since` too
    r.say("c", "user", "one more")
    moved = r.resume("c", last=2)
    assert store.handed[before:] == [1]  # a move of one turn reads one record
    assert moved == to_provider(resume_window(r.visible("c"), last=2).turns, "anthropic")
