"""The overall deadline of a sync, on a monotonic clock that the caller passes in.

A deadline is made once per sync and handed down to every exchange, so that a peer that
answers slowly, a byte at a time, cannot stretch the whole sync past it: timeouts per read
only bound each wait, never their sum. Invariant: `remaining()` never grows, and once it
is 0, `check` raises `SyncTimeoutError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from convgraph.errors import SyncTimeoutError

Monotonic = Callable[[], float]
"""Seconds on a clock that never goes back (`time.monotonic`, or a fake one in tests)."""

DEFAULT_TIMEOUT_S: Final = 120.0


@dataclass(frozen=True)
class Deadline:
    """The instant `at` on `clock` by which the work must be done, `timeout_s` after it began."""

    timeout_s: float
    at: float
    clock: Monotonic

    @classmethod
    def after(cls, timeout_s: float, clock: Monotonic = time.monotonic) -> Deadline:
        """The deadline `timeout_s` seconds from now on `clock`."""
        if not timeout_s > 0:
            raise ValueError(f"a timeout must be positive, not {timeout_s!r}")
        return cls(timeout_s, clock() + timeout_s, clock)

    def remaining(self) -> float:
        """Seconds left, 0 once the deadline has passed."""
        return max(0.0, self.at - self.clock())

    def check(self, doing: str) -> None:
        """Raise `SyncTimeoutError` naming what was `doing` when the deadline has passed."""
        if self.clock() >= self.at:
            raise SyncTimeoutError(f"the sync did not finish within {self.timeout_s:g} s ({doing})",
                                   timeout_s=self.timeout_s)
