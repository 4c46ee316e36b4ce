"""Hybrid logical clocks (Kulkarni et al., 2014) as pure functions of values.

An `Hlc` is `(wall_ms, counter)`: `wall_ms` follows the largest physical time seen, and
`counter` orders events that share it. `send` stamps a local event, `receive` merges a
remote stamp. A physical clock is passed in as a `Clock`, never read here. Invariants:
`send(l, t) > l`; `receive(l, m, t) > l` and `> m`, even at the counter's bound (it rolls
into the next millisecond); and a remote stamp beyond the allowed drift is never merged
(`too_far_ahead`), so one peer's broken clock cannot drag ours.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Final, NamedTuple

MAX_WALL_MS: Final = 2**53 - 1  # exact in IEEE doubles, so JavaScript peers agree
MAX_COUNTER: Final = 2**32 - 1
DEFAULT_MAX_DRIFT_MS: Final = 60_000

Clock = Callable[[], int]
"""A physical clock: returns milliseconds since the Unix epoch."""


class Hlc(NamedTuple):
    """A hybrid logical timestamp; tuple order is the causal-compatible total order."""

    wall_ms: int
    counter: int


ZERO: Final = Hlc(0, 0)


def _checked(wall_ms: int, counter: int) -> Hlc:
    # A counter at its bound rolls into the next millisecond: still strictly after both
    # inputs, and a hostile peer's stamp at the bound cannot stop our clock.
    if counter > MAX_COUNTER:
        return Hlc(wall_ms + 1, 0)
    return Hlc(wall_ms, counter)


def send(local: Hlc, now_ms: int) -> Hlc:
    """The stamp of a new local event, strictly after `local`."""
    if now_ms > local.wall_ms:
        return Hlc(now_ms, 0)
    return _checked(local.wall_ms, local.counter + 1)


def receive(local: Hlc, remote: Hlc, now_ms: int) -> Hlc:
    """Merge a remote stamp: the result is strictly after both `local` and `remote`."""
    wall = max(local.wall_ms, remote.wall_ms, now_ms)
    if wall == local.wall_ms == remote.wall_ms:
        return _checked(wall, max(local.counter, remote.counter) + 1)
    if wall == local.wall_ms:
        return _checked(wall, local.counter + 1)
    if wall == remote.wall_ms:
        return _checked(wall, remote.counter + 1)
    return Hlc(wall, 0)


def receive_all(local: Hlc, stamps: Iterable[Hlc], now_ms: int) -> Hlc:
    """`receive` of each stamp in turn, the same result without a tuple per step (ingest merges
    a thousand at a time)."""
    wall, counter = local
    for remote_wall, remote_counter in stamps:
        top = max(wall, remote_wall, now_ms)
        if top == wall == remote_wall:
            counter = max(counter, remote_counter) + 1
        elif top == wall:
            counter += 1
        elif top == remote_wall:
            counter = remote_counter + 1
        else:
            counter = 0
        wall = top
        if counter > MAX_COUNTER:
            wall, counter = wall + 1, 0
    return Hlc(wall, counter)


def after_all(local: Hlc, seen: Iterable[Hlc], now_ms: int) -> Hlc:
    """The stamp for a record written after observing `seen` (its parents' stamps)."""
    return send(max((local, *seen)), now_ms)


def too_far_ahead(remote: Hlc, now_ms: int, max_drift_ms: int) -> bool:
    """True when `remote` claims a wall time beyond what our clock tolerates now."""
    return remote.wall_ms > now_ms + max_drift_ms


def system_clock() -> int:
    """The operating system's wall clock in milliseconds."""
    return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to: for tests, demos and reproducible runs."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        """Move the clock forward by `ms` milliseconds."""
        self.now_ms += ms
