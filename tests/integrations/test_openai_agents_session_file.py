"""The file a `ConvgraphSession` keeps of its items in the replica's home (integrations/
_session_file.py): a session opened afresh reads it instead of rebuilding the items, and what it
reads always equals a rebuild from the records. A file edited, cut short, signed by another key,
of another conversation, or naming a cursor or turns the store does not hold is ignored and
written again; what happened to the conversation since the file was written (appends, pops,
clears, retractions, compaction, adoption, branches, records synced from another replica)
shows in the cold read. Each case also counts the rebuilds, so a file that was silently never
used fails the test."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph import Replica, sync_replicas
from convgraph.integrations import _session_file, _session_view
from convgraph.integrations.openai_agents import ConvgraphSession
from integrations.test_openai_agents_session import items_of_step

Items = list[dict[str, Any]]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the views read afresh from the transcript (one entry per `build`)."""
    counted: list[int] = []
    real = _session_view.build

    def counting(*args: Any) -> _session_view.View:
        counted.append(1)
        return real(*args)

    monkeypatch.setattr(_session_view, "build", counting)
    return counted


def filled(home: Path, steps: int = 30) -> str:
    """A conversation of `steps` steps whose session read it whole once (so its file is written)."""
    with Replica.open(home) as replica:
        session = ConvgraphSession.new(replica, "filled")
        for i in range(steps):
            run(session.add_items(items_of_step(i)))  # type: ignore[arg-type]
        run(session.get_items())
        return session.session_id


def truth(home: Path, conv: str, branch: str | None = None) -> Items:
    with Replica.open(home) as replica:
        return _session_view.build(replica, conv, branch, None).items()


def cold(home: Path, conv: str, branch: str | None = None, limit: int | None = None) -> Items:
    """What the first read of a session opened afresh gives."""
    with Replica.open(home) as replica:
        return run(ConvgraphSession(replica, conv, branch=branch).get_items(limit))  # type: ignore[no-any-return]


def the_file(home: Path, conv: str, branch: str | None = None) -> Path:
    return _session_file.path_of(home, conv, branch)


def test_a_cold_read_reads_the_file_and_equals_a_rebuild(tmp_path: Path, builds: list[int]) -> None:
    conv = filled(tmp_path / "h")
    assert the_file(tmp_path / "h", conv).exists()
    builds.clear()
    assert cold(tmp_path / "h", conv) == items_of_all(30)
    assert cold(tmp_path / "h", conv, limit=7) == items_of_all(30)[-7:]
    assert not builds  # both read the file
    assert truth(tmp_path / "h", conv) == items_of_all(30)


def items_of_all(steps: int) -> Items:
    return [item for i in range(steps) for item in items_of_step(i)]


def _edited(home: Path, conv: str) -> None:
    path = the_file(home, conv)
    path.write_bytes(path.read_bytes().replace(b"question 3", b"question 9"))


def _truncated(home: Path, conv: str) -> None:
    path = the_file(home, conv)
    path.write_bytes(path.read_bytes()[:-150])


def _other_version(home: Path, conv: str) -> None:
    path = the_file(home, conv)
    path.write_bytes(path.read_bytes().replace(b"convgraph-session-items 1 ", b"convgraph-session-items 2 ", 1))


def _resaved(home: Path, conv: str, change: Callable[[_session_file.Loaded], _session_file.Loaded],
             by: Path | None = None) -> None:
    """The file written again, changed, signed by this home's key (or `by`'s)."""
    with Replica.open(home) as replica:
        loaded = _session_file.load(replica, conv, None)
    assert loaded is not None
    with Replica.open(by or home) as signer:
        assert _session_file.save(signer, conv, None, change(loaded))
    if by is not None:
        the_file(home, conv).write_bytes(the_file(by, conv).read_bytes())


def _doctored(loaded: _session_file.Loaded) -> _session_file.Loaded:
    frags = list(loaded.frags)
    frags[0] = '{"role": "user", "content": "not what was said"}'
    return _session_file.Loaded(loaded.cursor, loaded.hidden, loaded.top, loaded.cut, loaded.ops, frags)


def _foreign(home: Path, conv: str) -> None:
    _resaved(home, conv, _doctored, by=home.parent / "elsewhere")


