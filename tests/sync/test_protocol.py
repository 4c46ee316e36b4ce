"""The sync state machine over in-memory peers: it converges on any pair of sets, cheaply.

The promises: any two sets end equal to their union; d = 0 costs one round trip and
under 1 KB; one differing record anywhere costs at most 4 round trips and under 4 KB
beyond the record; a tight budget only adds round trips; a refused record is reported
and never stops the rest; a hostile responder gets a `ProtocolError`, never a hang.
"""

from __future__ import annotations

import itertools
import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph.errors import ProtocolError
from convgraph.sync import wire
from convgraph.sync.initiator import Initiator, synchronize
from sync.fakes import FakePeer, ManyPeers, population, record, responder, stubborn

_salts = itertools.count()


def salts() -> bytes:
    return next(_salts).to_bytes(8, "big")


def run(a: FakePeer, b: FakePeer, **kw: object) -> object:
    answerer = responder(b, **{k: v for k, v in kw.items() if k == "budget"})  # type: ignore[arg-type]
    return synchronize(a, answerer.receive, ["c"], salts=salts, **kw)  # type: ignore[arg-type]


@st.composite
def two_sets(draw: st.DrawFn) -> tuple[list[bytes], list[bytes], list[bytes]]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    n = draw(st.sampled_from([0, 1, 2, 5, 40, 300, 2000]))
    spread = draw(st.sampled_from([0, 1, 3, 50]))  # 0: every record at one wall time
    size = draw(st.sampled_from([8, 100]))
    universe = population(rng, n, size=size, spread=spread)
    shape = draw(st.sampled_from(["random", "a-tail", "b-tail", "both-tails", "one-side", "disjoint"]))
    p = draw(st.sampled_from([0.0, 0.01, 0.3, 0.9]))
    a, b = [], []
    for i, r in enumerate(universe):
        late = i >= n * 0.9
        if shape == "random":
            where = rng.choice("ab" * 4 + "a" + "b") if rng.random() < p else "ab"
        elif shape == "a-tail":
            where = "a" if late else "ab"
        elif shape == "b-tail":
            where = "b" if late else "ab"
        elif shape == "both-tails":
            where = rng.choice("ab") if late else "ab"
        elif shape == "one-side":
            where = "b" if rng.random() < p else "ab"
        else:
            where = rng.choice("ab")
        (a.append(r) if "a" in where else None), (b.append(r) if "b" in where else None)
    return universe, a, b


def compacting(rng: random.Random, ahead: FakePeer, behind: FakePeer | None) -> None:
    """`ahead` compacts every record below a cut, some the other side may lack; `behind`, if
    given, compacts fewer, all shared with `ahead`: two checkpoints, one extending the other."""
    keys = ahead.keys("c").keys
    cut = rng.randrange(len(keys) + 1)
    ahead.compact({d for _, d in keys[:cut]})
    if behind is not None:
        shared = [d for _, d in behind.keys("c").keys[: rng.randrange(len(behind.keys("c")) + 1)]]
        behind.compact({d for d in shared if d in ahead.gone})


@settings(max_examples=300 if IN_CI else 60)
@given(two_sets(), st.sampled_from([4 << 20, 2000]),
       st.sampled_from(["none", "a", "b", "a, then b", "b, then a"]), st.integers(0, 2**32))
def test_any_two_sets_end_equal_to_their_union(
    sets: tuple[list[bytes], list[bytes], list[bytes]], budget: int, compaction: str, seed: int
) -> None:
    universe, a_records, b_records = sets
    a, b = FakePeer(a_records), FakePeer(b_records)
    rng = random.Random(seed)
    if compaction != "none":
        ahead, behind = (a, b) if compaction.startswith("a") else (b, a)
        compacting(rng, ahead, behind if "then" in compaction else None)
    report = run(a, b, budget=budget, max_sessions=6)
    union = FakePeer(universe).set()
    assert a.set() == b.set() == union
    assert report.converged  # type: ignore[attr-defined]
    assert report.sessions <= 2 or budget < 4 << 20  # type: ignore[attr-defined]
    assert not report.convs["c"].gone  # type: ignore[attr-defined]  # a base, never `gone`
    again = run(a, b, budget=budget)
    assert again.converged and again.round_trips == 1  # type: ignore[attr-defined]


def test_no_difference_costs_one_round_trip_and_under_a_kilobyte() -> None:
    same = population(random.Random(1), 20_000)
    report = run(FakePeer(same), FakePeer(same))
    assert (report.round_trips, report.sessions) == (1, 1)  # type: ignore[attr-defined]
    assert report.bytes_sent + report.bytes_received < 1024  # type: ignore[attr-defined]


