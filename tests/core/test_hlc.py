"""Hybrid logical clock: the Kulkarni et al. rules as properties."""

from __future__ import annotations

import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from convgraph.core.hlc import (
    MAX_COUNTER,
    Hlc,
    ManualClock,
    after_all,
    receive,
    receive_all,
    send,
    system_clock,
    too_far_ahead,
)

walls = st.integers(min_value=0, max_value=2**45)
stamps = st.builds(Hlc, walls, st.integers(min_value=0, max_value=1000))


@given(stamps, walls)
def test_send_is_strictly_after_local_and_tracks_physical_time(local: Hlc, now: int) -> None:
    out = send(local, now)
    assert out > local
    assert out.wall_ms == max(local.wall_ms, now)
    assert out.counter == (0 if now > local.wall_ms else local.counter + 1)


@given(stamps, stamps, walls)
def test_receive_is_after_both(local: Hlc, remote: Hlc, now: int) -> None:
    out = receive(local, remote, now)
    assert out > local and out > remote
    assert out.wall_ms == max(local.wall_ms, remote.wall_ms, now)


near = st.builds(Hlc, st.integers(0, 3), st.sampled_from([0, 1, 2, MAX_COUNTER - 1, MAX_COUNTER]))


@given(st.one_of(stamps, near), st.lists(st.one_of(stamps, near), max_size=8), st.integers(0, 4) | walls)
@example(Hlc(2, 0), [Hlc(2, 5)], 0)  # one wall time: the larger counter, plus one
@example(Hlc(3, 7), [Hlc(2, 9), Hlc(3, MAX_COUNTER)], 1)  # at the bound: the next millisecond
@example(Hlc(1, 4), [Hlc(2, 9)], 0)  # the remote wall time: its counter, plus one
def test_receive_all_is_receive_of_each_stamp_in_turn(local: Hlc, remote: list[Hlc], now: int) -> None:
    expected = local
    for stamp in remote:
        expected = receive(expected, stamp, now)
    assert receive_all(local, remote, now) == expected


@given(stamps, st.lists(stamps, max_size=5), walls)
def test_after_all_exceeds_every_parent(local: Hlc, seen: list[Hlc], now: int) -> None:
    out = after_all(local, seen, now)
    assert all(out > s for s in [local, *seen])


@given(st.lists(st.tuples(st.booleans(), stamps, st.integers(0, 50)), max_size=30))
def test_a_process_stamps_are_strictly_increasing(events: list[tuple[bool, Hlc, int]]) -> None:
    clock, local, previous = ManualClock(0), Hlc(0, 0), []
    for is_receive, remote, step in events:
        clock.advance(step)
        local = receive(local, remote, clock()) if is_receive else send(local, clock())
        previous.append(local)
    assert previous == sorted(set(previous))


def test_counter_at_its_bound_rolls_into_the_next_millisecond() -> None:
    assert send(Hlc(5, MAX_COUNTER), 5) == Hlc(6, 0)
    assert receive(Hlc(5, 0), Hlc(5, MAX_COUNTER), 1) == Hlc(6, 0)
    assert receive(Hlc(9, MAX_COUNTER), Hlc(3, 0), 1) == Hlc(10, 0)


def test_drift_bound() -> None:
    assert not too_far_ahead(Hlc(1_060_000, 0), 1_000_000, 60_000)
    assert too_far_ahead(Hlc(1_060_001, 0), 1_000_000, 60_000)


def test_physical_time_going_backwards_keeps_monotonicity() -> None:
    local = send(Hlc(0, 0), 10_000)
    assert send(local, 5_000) == Hlc(10_000, 1)


@pytest.mark.parametrize(("local", "remote", "now", "out"), [
    (Hlc(10, 3), Hlc(10, 7), 5, Hlc(10, 8)),  # one wall time: after the larger counter
    (Hlc(10, 7), Hlc(10, 3), 5, Hlc(10, 8)),
    (Hlc(10, 3), Hlc(8, 9), 5, Hlc(10, 4)),  # ours is newest: our counter moves on
    (Hlc(8, 9), Hlc(10, 3), 5, Hlc(10, 4)),  # theirs is newest: theirs moves on
    (Hlc(8, 9), Hlc(9, 3), 10, Hlc(10, 0)),  # physical time is newest: counter restarts
])
def test_receive_takes_the_newest_wall_time_and_the_next_counter(local: Hlc, remote: Hlc, now: int, out: Hlc) -> None:
    assert receive(local, remote, now) == out


def test_the_counter_reaches_its_bound_before_it_rolls_over() -> None:
    assert send(Hlc(5, MAX_COUNTER - 1), 5) == Hlc(5, MAX_COUNTER)
    assert receive(Hlc(5, 0), Hlc(5, MAX_COUNTER - 1), 1) == Hlc(5, MAX_COUNTER)


def test_the_system_clock_reads_whole_milliseconds_since_the_epoch() -> None:
    now = system_clock()
    assert isinstance(now, int)
    assert abs(now - time.time_ns() // 1_000_000) < 60_000  # generous: only the unit is in question


def test_a_manual_clock_starts_at_a_fixed_instant_so_runs_reproduce() -> None:
    assert ManualClock()() == ManualClock()() == 1_700_000_000_000


def test_a_manual_clock_moves_only_when_told_to() -> None:
    clock = ManualClock(5)
    assert clock() == clock() == 5
    clock.advance(3)
    clock.advance(2)
    assert clock() == 10
