"""The deadline of a sync: it counts down on the clock it is given and never grows back."""

from __future__ import annotations

import pytest

from convgraph.errors import SyncTimeoutError
from convgraph.sync.deadline import Deadline


def test_a_deadline_counts_down_on_its_clock_and_raises_from_the_instant_it_passes() -> None:
    now = [50.0]
    deadline = Deadline.after(2.5, lambda: now[0])
    assert deadline.at == 52.5 and deadline.remaining() == 2.5
    now[0] = 52.0
    deadline.check("round trip 3")
    assert deadline.remaining() == 0.5
    now[0] = 52.5
    with pytest.raises(SyncTimeoutError, match=r"within 2.5 s \(round trip 4\)") as caught:
        deadline.check("round trip 4")
    assert caught.value.timeout_s == 2.5 and caught.value.rule == "timeout"
    now[0] = 99.0
    assert deadline.remaining() == 0.0


@pytest.mark.parametrize("timeout_s", [0.0, -1.0, float("nan")])
def test_a_deadline_needs_a_positive_timeout(timeout_s: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        Deadline.after(timeout_s)