@pytest.mark.parametrize("side", ["client", "server"])
@pytest.mark.parametrize("where", [0.0, 0.37, 0.5, 0.999, 1.0])
def test_one_differing_record_anywhere_costs_at_most_four_round_trips(side: str, where: float) -> None:
    records = population(random.Random(2), 20_000, size=1000)
    odd = records[min(int(where * len(records)), len(records) - 1)]
    rest = [r for r in records if r is not odd]
    a, b = (FakePeer(rest), FakePeer(records)) if side == "client" else (FakePeer(records), FakePeer(rest))
    report = run(a, b)
    assert a.set() == b.set()
    assert report.round_trips <= 4  # type: ignore[attr-defined]
    assert report.bytes_sent + report.bytes_received - len(odd) < 4096  # type: ignore[attr-defined]


def test_a_refused_record_is_reported_and_the_rest_still_move() -> None:
    records = population(random.Random(3), 500)
    bad = records[100]
    a = FakePeer(records)
    b = FakePeer(records[:50], refuse=lambda data: data == bad)
    report = run(a, b)
    assert b.set() == FakePeer(records).set() - {FakePeer([bad]).keys("c").keys[0][1]}
    conv = report.convs["c"]  # type: ignore[attr-defined]
    assert conv.accepted_there == 449 and [r.rule for r in conv.rejected_there] == ["signature"]
    assert not report.converged  # type: ignore[attr-defined]
    assert conv.statement() == "not converged: 1 record rejected by the peer"


def test_records_the_peer_can_no_longer_serve_are_reported_as_gone() -> None:
    records = population(random.Random(4), 300)
    b = FakePeer(records)
    b.gone = set(list(b.items)[:10])
    a = FakePeer(records[100:])
    report = run(a, b)
    assert set(report.convs["c"].gone) >= set(b.gone) - a.set()  # type: ignore[attr-defined]
    assert a.set() == b.set() - (b.gone - FakePeer(records[100:]).set())


def test_many_conversations_in_one_session() -> None:
    rng = random.Random(5)
    x, y = population(rng, 100), population(rng, 300)
    a = ManyPeers({"x": FakePeer(x[:60]), "y": FakePeer(y), "z": FakePeer()})
    b = ManyPeers({"x": FakePeer(x[40:]), "w": FakePeer(y)})
    session = Initiator(a, ["x", "y", "z"], salt=salts())
    answerer = responder(b)
    message = session.initiate()
    while message is not None:
        message = session.receive(answerer.receive(message))
    assert session.converged() and sorted(session.reports) == ["x", "y", "z"]
    x_digests = FakePeer(x).set()
    assert session.have["x"] == x_digests - FakePeer(x[40:]).set()  # what the responder lacked
    assert session.need["x"] == x_digests - FakePeer(x[:60]).set()  # what we lacked
    assert session.need["y"] == set() and session.have["y"] == FakePeer(y).set()
    assert a.convs["x"].set() == b.convs["x"].set() == FakePeer(x).set()
    assert a.convs["y"].set() == b.convs["y"].set() == FakePeer(y).set()
    assert a.convs["z"].set() == b.convs["z"].set() == set()
    assert b.convs["w"].set() == FakePeer(y).set()  # not named: untouched


def test_a_reply_from_another_session_or_of_the_wrong_kind_is_refused() -> None:
    a, b = FakePeer(population(random.Random(6), 50)), FakePeer()
    session = Initiator(a, ["c"], salt=salts())
    first = session.initiate()
    reply = wire.decode(responder(b).receive(first))
    forged = wire.encode(wire.Message(reply.kind, b"\xff" * 8, reply.sections))
    with pytest.raises(ProtocolError, match="reply to this session"):
        session.receive(forged)
    with pytest.raises(ProtocolError, match="reply to this session"):
        Initiator(a, ["c"], salt=salts()).receive(first)
    with pytest.raises(ProtocolError, match="was sent a reply"):
        responder(b).receive(responder(b).receive(first))


def test_a_reply_about_a_conversation_not_asked_for_is_refused() -> None:
    session = Initiator(FakePeer(), ["c"], salt=salts())
    first = wire.decode(session.initiate())
    reply = wire.Message(wire.Kind.REPLY, first.salt, (wire.Section("other", 0, bytes(16), statement=b"s"),))
    with pytest.raises(ProtocolError, match="not asked for"):
        session.receive(wire.encode(reply))


def synchronize_with(session: Initiator, transport: object) -> None:
    message = session.initiate()
    while message is not None:
        message = session.receive(transport(message))  # type: ignore[operator]


def test_a_responder_that_never_finishes_is_cut_off() -> None:
    a = FakePeer(population(random.Random(7), 200))
    b = FakePeer(population(random.Random(8), 200))
    session = Initiator(a, ["c"], salt=salts(), max_rounds=50)
    with pytest.raises(ProtocolError, match="did not finish within 50"):
        synchronize_with(session, stubborn(responder(b)))


