"""The replica's clock under writers of different conversations at once (issue 31 §1).

Ingests and writes of different conversations run in parallel threads, each holding only its
conversation's lock; the clock is shared. A merge parked half-way (a shim around
`receive_all`) must not let another merge finish and then be overwritten by the parked one's
older result. Who waited on whom decides the test, never a time.
"""

from __future__ import annotations

import threading

import pytest

from convgraph import Replica
from convgraph.core import hlc as hlc_
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.replica import writes

GRACE_S = 1.0  # how long the second merge gets to finish meanwhile: a deadline, not a measure


def test_a_merge_never_overwrites_a_later_one_that_ran_meanwhile(monkeypatch: pytest.MonkeyPatch) -> None:
    replica = Replica.in_memory(SigningKey.generate())
    writer = replica._writer
    base = writer.hlc.wall_ms + 10_000
    early, late = Hlc(base, 0), Hlc(base + 5_000, 0)
    real = hlc_.receive_all
    parked, go = threading.Event(), threading.Event()
    second_done = threading.Event()

    def shim(local: Hlc, stamps: object, now_ms: int) -> Hlc:
        result = real(local, stamps, now_ms)  # type: ignore[arg-type]
        if threading.current_thread().name == "early":
            parked.set()
            assert go.wait(30), "the test never let the first merge go on"
        return result

    monkeypatch.setattr(writes.hlc_, "receive_all", shim)
    first = threading.Thread(target=writer.received, args=([early], 0), name="early")
    first.start()
    assert parked.wait(30)
    # the second merge, a later stamp, while the first is parked between its read and its write
    second = threading.Thread(target=lambda: (writer.received([late], 0), second_done.set()), name="late")
    second.start()
    second_done.wait(GRACE_S)  # with the clock lock it cannot finish now: it waits for the first
    go.set()
    first.join(30)
    second.join(30)
    assert writer.hlc >= late, f"the clock went back to {writer.hlc}, behind an accepted {late}"
    # and what is written next is stamped after both
    record = replica.say("c", "user", "after both")
    assert record.hlc > late
