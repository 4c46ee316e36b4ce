"""`synchronize` against peers that never settle: one deadline and one round-trip budget
for the whole run, and no second chance for a peer that broke the protocol.

The clock is a fake one that each round trip moves on, so the deadline is exact here;
`test_http.py` shows the same deadline ending a real, slow HTTP answer.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from convgraph.errors import ProtocolError, RoundTripLimitError, SyncTimeoutError, TransportError
from convgraph.sync.deadline import Deadline
from convgraph.sync.initiator import ConvReport, synchronize
from convgraph.sync.wire import Fate, Reported
from sync.fakes import FakePeer, population, responder, stubborn

_salts = itertools.count()


def salts() -> bytes:
    return next(_salts).to_bytes(8, "big")


def peers() -> tuple[FakePeer, FakePeer]:
    return FakePeer(population(random.Random(1), 50)), FakePeer(population(random.Random(2), 50))


class Counted:
    """A transport that counts its calls, moves a fake clock on, and can fail on some calls."""

    def __init__(self, answer: object, *, step_s: float = 0.0, fails: Callable[[int], bool] = lambda _: False) -> None:
        self.answer, self.step_s, self.fails = answer, step_s, fails
        self.calls = self.replies = 0
        self.now = 0.0

    def __call__(self, message: bytes) -> bytes:
        self.calls += 1
        self.now += self.step_s
        if self.fails(self.calls):
            raise TransportError("connection reset")
        reply: bytes = self.answer(message)  # type: ignore[operator]
        self.replies += 1
        return reply


def test_the_deadline_covers_the_whole_sync_and_is_not_retried() -> None:
    a, b = peers()
    transport = Counted(stubborn(responder(b)), step_s=10.0)
    with pytest.raises(SyncTimeoutError) as caught:
        synchronize(a, transport, ["c"], salts=salts, timeout_s=25, monotonic=lambda: transport.now)
    assert caught.value.timeout_s == 25
    assert transport.calls == 3  # at 0, 10 and 20 s; at 30 s the deadline had passed: no fourth


def test_a_remote_is_handed_the_deadline_of_the_sync() -> None:
    a, b = peers()
    honest, now = responder(b), [100.0]
    seen: list[Deadline | None] = []

    class Remote:
        def exchange(self, message: bytes, *, deadline: Deadline | None = None) -> bytes:
            seen.append(deadline)
            now[0] += 1
            return honest.receive(message)

    report = synchronize(a, Remote(), ["c"], salts=salts, timeout_s=7, monotonic=lambda: now[0])
    assert report.converged and len(seen) == report.round_trips >= 2
    assert len({id(d) for d in seen}) == 1  # one deadline for every exchange of the run
    first = seen[0]
    assert first is not None and first.timeout_s == 7 and first.at == 107.0
    assert first.remaining() == 7 - report.round_trips


def test_a_reply_that_breaks_the_protocol_is_not_retried() -> None:
    a, _ = peers()
    transport = Counted(lambda _: b"\x01\x02not a sync message")
    with pytest.raises(ProtocolError):
        synchronize(a, transport, ["c"], salts=salts, retries=2)
    assert transport.calls == 1


def test_a_broken_connection_is_still_retried() -> None:
    a, b = peers()
    transport = Counted(responder(b).receive, fails=lambda n: n == 2)  # the second call is reset
    report = synchronize(a, transport, ["c"], salts=salts, retries=1)
    assert report.converged and report.failed_sessions == 1 and a.set() == b.set()


def test_round_trips_are_bounded_over_every_session_not_per_session() -> None:
    a, b = peers()
    transport = Counted(stubborn(responder(b)), fails=lambda n: n % 30 == 0)  # a session breaks after 29 replies
    with pytest.raises(RoundTripLimitError) as caught:
        synchronize(a, transport, ["c"], salts=salts, retries=2, max_round_trips=50)
    assert caught.value.limit == 50
    assert transport.replies == 50  # 29 in the first session, 21 in the second: the budget is the run's
    assert transport.calls == 51  # and the one call the network broke


def test_a_report_naming_a_record_by_index_is_read_against_what_was_pushed() -> None:
    pushed = [bytes([i]) * 32 for i in range(3)]
    conv = ConvReport()
    conv.take([Reported(Fate.REJECTED_AT, index=2, rule="size"), Reported(Fate.HELD, pushed[0], retry_ms=9)], pushed)
    assert conv.rejected_there == [Reported(Fate.REJECTED_AT, pushed[2], 2, "size")]
    assert conv.statement() == ("not converged: 1 record rejected by the peer; "
                                "1 record held by the peer until its clock reaches 9 ms")
    conv.take([Reported(Fate.RELEASED, pushed[0])], pushed)
    assert not conv.waiting_there and conv.released_there == 1
    with pytest.raises(ProtocolError, match="names record 3 of 3"):
        conv.take([Reported(Fate.REJECTED_AT, index=3, rule="size")], pushed)
