"""PostgreSQL writers wait only for writers of their own conversations (issue 31 §1, §3).

A writer naming its conversation locks that conversation's `convs` row; the test shows, with
a barrier both writers reach inside their transactions, that two conversations commit
concurrently, and with `pg_stat_activity`, that a second writer of one conversation waits for
the first and goes on when it commits. No timing is asserted: who waited on whom is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from test_contract import chain, commit

import pg
from convgraph.store.postgres import PostgresStore


@pytest.fixture
def store(pg_dsn: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(pg_dsn, schema=pg.fresh_schema(pg_dsn), pool_size=4)
    yield opened
    opened.close()


def test_writers_of_two_conversations_commit_concurrently(store: PostgresStore) -> None:
    inside = threading.Barrier(2, timeout=20)  # both must be inside their transactions at once
    failed: list[BaseException] = []

    def write(conv: str) -> None:
        try:
            with store.transaction(conv):
                commit(store, *chain(3, conv))
                inside.wait()  # a writer waiting on the other would leave this barrier broken
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=write, args=(conv,)) for conv in ("c1", "c2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert failed == [] and not inside.broken
    assert store.count("c1") == store.count("c2") == 3
    assert store.cursor("c1") == store.cursor("c2") == 3


def test_plain_commits_to_two_conversations_hold_no_common_lock(store: PostgresStore, pg_dsn: str) -> None:
    """A commit names its conversations itself: held open, it blocks no commit of another."""
    holding, release = threading.Event(), threading.Event()
    run = store._batch

    def held(batches: object) -> None:
        run(batches)  # type: ignore[arg-type]
        if threading.current_thread().name == "first":
            holding.set()
            release.wait(20)

    store._batch = held  # type: ignore[method-assign]
    first = threading.Thread(target=lambda: commit(store, *chain(2, "c1")), name="first")
    first.start()
    assert holding.wait(20)
    try:
        commit(store, *chain(2, "c2"))  # would wait for `first` if any lock were common
        assert store.count("c2") == 2
    finally:
        release.set()
        first.join(20)
    assert store.count("c1") == 2


def test_writers_of_one_conversation_serialise(store: PostgresStore, pg_dsn: str) -> None:
    holding, release, done = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with store.transaction("c1"):
            commit(store, *chain(2, "c1"))
            holding.set()
            release.wait(20)

    def second() -> None:
        with store.transaction("c1"):
            done.set()

    a = threading.Thread(target=first)
    a.start()
    assert holding.wait(20)
    b = threading.Thread(target=second)
    b.start()
    with psycopg.connect(pg_dsn, autocommit=True) as probe:
        waiting = 0
        for _ in range(2000):  # until the second writer is seen waiting for a lock (or 20 s)
            waiting = probe.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
                [f"convgraph/{store.schema}"]).fetchone()[0]
            if waiting:
                break
            threading.Event().wait(0.01)
    assert waiting == 1 and not done.is_set()  # the second writer waits on the first's row lock
    release.set()
    a.join(20)
    b.join(20)
    assert done.is_set()
