"""`synchronize` against peers that never settle: one deadline and one round-trip budget
for the whole run, and no second chance for a peer that broke the protocol.

The clock is a fake one that each round trip moves on, so the deadline is exact here;
`test_http.py` shows the same deadline ending a real, slow HTTP answer.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable

import pytest

from convgraph.errors import ProtocolError, RoundTripLimitError, SyncTimeoutError, TransportError
from convgraph.integrity.statement import decode_statement, sign_statement
from convgraph.sync import wire
from convgraph.sync.deadline import Deadline
from convgraph.sync.initiator import ConvReport, synchronize
from convgraph.sync.wire import Fate, Reported
from sync.fakes import KEY, T0, FakePeer, population, record, responder, stubborn

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


class _Busy:
    """A responder that a third party writes into just before it answers the `at`-th message:
    a hook in the exchange, so where the write lands in the session is exact."""

    def __init__(self, server: FakePeer, written: bytes, *, at: int = 2, receipt: bool = True) -> None:
        self.server, self.written, self.at, self.receipt = server, written, at, receipt
        self.honest, self.calls = responder(server), 0

    def __call__(self, message: bytes) -> bytes:
        self.calls += 1
        if self.calls == self.at:
            self.server.ingest("c", [self.written])  # another client's push, between two messages
        reply = self.honest.receive(message)
        if self.receipt or self.calls != self.at:
            return reply
        # this reply's statements name nothing as stored: the records it reports stored are unconfirmed
        decoded = wire.decode(reply)
        sections = tuple(dataclasses.replace(s, statement=_no_receipt(s.statement)) for s in decoded.sections)
        return wire.encode(wire.Message(decoded.kind, decoded.salt, sections))


def _no_receipt(data: bytes | None) -> bytes | None:
    if data is None:
        return None
    st = decode_statement(data)
    return sign_statement(KEY, st.conv, st.count, st.heads, st.time_ms).data


def _busy_scene() -> tuple[list[bytes], list[bytes], list[bytes], bytes]:
    shared = population(random.Random(7), 40)
    mine = [record(T0 + 100 + i, b"mine %d" % i) for i in range(2)]
    theirs = [record(T0 + 100 + i, b"theirs %d" % i) for i in range(2)]
    return shared, mine, theirs, record(T0 + 50, b"a third party's, in the middle of the set")


def test_a_run_does_not_chase_records_others_land_during_its_session() -> None:
    shared, mine, theirs, third = _busy_scene()
    a, b = FakePeer(shared + mine), FakePeer(shared + theirs)
    busy = _Busy(b, third)
    report = synchronize(a, busy, ["c"], salts=salts)
    conv = report.convs["c"]
    # one session: it pushed what the client held and took what the server held at its first answer
    assert report.sessions == 1 and busy.calls == report.round_trips == 2
    assert a.set() == FakePeer(shared + mine + theirs).set()
    assert b.set() == FakePeer(shared + mine + theirs + [third]).set()
    assert conv.sent == 2 and conv.accepted_here == 2 and conv.accepted_there == 2
    # and it says so: not converged, behind by the one record the third party landed
    assert not report.converged and not conv.converged and conv.behind == 1
    assert conv.statement() == ("not converged: 1 record stored by the peer from others during "
                                "the session (the next sync takes them)")
    assert conv.caught_up()
    again = synchronize(a, responder(b).receive, ["c"], salts=salts)  # the next sync takes it
    assert again.converged and again.sessions == 1 and again.convs["c"].accepted_here == 1
    assert a.set() == b.set()


def test_a_session_that_could_not_finish_its_work_is_followed_by_another_though_the_peer_moved() -> None:
    shared, mine, theirs, third = _busy_scene()
    a, b = FakePeer(shared + mine), FakePeer(shared + theirs)
    busy = _Busy(b, third, receipt=False)  # the push's reply confirms none of it
    report = synchronize(a, busy, ["c"], salts=salts)
    assert report.sessions == 2 and report.converged and a.set() == b.set()


def test_a_quiet_peer_still_converges_in_one_session() -> None:
    shared, mine, theirs, _ = _busy_scene()
    a, b = FakePeer(shared + mine), FakePeer(shared + theirs)
    report = synchronize(a, responder(b).receive, ["c"], salts=salts)
    assert report.converged and report.sessions == 1 and report.convs["c"].behind == 0
