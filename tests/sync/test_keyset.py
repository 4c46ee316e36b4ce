"""Key sets: bounds separate exactly, fingerprints are sums, growing a set equals rebuilding it."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from convgraph.sync.keyset import INFINITY, MINUS_INFINITY, Key, KeySet, fingerprint, separating

keys = st.lists(st.tuples(st.integers(0, 50), st.binary(min_size=32, max_size=32)), max_size=60)


@given(keys, keys)
def test_adding_keys_equals_building_the_set_afresh(base: list[Key], extra: list[Key]) -> None:
    grown = KeySet.of(base).adding(extra)
    fresh = KeySet.of([*base, *extra])
    assert list(grown.keys) == list(fresh.keys) and grown.total() == fresh.total()
    n = len(fresh)
    assert all(grown.fingerprint(i, j) == fresh.fingerprint(i, j) for i in range(n + 1) for j in range(i, n + 1))


@given(keys)
def test_a_separating_bound_lies_between_its_two_keys(raw: list[Key]) -> None:
    ks = KeySet.of(raw)
    for below, above in zip(ks.keys, ks.keys[1:], strict=False):
        bound = separating(below, above)
        assert below < (bound.wall_ms, bound.prefix) <= above
        assert ks.index(bound) == ks.keys.index(above)
    assert ks.index(MINUS_INFINITY) == 0 and ks.index(INFINITY) == len(ks)


def test_a_fingerprint_is_the_hash_of_the_sum_and_count() -> None:
    digests = [hashlib.sha256(bytes([i])).digest() for i in range(5)]
    ks = KeySet.of((i, d) for i, d in enumerate(digests))
    total = sum(int.from_bytes(d, "little") for d in digests[1:4])
    assert ks.fingerprint(1, 4) == fingerprint(total, 3, 4)
    assert ks.fingerprint(1, 4) != ks.fingerprint(1, 3)


@given(keys, keys, keys)
def test_a_set_grown_in_place_never_changes_the_set_it_grew_from(base: list[Key], one: list[Key],
                                                                 two: list[Key]) -> None:
    start = KeySet.of(base)
    before = (list(start.keys), start.total())
    first = start.adding([(k[0] + 100, k[1]) for k in one], share=True)  # past the end: lists grow
    second = start.adding(two, share=True)  # a second child of the same set: copies
    assert (list(start.keys), start.total()) == before
    for grown, extra in ((first, [(k[0] + 100, k[1]) for k in one]), (second, two)):
        fresh = KeySet.of([*base, *extra])
        assert list(grown.keys) == list(fresh.keys) and grown.total() == fresh.total()
        n = len(fresh)
        assert all(grown.fingerprint(0, j) == fresh.fingerprint(0, j) for j in range(n + 1))
