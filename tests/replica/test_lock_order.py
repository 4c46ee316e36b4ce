"""Writers take conversation locks in order on PostgreSQL, even when a release lands elsewhere.

An ingest into one conversation also releases every quarantined record whose time came, in
any conversation: its commit then needs that other conversation's lock too, after it took its
own. Taken out of order, that wait could close a cycle with a writer that holds the other
conversation and wants this one (PostgreSQL would abort one of them). The ingest instead takes
the late lock only if it is free at once, and else starts again holding both in order. A
second connection stands for the other writer; who waits on whom is read from
`pg_blocking_pids`, never from a clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

import pg
from convgraph import Config, Replica
from convgraph.core.keys import SigningKey
from convgraph.replica.ingest import IngestReport
from convgraph.store.postgres import PostgresStore

HOUR_MS = 3_600_000
WAIT_S = 30.0  # a deadline for a state that never comes, not a measure of anything


@pytest.fixture
def store(pg_dsn: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_dsn, schema=pg.fresh_schema(pg_dsn), pool_size=4)
    yield store
    store.close()


def test_a_release_into_a_conversation_that_sorts_first_never_deadlocks(store: PostgresStore, pg_dsn: str) -> None:
    now = [int(time.time() * 1000)]
    author = Replica.in_memory(SigningKey.generate(), clock=lambda: now[0], config=Config(legacy_writes=True))
    server = Replica(store, SigningKey.generate(), clock=lambda: now[0])
    early, late = "aa-released", "zz-pushed"  # the release lands in the conversation sorted first
    first = [author.say(conv, "user", "first").data for conv in (early, late)]
    now[0] += 10 * HOUR_MS  # the author's clock is far ahead: its next record waits for its time
    ahead = author.say(early, "user", "from the future")
    now[0] -= 10 * HOUR_MS
    got = server.ingest([*first, ahead.data])
    assert [*got.quarantined, *got.held] == [ahead.cid]  # held for its time
    now[0] += 10 * HOUR_MS + 1000  # its time has come: the next ingest, of any conversation, releases it
    pushed = author.say(late, "user", "pushed")

    with psycopg.connect(pg_dsn, autocommit=True) as other:
        other.execute("BEGIN")
        other.execute(f'SELECT 1 FROM "{store.schema}".convs WHERE conv = %s FOR UPDATE', [early])
        me = other.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        reports: list[IngestReport] = []
        failed: list[BaseException] = []

        def ingest() -> None:
            try:
                reports.append(server.ingest([pushed.data]))
            except BaseException as exc:
                failed.append(exc)

        pusher = threading.Thread(target=ingest, daemon=True)
        pusher.start()
        deadline = time.monotonic() + WAIT_S
        with psycopg.connect(pg_dsn, autocommit=True) as watch:  # the ingest waits on `other`
            while not watch.execute("SELECT 1 FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                                    [me]).fetchall():
                assert time.monotonic() < deadline and pusher.is_alive(), failed
                time.sleep(0.01)
        # the other writer, holding the early conversation, now wants the late one: free, since
        # the ingest waits for the early lock holding nothing (a deadlock if it held the late one)
        other.execute("SET lock_timeout = '20s'")
        other.execute(f'SELECT 1 FROM "{store.schema}".convs WHERE conv = %s FOR UPDATE', [late])
        other.execute("COMMIT")
        pusher.join(WAIT_S)
    assert not failed, failed
    assert reports and pushed.cid in reports[0].accepted and ahead.cid in reports[0].released
    assert store.count(early) == 2 and store.count(late) == 2


def test_an_ingest_locks_its_conversation_row_once(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    author = Replica.in_memory(SigningKey.generate(), config=Config(legacy_writes=True))
    records = [author.say("c", "user", f"turn {i}").data for i in range(3)]
    server = Replica(store, SigningKey.generate())
    locks: list[str] = []
    run = store._x

    def counting(text: str, *args: object) -> object:
        if "FOR UPDATE" in text or "ON CONFLICT (conv) DO UPDATE" in text:  # a lock, or the upsert hold
            locks.append(str(args[0]))
        return run(text, *args)

    monkeypatch.setattr(store, "_x", counting)
    assert len(server.ingest(records).accepted) == 3
    assert locks == ["c"]  # the transaction locked it; the commit inside only reads the row