def _cursor_ahead(home: Path, conv: str) -> None:
    _resaved(home, conv, lambda f: _session_file.Loaded(f.cursor + 10**6, f.hidden, f.top, f.cut, f.ops, f.frags))


def _turns_not_held(home: Path, conv: str) -> None:
    with Replica.open(home.parent / "other") as other:
        session = ConvgraphSession.new(other, "other")
        run(session.add_items(items_of_all(31)))  # type: ignore[arg-type]
        ops = list(_session_view.build(other, session.session_id, None, None).ops)
    _resaved(home, conv, lambda f: _session_file.Loaded(f.cursor, f.hidden, f.top, f.cut, ops[:len(f.ops)], f.frags))


def _of_another_conversation(home: Path, conv: str) -> None:
    with Replica.open(home) as replica:
        session = ConvgraphSession.new(replica, "another")
        run(session.add_items(items_of_all(2)))  # type: ignore[arg-type]
        run(session.get_items())
        the_file(home, conv).write_bytes(the_file(home, session.session_id).read_bytes())


SPOILED = {"edited": _edited, "truncated": _truncated, "of another version": _other_version,
           "signed by another key": _foreign, "cursor ahead of the store": _cursor_ahead,
           "naming turns the store does not hold": _turns_not_held,
           "of another conversation": _of_another_conversation}


@pytest.mark.parametrize("spoil", SPOILED.values(), ids=SPOILED.keys())
def test_a_spoiled_file_is_ignored_and_written_again(
    tmp_path: Path, builds: list[int], spoil: Callable[[Path, str], None]
) -> None:
    home = tmp_path / "h"
    conv = filled(home)
    spoil(home, conv)
    builds.clear()
    assert cold(home, conv, limit=5) == items_of_all(30)[-5:]
    assert builds  # read afresh, not from the file
    builds.clear()
    assert cold(home, conv) == items_of_all(30)
    assert builds
    builds.clear()
    assert cold(home, conv) == items_of_all(30)
    assert not builds  # written again, sound


def _appended(replica: Replica, session: ConvgraphSession) -> None:
    run(session.add_items(items_of_step(99)))  # type: ignore[arg-type]


def _popped(replica: Replica, session: ConvgraphSession) -> None:
    run(session.pop_item())
    run(session.pop_item())


def _cleared(replica: Replica, session: ConvgraphSession) -> None:
    run(session.clear_session())
    run(session.add_items([{"role": "user", "content": "after the clear"}]))


def _retracted(replica: Replica, session: ConvgraphSession) -> None:
    first = replica.transcript(session.session_id)[3].op
    replica.write(session.session_id, "retraction", {"target": first})


def _compacted(replica: Replica, session: ConvgraphSession) -> None:
    replica.checkpoint(session.session_id, compact=True)
    run(session.add_items(items_of_step(98)))  # type: ignore[arg-type]


def _synced(replica: Replica, session: ConvgraphSession) -> None:
    other = Replica.in_memory()
    replica.write(session.session_id, "grant", {"grantee": other.actor, "rights": ["write"]})
    sync_replicas(replica, other)
    run(ConvgraphSession(other, session.session_id).add_items(items_of_step(97)))  # type: ignore[arg-type]
    other.say(session.session_id, "assistant", "said elsewhere")
    sync_replicas(other, replica)


def _branched(replica: Replica, session: ConvgraphSession) -> None:
    run(ConvgraphSession(replica, session.session_id).create_branch_from_turn(5, "alt"))


CHANGES = {"add_items": _appended, "pop_item": _popped, "clear_session": _cleared,
           "retraction": _retracted, "compaction": _compacted, "records synced": _synced,
           "a branch": _branched}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_what_happened_since_the_file_shows_in_a_cold_read(
    tmp_path: Path, change: Callable[[Replica, ConvgraphSession], None]
) -> None:
    home = tmp_path / "h"
    conv = filled(home)
    written = the_file(home, conv).read_bytes()
    with Replica.open(home) as replica:
        change(replica, ConvgraphSession(replica, conv))
    the_file(home, conv).write_bytes(written)  # as it was before, whatever the change wrote since
    assert cold(home, conv) == truth(home, conv)
    assert cold(home, conv, limit=3) == truth(home, conv)[-3:]
    if change is _branched:
        assert cold(home, conv, "alt") == truth(home, conv, "alt") == items_of_all(4)


