"""The windowed reader (`projections/window.py`) against the fold, over the index as a pure
function of the records: equal windows and transcripts for any set of records, any hidden
set, any branch and any `last`; with compacted records, equal or a `CompactedError`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph import CompactedError, NoUserTurnError, Record
from convgraph.projections import state as state_
from convgraph.projections import window
from convgraph.projections.state import ConvState
from convgraph.projections.transcript import Window, resume_window, transcript
from convgraph.projections.turn import TURN_KINDS
from projections.window_world import BRANCHES, World, memory_reads, ops

PROPERTY = settings(max_examples=300 if IN_CI else 60)
LASTS = st.one_of(st.none(), st.integers(1, 12))


def _fold(records: list[Record], hidden: set[Any], any_retractor: bool) -> ConvState:
    folded = state_.fold(records)
    folded.any_retractor = any_retractor
    return state_.without(folded, hidden) if hidden else folded


def _window(f: Any, *args: Any, **kwargs: Any) -> Window | str:
    try:
        return f(*args, **kwargs)  # type: ignore[no-any-return]
    except NoUserTurnError:
        return "no user turn"


@PROPERTY
@given(script=ops(3), data=st.data())
def test_index_windows_equal_fold_windows_for_any_subset_hidden_set_branch_and_last(
    script: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    world = World.new(3)
    for op in script:
        world.run(op)
    if not world.made:
        return
    order = data.draw(st.permutations(world.made), label="arrival")
    for n in sorted({len(order), *data.draw(st.lists(st.integers(1, len(order)), max_size=3), label="cuts")}):
        held = list(order[:n])  # any subset: late records land in the middle of every line
        control = [r.cid for r in held if r.kind not in TURN_KINDS] or [held[0].cid]  # what shapes the lines
        hidden = set(data.draw(st.lists(st.sampled_from([r.cid for r in held]), max_size=3), label="hidden"))
        hidden |= set(data.draw(st.lists(st.sampled_from(control), max_size=2), label="hidden control"))
        rooted = data.draw(st.booleans(), label="any retractor")
        folded = _fold(held, hidden, rooted)
        reads = memory_reads(held, hidden=hidden, any_retractor=rooted)
        for branch in (None, *BRANCHES, "nope"):
            last = data.draw(LASTS, label="last")
            want = _window(resume_window, folded, branch=branch, last=last)
            assert _window(window.resume_window, reads, branch=branch, last=last) == want
            assert window.transcript(reads, branch=branch, last=last) == transcript(folded, branch=branch, last=last)


@PROPERTY
@given(script=ops(2), data=st.data())
def test_with_compacted_records_the_index_equals_the_fold_or_declines(
    script: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    world = World.new(2)
    for op in script:
        world.run(op)
    if not world.made:
        return
    cut = data.draw(st.integers(0, len(world.made)), label="compacted prefix")
    compacted = [r.cid for r in world.made[:cut]]
    reads = memory_reads(world.made, compacted=compacted)
    folded = state_.fold(world.made)
    answered = 0
    for branch in (None, *BRANCHES):
        last = data.draw(LASTS, label="last")
        want = _window(resume_window, folded, branch=branch, last=last)
        try:
            got = _window(window.resume_window, reads, branch=branch, last=last)
        except CompactedError:
            continue
        answered += 1
        assert got == want
    if not compacted:
        assert answered == 1 + len(BRANCHES)


def test_a_window_reads_its_rows_not_the_history() -> None:
    world = World.new(1)
    for k in range(300):
        world.run(("user" if k % 3 == 0 else "assistant", 0, k, None))
    records = world.made
    reads = memory_reads(records)
    asked: list[int] = []

    def counting(name: str, below: Any, limit: int) -> Any:
        rows = reads.line(name, below, limit)
        asked.append(len(rows))
        return rows

    got = window.resume_window(window.Reads(counting, reads.data, reads.targets, reads.branches, reads.records),
                               last=10)
    assert got == resume_window(state_.fold(records), last=10)
    assert sum(asked) <= 10 + 8  # the first page holds the window: nothing older is read


def test_a_window_needing_a_compacted_turn_declines() -> None:
    world = World.new(1)
    for k in range(6):
        world.run(("user", 0, k, None))
    reads = memory_reads(world.made, compacted=[world.made[-1].cid])
    with pytest.raises(CompactedError):
        window.resume_window(reads, last=2)
    older = memory_reads(world.made, compacted=[world.made[0].cid])
    assert window.resume_window(older, last=2) == resume_window(state_.fold(world.made), last=2)


def _same_everywhere(records: list[Record], hidden: set[Any] | None = None, rooted: bool = False) -> None:
    folded = _fold(records, hidden or set(), rooted)
    reads = memory_reads(records, hidden=hidden or (), any_retractor=rooted)
    for branch in (None, *BRANCHES):
        for last in (None, *range(1, len(records) + 1)):
            want = _window(resume_window, folded, branch=branch, last=last)
            assert _window(window.resume_window, reads, branch=branch, last=last) == want
            assert window.transcript(reads, branch=branch, last=last) == transcript(folded, branch=branch, last=last)


def _script(world: World, *acts: tuple[Any, ...]) -> list[Record]:
    for act in acts:
        world.run(act)
    return world.made


def test_the_last_branch_record_of_a_name_is_the_fork_and_a_hidden_one_does_not_count() -> None:
    world = World.new(1)
    made = _script(world, *[("user", 0, k, None) for k in range(4)])
    early, late = made[0], made[2]
    a = world.writers[0].branch("c", "b1", late.cid)
    world.clocks[0].advance(5)
    b = world.writers[0].branch("c", "b1", early.cid)
    made += [a, b, world.writers[0].say("c", "user", "on b1", branch="b1")]
    fold = state_.fold(made)
    assert [t.text for t in transcript(fold, branch="b1")][-2:] == [made[0].payload["content"], "on b1"]
    _same_everywhere(made)
    _same_everywhere(made, hidden={b.cid})  # then `a` is the fork
    _same_everywhere(made, hidden={early.cid})  # an origin hidden: the branch record's own place


def test_each_record_hidden_in_turn_retractions_supersessions_merges_heads_and_accepted() -> None:
    world = World.new(2)
    (a, b), (ca, cb) = world.writers, world.clocks
    made = world.made
    made += [a.say("c", "user", "q"), a.say("c", "assistant", "ans"), b.say("c", "user", "b on b1", branch="b1")]
    b.ingest([r.data for r in made[:2]])
    a.ingest([made[2].data])
    ca.advance(3)
    cb.advance(3)
    made += [a.write("c", "retraction", {"target": made[0].cid}), b.write("c", "retraction", {"target": made[1].cid}),
             a.write("c", "supersession", {"target": made[1].cid, "content": "ans v2"})]
    made.append(a.merge("c", "b1", accepted=[made[2].cid, made[1].cid]))
    made.append(a.merge("c", "b1", content="synthesis"))
    b.ingest([r.data for r in made])
    made.append(b.merge("c", "b2", summary="b's summary"))
    made.append(a.say("c", "user", "after"))
    for record in made:
        _same_everywhere(made, hidden={record.cid})
        _same_everywhere(made, hidden={record.cid}, rooted=True)