def test_records_before_and_after_a_tie_of_wall_times_are_told_apart() -> None:
    rng = random.Random(9)
    tied = [record(1, rng.randbytes(16)) for _ in range(500)]  # one wall time: only digests order them
    a, b = FakePeer(tied[::2]), FakePeer(tied[1::3])
    assert run(a, b).converged  # type: ignore[attr-defined]
    assert a.set() == b.set() == FakePeer(tied[::2] + tied[1::3]).set()


def test_salt_must_be_eight_bytes() -> None:
    with pytest.raises(ValueError, match="8 bytes"):
        Initiator(FakePeer(), ["c"], salt=os.urandom(4))


def test_two_of_our_keys_sharing_an_item_hash_are_both_pushed(monkeypatch: pytest.MonkeyPatch) -> None:
    from convgraph.sync import reconcile
    from convgraph.sync.keyset import item_hash

    records = population(random.Random(10), 600)
    held = records[::50]
    twins = {FakePeer([records[301]]).keys("c").keys[0][1], FakePeer([records[302]]).keys("c").keys[0][1]}
    # two keys the server holds and the client lacks share one 3-byte hash, as happens now
    # and then among many thousand keys; the client's id list names neither
    monkeypatch.setattr(reconcile, "item_hash",
                        lambda salt, digest: b"\0\0\0" if digest in twins else item_hash(salt, digest))
    a, b = FakePeer(held), FakePeer(records)
    session = Initiator(a, ["c"], salt=salts())
    synchronize_with(session, responder(b).receive)
    assert twins <= a.set() and a.set() == b.set()


def test_a_base_too_large_for_a_message_is_reported_gone_instead() -> None:
    records = population(random.Random(11), 300)
    small = wire.WireLimits(max_message=(1 << 16) + 4000)  # room for 100 keys of cover, not 200
    for compacted, gone in ((80, 0), (200, 200)):
        a, b = FakePeer(), FakePeer(records)
        b.compact({d for _, d in b.keys("c").keys[:compacted]})
        report = synchronize(a, responder(b, limits=small).receive, ["c"], salts=salts)
        assert len(set(report.convs["c"].gone)) == gone and report.converged == (gone == 0)
        assert len(a.set()) == 300 - gone


@pytest.mark.parametrize(("held", "modes"), [(256, {wire.Mode.IDS}), (257, {wire.Mode.FINGERPRINT})])
def test_the_first_answer_lists_up_to_256_keys_and_splits_above(held: int, modes: set[wire.Mode]) -> None:
    """docs/sync.md step 4: 256 in the reply to an INITIATE, 32 in every later step."""
    server = FakePeer(population(random.Random(7), held))
    # the client's one record is older than all of the server's: no prefix, no probe matches
    first = Initiator(FakePeer([record(1, b"older")]), ["c"], salt=salts()).initiate()
    [section] = wire.decode(responder(server).receive(first)).sections
    assert section.ranges is not None and {r.mode for r in section.ranges} == modes
    assert len(section.ranges) == (1 if held == 256 else 16)
    assert sum(len(r.hashes) for r in section.ranges) == (256 if held == 256 else 0)
@pytest.mark.parametrize("n", [0, 5, 300])
def test_the_first_reply_to_an_equal_set_asks_and_sends_nothing(n: int) -> None:
    same = population(random.Random(11), n)
    session = Initiator(FakePeer(same), ["c"], salt=salts())
    reply = responder(FakePeer(same)).receive(session.initiate())
    (section,) = wire.decode(reply).sections
    assert (section.ranges, section.wants, section.records) == (None, (), ())
    assert session.receive(reply) is None and session.converged()


@pytest.mark.parametrize("side", ["client", "server"])
def test_a_record_larger_than_the_budget_still_goes_across(side: str) -> None:
    rng = random.Random(12)
    records = population(rng, 40)
    big = record(int.from_bytes(records[20][:6], "big"), rng.randbytes(5000))
    full, lacking = FakePeer([*records, big]), FakePeer(records[::2])
    a, b = (full, lacking) if side == "client" else (lacking, full)
    answerer = responder(b, budget=1000)
    carried: list[tuple[bytes, ...]] = []

    def transport(message: bytes) -> bytes:
        reply = answerer.receive(message)
        carried.extend(s.records for m in (message, reply) for s in wire.decode(m).sections)
        return reply

    synchronize_with(Initiator(a, ["c"], salt=salts(), budget=1000, max_rounds=20), transport)
    assert a.set() == b.set() == FakePeer([*records, big]).set()
    assert (big,) in carried  # alone: the budget holds one record at least, never more beyond it
    assert all(sum(len(r) for r in rs) <= 1000 for rs in carried if big not in rs)