def test_an_adopted_conversation_moves_its_file_on(tmp_path: Path) -> None:
    a = Replica.open(tmp_path / "a")
    ours = ConvgraphSession.new(a, "adopted")
    run(ours.add_items(items_of_all(5)))  # type: ignore[arg-type]
    b = Replica.open(tmp_path / "b")
    assert sync_replicas(a, b).converged
    run(ConvgraphSession(b, ours.session_id).get_items())  # b's file
    b.close()
    a.checkpoint(ours.session_id, compact=True)
    run(ours.add_items(items_of_step(5)))  # type: ignore[arg-type]
    with Replica.open(tmp_path / "b") as b:
        assert sync_replicas(a, b).converged
    assert cold(tmp_path / "b", ours.session_id) == items_of_all(6) == truth(tmp_path / "b", ours.session_id)
    a.close()


OPS = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 40)),
    st.tuples(st.just("pop"), st.just(0)),
    st.tuples(st.just("clear"), st.just(0)),
    st.tuples(st.just("branch"), st.integers(1, 4)),
    st.tuples(st.just("switch"), st.just(0)),
    st.tuples(st.just("read"), st.integers(0, 5)),
    st.tuples(st.just("reopen"), st.just(0)),
)


@settings(max_examples=30 if IN_CI else 12, deadline=None)
@given(st.lists(OPS, max_size=10), st.sampled_from([1, 64]))
def test_a_fresh_sessions_cold_read_equals_the_warm_one(ops: list[tuple[str, int]], every: int) -> None:
    """Any mix of add_items, pop_item, clear_session, branch ops and reopenings, the file written
    after every change (`every` 1) or seldom (64): a fresh session's first read of each branch
    equals the warm session's, and a rebuild's."""
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(_session_view, "SAVE_EVERY", every)
        home = Path(tmp) / "h"
        replica = Replica.open(home)
        session = ConvgraphSession.new(replica, "p")
        conv = session.session_id
        for k, (op, n) in enumerate(ops):
            if op == "add":
                run(session.add_items(items_of_step(n)))  # type: ignore[arg-type]
            elif op == "pop":
                run(session.pop_item())
            elif op == "clear":
                run(session.clear_session())
            elif op == "branch":
                turns = run(session.get_conversation_turns())
                if n <= len(turns):
                    run(session.create_branch_from_turn(n, f"b{k}"))
            elif op == "switch":
                run(session.switch_to_branch("main"))
            elif op == "read":
                run(session.get_items(n or None))
            else:
                branch = session.branch
                replica.close()
                replica = Replica.open(home)
                session = ConvgraphSession(replica, conv, branch=branch)
        names = [b["branch_id"] for b in run(session.list_branches())]
        warm = {name: run(ConvgraphSession(replica, conv, branch=None if name == "main" else name).get_items())
                for name in names}
        replica.close()
        for name, items in warm.items():
            branch = None if name == "main" else name
            assert cold(home, conv, branch) == items == truth(home, conv, branch)


def test_a_replica_opened_without_its_key_reads_afresh(tmp_path: Path, builds: list[int]) -> None:
    """Its file cannot be checked (nor written): the items are read from the records."""
    home = tmp_path / "h"
    conv = filled(home)
    key = home / "actor.key"
    key.rename(tmp_path / "key.bak")
    builds.clear()
    with Replica.open(home, need_key=False) as replica:
        assert run(ConvgraphSession(replica, conv).get_items()) == items_of_all(30)
    assert builds


def test_a_file_that_cannot_be_written_costs_the_read_nothing(tmp_path: Path, builds: list[int]) -> None:
    home = tmp_path / "h"
    with Replica.open(home) as replica:
        session = ConvgraphSession.new(replica, "unwritable")
        run(session.add_items(items_of_all(3)))  # type: ignore[arg-type]
        (home / _session_file.DIRECTORY).write_text("a file where the directory goes")
        assert run(session.get_items()) == items_of_all(3)
    builds.clear()
    assert cold(home, session.session_id) == items_of_all(3)
    assert builds  # there was no file to read
