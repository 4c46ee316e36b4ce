"""The collector pause around batches: paused inside, left as it was found outside."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from convgraph import Draft, ManualClock, Replica
from convgraph.replica import collector


@pytest.fixture
def enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_inside_and_enabled_again_after(enabled: None) -> None:
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():  # nested: the inner one must not re-enable early
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_enabled_again_after_an_error(enabled: None) -> None:
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_caller_that_disabled_it_keeps_it_disabled(enabled: None) -> None:
    gc.disable()
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_ingest_and_write_leave_the_collector_on(enabled: None) -> None:
    source = Replica.in_memory(clock=ManualClock())
    conv = source.create("c")
    records = source.write_many(conv, [Draft("user_message", {"content": "hi"})])
    assert gc.isenabled()
    target = Replica.in_memory(clock=ManualClock())
    report = target.ingest([data for _, data in source.store.iter_all()])
    assert records[0].cid in report.accepted
    assert gc.isenabled()
