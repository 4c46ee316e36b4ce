"""A replica's writers wait only for writers of their own conversation on PostgreSQL (issue 31 §1).

A local write, a genesis and an ingest name their conversation to the store, which locks that
conversation's row and nothing store-wide. Two replicas over one schema meet at a barrier
inside their transactions: a writer that waited on the other would leave it broken. Who
waited on whom is asserted, never a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

import pg
from convgraph import Replica
from convgraph.core.keys import SigningKey
from convgraph.store.memory import MemoryStore
from convgraph.store.postgres import PostgresStore


@pytest.fixture
def pair(pg_dsn: str) -> Iterator[tuple[Replica, Replica]]:
    schema = pg.fresh_schema(pg_dsn)
    stores = [PostgresStore(pg_dsn, schema=schema, pool_size=4) for _ in range(2)]
    yield Replica(stores[0], SigningKey.generate()), Replica(stores[1], SigningKey.generate())
    for store in stores:
        store.close()


def _meet(steps: list[Callable[[threading.Barrier], None]]) -> list[BaseException]:
    inside = threading.Barrier(len(steps), timeout=20)
    failed: list[BaseException] = []

    def run(step: Callable[[threading.Barrier], None]) -> None:
        try:
            step(inside)
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=run, args=(step,)) for step in steps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return failed + ([threading.BrokenBarrierError()] if inside.broken else [])


def test_local_writes_in_two_conversations_hold_no_common_lock(pair: tuple[Replica, Replica]) -> None:
    a, b = pair

    def writer(replica: Replica, conv: str) -> Callable[[threading.Barrier], None]:
        def step(inside: threading.Barrier) -> None:
            with replica.transaction(conv):
                replica.write(conv, "user_message", {"content": conv})
                inside.wait()  # the other's write must go on while this one is open
                replica.write(conv, "user_message", {"content": "ok"})
        return step

    assert _meet([writer(a, "c1"), writer(b, "c2")]) == []
    assert a.store.count("c1") == b.store.count("c2") == 2


def test_an_ingest_and_a_write_in_other_conversations_hold_no_common_lock(pair: tuple[Replica, Replica]) -> None:
    a, b = pair
    elsewhere = Replica(MemoryStore(), SigningKey.generate())  # what a peer pushes into c1
    pushed = [elsewhere.write("c1", "user_message", {"content": "hi"}).data]
    landed = threading.Event()

    def ingest(inside: threading.Barrier) -> None:
        # the ingest's own transaction holds c1's row while it waits inside it
        with b.transaction("c1"):
            report = b.ingest(pushed, conversations={"c1"})
            assert len(report.accepted) == 1
            inside.wait()
        landed.set()

    def write(inside: threading.Barrier) -> None:
        a.write("c2", "user_message", {"content": "elsewhere"})  # no transaction around it
        inside.wait()

    assert _meet([ingest, write]) == []
    assert landed.is_set() and a.store.count("c1") == 1 and a.store.count("c2") == 1


def test_two_writers_of_one_conversation_still_serialise(pair: tuple[Replica, Replica]) -> None:
    a, b = pair
    a.write("c1", "user_message", {"content": "first"})
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with a.transaction("c1"):
            a.write("c1", "user_message", {"content": "second"})
            holding.set()
            assert not done.wait(1.0)  # the other writer of c1 must still be waiting
        # released: the other goes on

    t = threading.Thread(target=hold)
    t.start()
    assert holding.wait(20)
    writer = threading.Thread(target=lambda: (b.write("c1", "user_message", {"content": "third"}),
                                              done.set()))
    writer.start()
    t.join(30)
    writer.join(30)
    assert done.is_set() and a.store.count("c1") == 3
