"""One reconciliation step, piece by piece: how a range is asked about, how the tail is
probed, how pushes that did not fit are asked about again, and what a cover looks like.

tests/sync/test_protocol.py shows that sessions built from these pieces converge; these pin
the shape of each piece, which convergence alone would not notice (an extra round trip, a
list where a fingerprint belongs, a cover the peer's decoder refuses).
"""

from __future__ import annotations

import hashlib
import random

import pytest

from convgraph.sync import reconcile, wire
from convgraph.sync.keyset import INFINITY, MINUS_INFINITY, Bound, KeySet, item_hash, separating
from convgraph.sync.reconcile import BASE_SLACK, BRANCH, LIST_AT, PROBES, Outcome, Step
from convgraph.sync.wire import Base, Fate, Kind, Message, Mode, Range, Reported, Section, Want, WireLimits
from sync.fakes import FakePeer

SALT = b"s" * 8


def keyset(n: int, seed: int = 0, walls: int = 3) -> KeySet:
    rng = random.Random(seed)
    return KeySet.of((1000 + rng.randrange(walls), rng.randbytes(32)) for _ in range(n))


def consistent(step: Step, keys: KeySet) -> None:
    """Each part of the cover says the truth about our keys between its bounds."""
    lo = MINUS_INFINITY
    for lower, upper, r in step.cover:
        assert lower == lo and lower < upper
        i, j = keys.index(lower), keys.index(upper)
        if r.mode is Mode.FINGERPRINT:
            assert r.fp == keys.fingerprint(i, j)
        lo = upper


@pytest.mark.parametrize("n", [LIST_AT - 1, LIST_AT])
def test_a_range_with_few_keys_is_listed(n: int) -> None:
    keys = keyset(n)
    step = Step()
    reconcile.split(keys, MINUS_INFINITY, INFINITY, SALT, step)
    [(lo, hi, r)] = step.cover
    assert (lo, hi, r.mode, len(r.hashes)) == (MINUS_INFINITY, INFINITY, Mode.IDS, n)


@pytest.mark.parametrize(("n", "seed"), [(LIST_AT + 1, 1), (100, 2), (1000, 3), (1000, 4)])
def test_a_range_with_many_keys_splits_into_branch_even_fingerprinted_parts(n: int, seed: int) -> None:
    keys = keyset(n, seed)
    step = Step()
    reconcile.split(keys, MINUS_INFINITY, INFINITY, SALT, step)
    assert len(step.cover) == BRANCH and all(r.mode is Mode.FINGERPRINT for _, _, r in step.cover)
    sizes = [keys.index(hi) - keys.index(lo) for lo, hi, _ in step.cover]
    assert sum(sizes) == n and max(sizes) - min(sizes) <= 1
    consistent(step, keys)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 255, 256, 257, 5000])
def test_probes_fingerprint_every_prefix_that_leaves_out_a_whole_tail(n: int) -> None:
    keys = keyset(n, seed=n)
    probes = reconcile.probes(keys)
    sizes = sorted((s for s in PROBES if s < n), reverse=True)
    assert [keys.index(bound) for bound, _ in probes] == [n - s for s in sizes]
    for bound, fp in probes:
        pos = keys.index(bound)
        assert bound == separating(keys.keys[pos - 1], keys.keys[pos])
        assert fp == keys.fingerprint(0, pos)


def test_pushes_that_did_not_fit_are_asked_about_again_from_where_they_stopped() -> None:
    keys = keyset(300, seed=5)
    a, b = separating(keys.keys[99], keys.keys[100]), separating(keys.keys[199], keys.keys[200])
    step = Step(cover=[(MINUS_INFINITY, a, Range(a, Mode.FINGERPRINT, fp=keys.fingerprint(0, 100))),
                       (a, b, Range(b, Mode.SKIP)), (b, INFINITY, Range(INFINITY, Mode.SKIP))])
    reconcile.reopen(step, keys, a)  # stopped exactly where a listed range ends
    assert [(lo, hi, r.mode) for lo, hi, r in step.cover] == [
        (MINUS_INFINITY, a, Mode.FINGERPRINT), (a, b, Mode.FINGERPRINT), (b, INFINITY, Mode.FINGERPRINT)]
    consistent(step, keys)
    ranges = reconcile.cover(step)
    message = Message(Kind.CONTINUE, SALT, (Section("c", ranges=ranges),))
    assert wire.decode(wire.encode(message)) == message  # a cover the peer accepts
    skipped = Step(cover=[(MINUS_INFINITY, a, Range(a, Mode.SKIP)), (a, INFINITY, Range(INFINITY, Mode.SKIP))])
    reconcile.reopen(skipped, keys, a)  # stopped exactly where a settled range ends
    assert [(lo, hi, r.mode) for lo, hi, r in skipped.cover] == [
        (MINUS_INFINITY, a, Mode.SKIP), (a, INFINITY, Mode.FINGERPRINT)]


