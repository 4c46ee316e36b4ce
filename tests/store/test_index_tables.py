"""The `Store` contract for the turn index (docs/conversation.md §8), on every store: the rows
`commit` and `compact` keep, the reads a window makes, `reindex`, and the hidden set's marker."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import closing

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_contract import (  # noqa: F401  (fixtures)
    SERVER_EXAMPLES,
    SERVER_KINDS,
    STORE_EXAMPLES,
    StoreMaker,
    aborted,
    chain,
    commit,
    new_store,
)

from convgraph.core.record import Record
from convgraph.projections import state as state_
from convgraph.projections.index_rows import LineRow, rows_of
from convgraph.store.base import Store
from projections.window_world import BRANCHES, CONV, World, memory_reads, ops


@pytest.fixture
def store(new_store: StoreMaker) -> Iterator[Store]:  # noqa: F811
    with closing(new_store()) as s:
        yield s


def _history(script: list[tuple[object, ...]]) -> list[Record]:
    world = World.new(2)
    for op in script:
        world.run(op)
    return sorted(world.made, key=lambda r: r.order_key)  # a topological order: commit's precondition


def _commit_in_batches(store: Store, records: list[Record], rng: random.Random) -> None:
    i = 0
    while i < len(records):
        n = rng.randint(1, 4)
        commit(store, *records[i : i + n])
        i += n


def _index_answers_like_the_records(store: Store, records: list[Record], *, compacted: bool = False) -> None:
    assert sorted(store.index_rows(CONV), key=repr) == sorted(rows_of(records), key=repr)
    want = memory_reads(records, compacted=[r.cid for r in records] if compacted else ())
    cids = [r.cid for r in records]
    for line in ("", *BRANCHES):
        all_rows = want.line(line, None, 10_000)
        assert store.line(CONV, line, None, 10_000) == all_rows
        for row in all_rows[:3]:  # strictly before a position, last first, at most `limit`
            assert store.line(CONV, line, row.key, 2) == want.line(line, row.key, 2)
    assert store.get_many(cids) == want.data(cids)
    assert sorted(store.targets(CONV, cids), key=repr) == sorted(want.targets(cids), key=repr)
    for name in BRANCHES:
        assert store.branch_rows(CONV, name) == sorted(want.branches(name), key=lambda r: r.key)


@STORE_EXAMPLES
@given(script=ops(2), seed=st.integers(0, 2**16))
def test_commit_keeps_exactly_the_rows_of_what_it_stores(
    new_store: StoreMaker, script: list[tuple[object, ...]], seed: int  # noqa: F811
) -> None:
    if new_store.kind in SERVER_KINDS and seed % 3:  # a server store's examples cost far more
        return
    records = _history(script)
    with closing(new_store()) as store:
        _commit_in_batches(store, records, random.Random(seed))
        commit(store, *records)  # again: nothing changes
        _index_answers_like_the_records(store, records)


@SERVER_EXAMPLES
@given(script=ops(2))
def test_compact_keeps_the_rows_and_adds_those_of_the_snapshot(
    new_store: StoreMaker, script: list[tuple[object, ...]]  # noqa: F811
) -> None:
    records = _history(script)
    if not records:
        return
    snapshot = state_.snapshot(state_.fold(records))
    with closing(new_store()) as adopted:  # holds the records as headers only, then their snapshot
        commit(adopted, headers=[r.meta for r in records])
        assert adopted.index_rows(CONV) == []
        adopted.compact(CONV, (), records[-1].cid, snapshot)
        assert sorted(adopted.index_rows(CONV), key=repr) == sorted(rows_of(records), key=repr)
    with closing(new_store()) as compacted:
        commit(compacted, *records)
        compacted.compact(CONV, [r.cid for r in records], records[-1].cid, snapshot)
        _index_answers_like_the_records(compacted, records, compacted=True)  # the bytes went, not the rows


def test_a_commit_that_rolls_back_leaves_no_rows(store: Store) -> None:
    records = chain(3, CONV)
    aborted(store, lambda: commit(store, *records))
    assert store.index_rows(CONV) == [] and store.line(CONV, "", None, 10) == []
    commit(store, *records)
    assert [r.cid for r in store.line(CONV, "", None, 10)] == [r.cid for r in reversed(records)]


def test_a_snapshot_that_is_not_one_adds_no_rows(store: Store) -> None:
    records = chain(2, CONV)
    commit(store, *records)
    store.compact(CONV, [records[0].cid], records[1].cid, b"not a snapshot")
    assert sorted(store.index_rows(CONV), key=repr) == sorted(rows_of(records), key=repr)


def test_reindex_replaces_every_row_of_one_conversation(store: Store) -> None:
    mine, other = chain(3, CONV), chain(2, "other", key=1)
    commit(store, *mine, *other)
    store.reindex(CONV, [LineRow("", mine[0].order_key, "agent_message")])
    assert store.index_rows(CONV) == [LineRow("", mine[0].order_key, "agent_message")]
    assert sorted(store.index_rows("other"), key=repr) == sorted(rows_of(other), key=repr)
    aborted(store, lambda: store.reindex(CONV, rows_of(mine)))
    assert len(store.index_rows(CONV)) == 1
    store.reindex(CONV, rows_of(mine))
    assert sorted(store.index_rows(CONV), key=repr) == sorted(rows_of(mine), key=repr)


def test_the_hidden_set_is_current_until_a_record_of_its_conversation_arrives(store: Store) -> None:
    mine, other = chain(4, CONV), chain(2, "other", key=1)
    assert store.hidden(CONV) is None  # never set
    commit(store, *mine[:2])
    store.set_hidden(CONV, [mine[0].cid])
    assert store.hidden(CONV) == frozenset({mine[0].cid})
    commit(store, *other)  # another conversation's records change nothing
    assert store.hidden(CONV) == frozenset({mine[0].cid})
    commit(store, mine[2])
    assert store.hidden(CONV) is None
    with store.transaction():  # set in the transaction that stored the record: current
        commit(store, mine[3])
        store.set_hidden(CONV, [])
    assert store.hidden(CONV) == frozenset()
    aborted(store, lambda: store.set_hidden(CONV, [mine[1].cid]))
    assert store.hidden(CONV) == frozenset()
    commit(store, headers=[chain(5, CONV)[4].meta])
    assert store.hidden(CONV) is None  # a header-only record (adopted) counts too


def test_reading_sees_one_state(store: Store) -> None:
    records = chain(3, CONV)
    commit(store, *records[:2])
    with store.reading():
        first = store.line(CONV, "", None, 10)
        again = store.line(CONV, "", None, 10)
    assert first == again and len(first) == 2
    with store.transaction():  # inside a transaction it reads that transaction's own writes
        commit(store, records[2])
        with store.reading():
            assert len(store.line(CONV, "", None, 10)) == 3

