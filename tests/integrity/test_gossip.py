"""Split views (docs/integrity.md §5) on values: which pairs are inconsistent, which wait for
records, and what a replica gossips on."""

from __future__ import annotations

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.integrity.gossip import MAX_GOSSIP, check_pairs, retry, select
from convgraph.integrity.remembered import Claim, Undecided
from convgraph.integrity.statement import Statement, sign_statement

KEYS = [SigningKey(bytes(range(i, i + 32))) for i in range(20)]
T = 1_700_000_000_000
A, B, C = (CID.of_record(n) for n in (b"a", b"b", b"c"))  # a <- b, and c a fork off a
HELD = {A: (Hlc(1, 0), ()), B: (Hlc(2, 0), (A,)), C: (Hlc(2, 0), (A,))}


def lookup(cid: CID) -> tuple[Hlc, tuple[CID, ...]] | None:
    return HELD.get(cid)


def st(head: CID, count: int, time: int, key: int = 0, conv: str = "c1") -> Statement:
    return sign_statement(KEYS[key], conv, count, [head], time)


def test_a_split_view_is_a_claim_earlier_first() -> None:
    on_b, on_c = st(B, 2, T + 5), st(C, 2, T)
    claims, undecided = check_pairs([on_b], [on_c], lookup)
    assert claims == [Claim("server_equivocation", on_c, on_b)] and undecided == []


def test_consistent_pairs_other_keys_and_other_conversations_are_no_claim() -> None:
    on_a, on_b = st(A, 1, T), st(B, 2, T + 5)
    assert check_pairs([on_b], [on_a, on_b, st(C, 2, T, key=1), st(C, 2, T, conv="c2")], lookup) == ([], [])


def test_fresh_statements_are_checked_against_each_other_once() -> None:
    on_b, on_c = st(B, 2, T + 5), st(C, 2, T)
    claims, _ = check_pairs([on_b, on_c], [on_b, on_c], lookup)
    assert claims == [Claim("server_equivocation", on_c, on_b)]


def test_an_unknown_record_keeps_the_pair_until_it_is_held() -> None:
    ghost = CID.of_record(b"ghost")
    on_b, on_ghost = st(B, 2, T), st(ghost, 2, T + 5)
    claims, undecided = check_pairs([on_ghost], [on_b], lookup)
    assert claims == [] and undecided == [Undecided("server_equivocation", (on_b, on_ghost))]
    assert retry(undecided, lookup) == ([], undecided)
    HELD[ghost] = (Hlc(3, 0), (A,))
    try:
        assert retry(undecided, lookup) == ([Claim("server_equivocation", on_b, on_ghost)], [])
        HELD[ghost] = (Hlc(3, 0), (B,))  # had it descended from b, the pair is settled
        assert retry(undecided, lookup) == ([], [])
    finally:
        del HELD[ghost]


def test_select_gossips_each_keys_latest_newest_first_within_the_bound() -> None:
    older, newer = st(A, 1, T, key=0), st(B, 2, T + 9, key=0)
    others = [st(A, 1, T + i, key=i) for i in range(1, MAX_GOSSIP + 3)]
    chosen = select([older, newer, *others, st(B, 2, T + 99, key=1, conv="c2")], "c1", exclude={KEYS[5].public})
    assert len(chosen) == MAX_GOSSIP and KEYS[5].public not in {s.key for s in chosen}
    assert [s.time_ms for s in chosen] == sorted((s.time_ms for s in chosen), reverse=True)
    everyone = select([older, newer, *others[:3]], "c1", exclude=())
    assert everyone == [newer, *reversed(others[:3])]  # key 0 once, by its latest
    assert select([older, newer], "c1", exclude=()) == [newer]
    assert select([older], "c2", exclude=()) == []