def test_pushes_that_did_not_fit_mid_range_split_it() -> None:
    keys = keyset(300, seed=6)
    start = separating(keys.keys[149], keys.keys[150])
    step = Step(cover=[(MINUS_INFINITY, INFINITY, Range(INFINITY, Mode.SKIP))])
    reconcile.reopen(step, keys, start)
    assert [(lo, hi, r.mode) for lo, hi, r in step.cover] == [
        (MINUS_INFINITY, start, Mode.SKIP), (start, INFINITY, Mode.FINGERPRINT)]
    consistent(step, keys)
    empty = Step()
    reconcile.reopen(empty, keys, MINUS_INFINITY)  # nothing reconciled yet: ask about it all
    assert [(lo, hi, r.mode) for lo, hi, r in empty.cover] == [(MINUS_INFINITY, INFINITY, Mode.FINGERPRINT)]


def test_a_cover_merges_skips_and_always_reaches_infinity() -> None:
    b1, b2 = Bound(10), Bound(20)
    fp = Range(b1, Mode.FINGERPRINT, fp=b"abcd")
    assert reconcile.cover(Step()) is None
    assert reconcile.cover(Step(cover=[(MINUS_INFINITY, b1, Range(b1, Mode.SKIP)),
                                       (b1, INFINITY, Range(INFINITY, Mode.SKIP))])) is None
    assert reconcile.cover(Step(cover=[(MINUS_INFINITY, b1, fp)])) == (fp, Range(INFINITY, Mode.SKIP))
    merged = reconcile.cover(Step(cover=[(MINUS_INFINITY, b1, fp), (b1, b2, Range(b2, Mode.SKIP)),
                                         (b2, INFINITY, Range(INFINITY, Mode.SKIP))]))
    assert merged == (fp, Range(INFINITY, Mode.SKIP))


def test_merging_outcomes_keeps_everything_both_say() -> None:
    first = Outcome([b"a"], 1, [(b"r", "size", "too big")], (Reported(Fate.ACCEPTED, b"a"),), [(1, b"a")])
    second = Outcome([b"b"], 2, [(None, "schema", "bad")], (Reported(Fate.QUARANTINED, b"q"),), [(2, b"b")])
    first.merge(second)
    assert first == Outcome(
        [b"a", b"b"], 3, [(b"r", "size", "too big"), (None, "schema", "bad")],
        (Reported(Fate.ACCEPTED, b"a"), Reported(Fate.QUARANTINED, b"q")), [(1, b"a"), (2, b"b")])


def test_an_answer_pushes_what_every_list_and_every_want_asks_for() -> None:
    keys = keyset(40, seed=7)
    h = [item_hash(SALT, d) for _, d in keys.keys]
    b = separating(keys.keys[19], keys.keys[20])
    section = Section("c", ranges=(Range(b, Mode.IDS, hashes=tuple(h[:18])), Range(INFINITY, Mode.SKIP)),
                      wants=(Want(b, INFINITY, (h[25],)), Want(b, INFINITY, (h[30], h[31]))))
    step = reconcile.answer(section, keys, SALT, set())
    assert step.pushes == [keys.keys[18], keys.keys[19], keys.keys[25], keys.keys[30], keys.keys[31]]


def test_what_came_with_the_message_is_not_wanted_again() -> None:
    records = [b"a record", b"another"]
    adopted = [(1000, hashlib.sha256(b"a compacted record").digest())]
    digests = [hashlib.sha256(r).digest() for r in records] + [adopted[0][1]]
    received = reconcile.received_hashes(SALT, records, adopted)
    assert received == {item_hash(SALT, d) for d in digests}  # the records and what the base added
    listed = Section("c", ranges=(Range(INFINITY, Mode.IDS, hashes=tuple(sorted(received))),))
    assert reconcile.answer(listed, KeySet.of([]), SALT, received).wants == []
    assert reconcile.answer(listed, KeySet.of([]), SALT, set()).wants == [
        Want(MINUS_INFINITY, INFINITY, tuple(sorted(received)))]


def test_a_base_travels_when_a_message_holds_it_with_the_slack_to_spare() -> None:
    limits = WireLimits(max_message=BASE_SLACK + 100)
    peer = FakePeer()
    assert reconcile.base_for(peer, "c", limits) is None  # never compacted
    for size, travels in [(99, True), (100, True), (101, False)]:
        peer._base = Base(b"k" * 40, b"s" * 30, b"c" * (size - 70))
        assert (reconcile.base_for(peer, "c", limits) is not None) is travels, size
