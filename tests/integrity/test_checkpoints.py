"""Checkpoints (docs/integrity.md §7): chaining, the three checks, divergent forks, the witness rule;
property tests over random DAGs."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convgraph import ManualClock, Replica, SigningKey
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.errors import IntegrityError
from convgraph.integrity import checkpoints as cps
from convgraph.integrity.consistency import Lookup, Verdict
from convgraph.projections import state as state_

CONV = "c"
EMPTY_SNAPSHOT = state_.snapshot_cid(state_.snapshot(state_.ConvState()))  # the World's records have no bytes


def lookup_of(*replicas: Replica) -> Lookup:
    def lookup(cid: CID) -> tuple[Hlc, tuple[CID, ...]] | None:
        for r in replicas:
            meta = r.store.metas([cid]).get(cid)
            if meta is not None:
                return meta.hlc, meta.parents
        return None

    return lookup


def fetch_of(r: Replica) -> cps.Fetch:
    return r.store.get


def chat(r: Replica, n: int, conv: str = CONV) -> None:
    for i in range(n):
        r.write(conv, "user_message", {"content": f"{r.actor.hex()[:4]} {i}"})


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def alice(clock: ManualClock) -> Replica:
    return Replica.in_memory(SigningKey(b"\x01" * 32), clock=clock)


@pytest.fixture
def bob(clock: ManualClock) -> Replica:
    return Replica.in_memory(SigningKey(b"\x02" * 32), clock=clock)


def sync(a: Replica, b: Replica) -> None:
    b.ingest([r.data for r in a.records(CONV)])
    a.ingest([r.data for r in b.records(CONV)])


# ---- §7.1 chaining: Replica.checkpoint sets previous ----

def test_checkpoint_names_its_authors_previous_checkpoint(alice: Replica, bob: Replica) -> None:
    chat(alice, 2)
    first = alice.checkpoint(CONV)
    assert "previous" not in first.payload
    sync(alice, bob)
    theirs = bob.checkpoint(CONV)  # another author's checkpoint is never a `previous`
    assert "previous" not in theirs.payload
    sync(alice, bob)
    chat(alice, 1)
    second = alice.checkpoint(CONV)
    assert second.payload["previous"] == first.cid
    third = alice.checkpoint(CONV)
    assert third.payload["previous"] == second.cid
    assert bob.checkpoint(CONV).payload["previous"] == theirs.cid
    chain = [cps.Checkpoint.of(r) for r in (first, second, third)]
    look = lookup_of(alice)
    assert all(cps.extends(b, a, look) is Verdict.YES for a, b in itertools.pairwise(chain))
    assert cps.extends(chain[0], chain[2], look) is Verdict.NO


def test_previous_survives_compaction(alice: Replica) -> None:
    chat(alice, 3)
    first = alice.checkpoint(CONV, compact=True)
    chat(alice, 1)
    second = alice.checkpoint(CONV)
    assert second.payload["previous"] == first.cid


def test_previous_is_per_conversation(alice: Replica) -> None:
    chat(alice, 1)
    chat(alice, 1, conv="other")
    alice.checkpoint("other")
    assert "previous" not in alice.checkpoint(CONV).payload


# ---- §7.2 checking ----

def test_an_honest_checkpoint_is_verified_and_each_tampered_claim_is_false(alice: Replica, bob: Replica) -> None:
    chat(alice, 2)
    sync(alice, bob)
    chat(bob, 2)
    chat(alice, 1)  # alice and bob now have concurrent heads
    sync(alice, bob)
    cp = cps.Checkpoint.of(alice.checkpoint(CONV))
    assert len(cp.heads) == 2 and cp.count == 5
    look, fetch = lookup_of(alice), fetch_of(alice)
    assert cps.check(cp, look, fetch) == cps.CheckResult(cps.Status.VERIFIED)
    assert cps.check(dataclasses.replace(cp, count=6), look, fetch).check == "count"
    assert cps.check(dataclasses.replace(cp, count=4), look, fetch).check == "count"
    assert cps.check(dataclasses.replace(cp, heads=cp.heads[:1]), look, fetch).check == "count"
    parent = look(cp.heads[0])
    assert parent is not None
    with_inner = tuple(sorted({*cp.heads, parent[1][0]}))
    res = cps.check(dataclasses.replace(cp, heads=with_inner), look, fetch)
    assert (res.status, res.check) == (cps.Status.FALSE, "heads")
    res = cps.check(dataclasses.replace(cp, snapshot=CID.of_record(b"another snapshot")), look, fetch)
    assert (res.status, res.check) == (cps.Status.FALSE, "snapshot")


def test_headers_only_is_partly_verified_and_missing_records_unverified(alice: Replica, clock: ManualClock) -> None:
    chat(alice, 3)
    alice.checkpoint(CONV, compact=True)
    chat(alice, 1)
    cp = cps.Checkpoint.of(alice.checkpoint(CONV))
    res = cps.check(cp, lookup_of(alice), fetch_of(alice))
    assert res.status is cps.Status.PARTLY_VERIFIED
    # a tampered count is false even when only headers are held
    assert cps.check(dataclasses.replace(cp, count=cp.count + 1), lookup_of(alice), fetch_of(alice)).check == "count"
    stranger = Replica.in_memory(clock=clock)
    res = cps.check(cp, lookup_of(stranger), fetch_of(stranger))
    assert res.status is cps.Status.UNVERIFIED and res.missing == frozenset(cp.heads)


def test_checkpoint_of_a_record_that_is_not_one(alice: Replica) -> None:
    chat(alice, 1)
    with pytest.raises(IntegrityError):
        cps.Checkpoint.of(alice.records(CONV)[0])


# ---- §7.3 divergent forks ----

def test_one_author_on_two_devices_forks(clock: ManualClock) -> None:
    key = SigningKey(b"\x03" * 32)
    d1, d2 = Replica.in_memory(key, clock=clock), Replica.in_memory(key, clock=clock)
    chat(d1, 1)
    d2.ingest([r.data for r in d1.records(CONV)])
    base = cps.Checkpoint.of(d1.checkpoint(CONV))
    d2.ingest([r.data for r in d1.records(CONV)])
    d1.write(CONV, "user_message", {"content": "left"})
    d2.write(CONV, "user_message", {"content": "right"})
    a, b = cps.Checkpoint.of(d1.checkpoint(CONV)), cps.Checkpoint.of(d2.checkpoint(CONV))
    assert a.actor == b.actor and a.previous == b.previous == base.cid
    both = lookup_of(d1, d2)
    assert cps.divergent(a, b, both) is Verdict.YES
    assert cps.divergent(a, base, both) is Verdict.NO
    assert cps.divergent(a, a, both) is Verdict.NO
    # d1 alone cannot decide whether b covers a's head: b's past is not held
    assert cps.divergent(a, b, lookup_of(d1)) is Verdict.UNDECIDED
    assert cps.divergent(a, dataclasses.replace(b, conv="x"), both) is Verdict.NO


# ---- §7.4 the witness rule ----

def test_witness_decisions_in_order(alice: Replica, bob: Replica, clock: ManualClock) -> None:
    witness = Replica.in_memory(SigningKey(b"\x09" * 32), clock=clock)
    look, fetch = lookup_of(witness), fetch_of(witness)
    chat(alice, 2)
    c1 = cps.Checkpoint.of(alice.checkpoint(CONV))
    assert cps.decide_cosign(None, None, look, fetch).refusal is cps.Refusal.UNKNOWN_CHECKPOINT
    assert cps.decide_cosign(c1, None, look, fetch).refusal is cps.Refusal.UNVERIFIED
    sync(alice, witness)
    assert cps.decide_cosign(dataclasses.replace(c1, count=9), None, look, fetch).refusal is (
        cps.Refusal.FALSE_CHECKPOINT)
    first = cps.decide_cosign(c1, None, look, fetch)
    assert first.cosign and first.refusal is None
    assert cps.decide_cosign(c1, c1, look, fetch).cosign  # the same one again
    # bob forks from alice's first record and checkpoints his side
    bob.ingest([alice.records(CONV)[0].data])
    chat(bob, 1)
    fork = cps.Checkpoint.of(bob.checkpoint(CONV))
    witness.ingest([r.data for r in bob.records(CONV)])
    d = cps.decide_cosign(fork, c1, look, fetch)
    assert d.refusal is cps.Refusal.NOT_EXTENDING and str(c1.cid) in d.detail
    # once alice merges bob's side, her next checkpoint extends both
    sync(alice, witness)
    c2 = cps.Checkpoint.of(alice.checkpoint(CONV))
    sync(alice, witness)
    assert cps.decide_cosign(c2, c1, look, fetch).cosign
    assert cps.decide_cosign(c1, c2, look, fetch).refusal is cps.Refusal.NOT_EXTENDING
    with pytest.raises(IntegrityError):
        cps.decide_cosign(c2, dataclasses.replace(c1, conv="x"), look, fetch)


# ---- properties over random DAGs ----

@st.composite
def dags(draw: st.DrawFn) -> list[tuple[int, ...]]:
    n = draw(st.integers(1, 24))
    return [tuple(sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=3))))) if i else ()
            for i in range(n)]


class World:
    """A DAG of fake records (index order is hlc order) and honest checkpoints of its down-sets."""

    def __init__(self, parents: list[tuple[int, ...]]) -> None:
        self.parents = parents
        self.cids = [CID.of_record(b"record %d" % i) for i in range(len(parents))]
        self.index = {c: i for i, c in enumerate(self.cids)}
        self.made = 0

    def lookup(self, cid: CID) -> tuple[Hlc, tuple[CID, ...]] | None:
        i = self.index.get(cid)
        return None if i is None else (Hlc(1000 + i, 0), tuple(self.cids[p] for p in self.parents[i]))

    def closure(self, seeds: set[int]) -> set[int]:
        out, stack = set(), list(seeds)
        while stack:
            i = stack.pop()
            if i not in out:
                out.add(i)
                stack.extend(self.parents[i])
        return out

    def checkpoint(self, members: set[int]) -> cps.Checkpoint:
        named = {p for i in members for p in self.parents[i]}
        heads = tuple(sorted(self.cids[i] for i in members - named))
        self.made += 1
        return cps.Checkpoint(CID.of_record(b"cp %d" % self.made), CONV, bytes(32), Hlc(5000 + self.made, 0),
                              heads, len(members), EMPTY_SNAPSHOT, None)


def _none(cid: CID) -> bytes | None:
    return None


def test_witness_refuses_when_extension_is_undecided() -> None:
    w = World([(), (0,), (0,)])
    candidate = w.checkpoint({0, 1, 2})
    last = dataclasses.replace(w.checkpoint({0, 1}), heads=(CID.of_record(b"not held"),))
    d = cps.decide_cosign(candidate, last, w.lookup, _none)
    assert d.refusal is cps.Refusal.UNVERIFIED and "undecided" in d.detail
    assert cps.decide_cosign(candidate, w.checkpoint({0, 1}), w.lookup, _none).cosign


@given(dags(), st.data())
def test_honest_checkpoint_chains_always_extend(parents: list[tuple[int, ...]], data: st.DataObject) -> None:
    w = World(parents)
    members: set[int] = set()
    chain = []
    for _ in range(data.draw(st.integers(1, 5))):
        members = w.closure(members | set(data.draw(st.lists(st.integers(0, len(parents) - 1), max_size=4))))
        chain.append(w.checkpoint(members))
    for cp in chain:
        assert cps.check(cp, w.lookup, _none).status is (
            cps.Status.PARTLY_VERIFIED if cp.count else cps.Status.VERIFIED)
    for i, later in enumerate(chain):
        for earlier in chain[:i]:
            assert cps.extends(later, earlier, w.lookup) is Verdict.YES
            assert cps.divergent(later, earlier, w.lookup) is Verdict.NO


@given(dags(), st.data())
def test_tampered_count_or_omitted_head_is_always_false(parents: list[tuple[int, ...]], data: st.DataObject) -> None:
    w = World(parents)
    members = w.closure(set(data.draw(st.lists(st.integers(0, len(parents) - 1), min_size=1, max_size=4))))
    cp = w.checkpoint(members)
    delta = data.draw(st.integers(-cp.count, 5).filter(lambda d: d != 0))
    res = cps.check(dataclasses.replace(cp, count=cp.count + delta), w.lookup, _none)
    assert (res.status, res.check) == (cps.Status.FALSE, "count")
    drop = data.draw(st.integers(0, len(cp.heads) - 1))
    res = cps.check(dataclasses.replace(cp, heads=cp.heads[:drop] + cp.heads[drop + 1:]), w.lookup, _none)
    assert res.status is cps.Status.FALSE


@given(dags(), st.data())
def test_a_witness_following_the_rule_never_cosigns_a_fork(parents: list[tuple[int, ...]], data: st.DataObject) -> None:
    w = World(parents)
    last: cps.Checkpoint | None = None
    cosigned: list[cps.Checkpoint] = []
    for _ in range(data.draw(st.integers(1, 8))):
        members = w.closure(set(data.draw(st.lists(st.integers(0, len(parents) - 1), max_size=4))))
        candidate = w.checkpoint(members)
        if data.draw(st.booleans()):  # sometimes a lie about the count
            candidate = dataclasses.replace(candidate, count=candidate.count + data.draw(st.integers(1, 3)))
        if data.draw(st.booleans()) and cosigned:  # sometimes an old one again
            candidate = data.draw(st.sampled_from(cosigned))
        if cps.decide_cosign(candidate, last, w.lookup, _none).cosign:
            last = candidate
            cosigned.append(candidate)
    for i, a in enumerate(cosigned):
        for b in cosigned[:i]:
            assert cps.divergent(a, b, w.lookup) is Verdict.NO


# ---- found by mutation testing: the words of each result, the claim's fields ----

def test_a_checkpoints_claim_keeps_its_records_conversation_and_stamp(alice: Replica) -> None:
    chat(alice, 1)
    record = alice.checkpoint(CONV)
    cp = cps.Checkpoint.of(record)
    assert (cp.cid, cp.conv, cp.actor, cp.hlc) == (record.cid, record.conv, record.actor, record.hlc)
    other = alice.records(CONV)[0]
    with pytest.raises(IntegrityError) as caught:
        cps.Checkpoint.of(other)
    assert caught.value.message == "a user_message record is not a checkpoint"
    assert caught.value.cid == str(other.cid)


def test_a_smaller_count_never_extends_even_when_the_heads_are_covered(alice: Replica) -> None:
    chat(alice, 2)
    cp = cps.Checkpoint.of(alice.checkpoint(CONV))
    shrunk = dataclasses.replace(cp, count=cp.count - 1)
    assert cps.extends(shrunk, cp, lookup_of(alice)) is Verdict.NO
    assert cps.extends(cp, shrunk, lookup_of(alice)) is Verdict.YES


def test_each_check_result_says_what_failed(alice: Replica, bob: Replica) -> None:
    chat(alice, 2)
    sync(alice, bob)
    chat(bob, 2)
    chat(alice, 1)
    sync(alice, bob)
    cp = cps.Checkpoint.of(alice.checkpoint(CONV))
    look, fetch = lookup_of(alice), fetch_of(alice)
    assert cps.check(dataclasses.replace(cp, count=6), look, fetch).detail == "its heads cover 5 records, it claims 6"
    parent = look(cp.heads[0])
    assert parent is not None
    inner = parent[1][0]
    res = cps.check(dataclasses.replace(cp, heads=tuple(sorted({*cp.heads, inner}))), look, fetch)
    assert res.detail == f"head {inner} is an ancestor of another head"
    res = cps.check(dataclasses.replace(cp, snapshot=CID.of_record(b"another snapshot")), look, fetch)
    assert res.detail == f"the fold of its records is snapshot {cp.snapshot}"


def test_partly_verified_and_unverified_say_which_records_lack(alice: Replica, clock: ManualClock) -> None:
    chat(alice, 3)
    alice.checkpoint(CONV, compact=True)
    chat(alice, 1)
    cp = cps.Checkpoint.of(alice.checkpoint(CONV))
    look, fetch = lookup_of(alice), fetch_of(alice)
    first = min(c for c in cps.causal_past(cp.heads, look).held if fetch(c) is None)
    assert cps.check(cp, look, fetch).detail == f"record {first} is held as a header only"
    stranger = Replica.in_memory(clock=clock)
    res = cps.check(cp, lookup_of(stranger), fetch_of(stranger))
    assert res.detail == f"{len(cp.heads)} records of its causal past are not held"


def test_each_refusal_of_the_witness_says_why(alice: Replica, clock: ManualClock) -> None:
    witness = Replica.in_memory(SigningKey(b"\x09" * 32), clock=clock)
    look, fetch = lookup_of(witness), fetch_of(witness)
    chat(alice, 2)
    c1 = cps.Checkpoint.of(alice.checkpoint(CONV))
    assert cps.decide_cosign(None, None, look, fetch).detail == "the witness does not hold the checkpoint"
    unheld = cps.check(c1, look, fetch).detail
    assert unheld
    assert cps.decide_cosign(c1, None, look, fetch).detail == unheld + ": sync the records first"
    sync(alice, witness)
    d = cps.decide_cosign(dataclasses.replace(c1, count=9), None, look, fetch)
    assert d.detail == f"check count fails: its heads cover {c1.count} records, it claims 9"
    elsewhere = dataclasses.replace(c1, conv="x")
    with pytest.raises(IntegrityError) as caught:
        cps.decide_cosign(c1, elsewhere, look, fetch)
    assert caught.value.message == "the last cosigned checkpoint is of another conversation"
    assert caught.value.cid == str(c1.cid)
