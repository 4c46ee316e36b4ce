"""The grouped nonce log: concurrent requests share a commit, every nonce answered yes is
durable (a replay is refused after a restart), and one nonce gets one yes, in a batch or not."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import psycopg
import pytest

import pg
from convgraph.errors import ConvgraphError
from convgraph.server.nonces import BatchNonceLog, GroupedNonces, SqliteBatchNonces, Use, grouped
from convgraph.server.pg_nonces import PostgresNonces
from convgraph.store.sqlite import SqliteStore
from convgraph.sync.auth import MemoryNonces

NOW = 1_700_000_000_000
ACTORS = [bytes([i]) * 32 for i in range(4)]


class _Held:
    """A batch log whose first batch waits at a barrier: who was queued behind it is known."""

    def __init__(self, log: BatchNonceLog) -> None:
        self.log, self.entered, self.release = log, threading.Event(), threading.Event()
        self.sizes: list[int] = []

    def first_use_many(self, uses: Sequence[Use]) -> list[bool | ConvgraphError]:
        if not self.sizes:
            self.sizes.append(len(uses))
            self.entered.set()
            assert self.release.wait(30)
            return self.log.first_use_many(uses)
        self.sizes.append(len(uses))
        return self.log.first_use_many(uses)


Open = Callable[[], BatchNonceLog]


@pytest.fixture(params=["sqlite", "postgres"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
    """Opens the same durable log again each call, as a restarted server would."""
    opened: list[object] = []
    if request.param == "sqlite":
        def make() -> BatchNonceLog:
            store = SqliteStore(tmp_path / "replica.sqlite")
            opened.append(store)
            return SqliteBatchNonces(store)
    else:
        dsn = pg.dsn()
        schema = pg.fresh_schema(dsn)

        def make() -> BatchNonceLog:
            log = PostgresNonces(dsn, schema)
            opened.append(log)
            return log
    yield make
    for thing in opened:
        thing.close()  # type: ignore[attr-defined]


def test_requests_queued_behind_a_write_share_the_next_commit_and_stay_refused_after_a_restart(
    reopen: Open,
) -> None:
    held = _Held(reopen())
    log = GroupedNonces(held)
    uses = [(ACTORS[i % 4], f"nonce-{i:04d}-padding", NOW + 60_000, NOW) for i in range(40)]
    uses += uses[:5]  # five replays, racing their first use
    answers: dict[int, bool] = {}

    def ask(i: int) -> None:
        answers[i] = log.first_use(*uses[i])

    first = threading.Thread(target=ask, args=(0,))
    first.start()
    assert held.entered.wait(30)  # the leader is inside its write: every other request queues
    rest = [threading.Thread(target=ask, args=(i,)) for i in range(1, len(uses))]
    for t in rest:
        t.start()
    while len(log._queue) < len(uses) - 1:  # all queued behind the held write
        threading.Event().wait(0.01)
    held.release.set()
    for t in [first, *rest]:
        t.join(30)
    assert held.sizes[0] == 1 and sum(held.sizes) == len(uses) and len(held.sizes) <= 2
    assert [answers[i] for i in range(40)] == [True] * 40
    assert [answers[i] for i in range(40, 45)] == [False] * 5  # one nonce, one yes
    again = reopen()  # as after a restart: every nonce answered yes is still refused
    assert again.first_use_many(uses[:40]) == [False] * 40


def test_a_failed_batch_fails_each_of_its_requests() -> None:
    class Broken:
        def first_use_many(self, uses: Sequence[Use]) -> list[bool | ConvgraphError]:
            raise ConvgraphError("the disk is gone")

    log = GroupedNonces(Broken())
    with pytest.raises(ConvgraphError, match="disk"):
        log.first_use(ACTORS[0], "n" * 16, NOW + 1, NOW)
    assert not log._leading  # the next request leads again


def test_only_logs_that_take_batches_are_grouped() -> None:
    memory = MemoryNonces()
    assert grouped(memory) is memory


def test_a_batch_of_one_on_postgresql_is_one_autocommit_statement(monkeypatch: pytest.MonkeyPatch) -> None:
    dsn = pg.dsn()
    log = PostgresNonces(dsn, pg.fresh_schema(dsn))
    try:
        def no_transaction(*_: object, **__: object) -> None:
            raise AssertionError("a batch of one began a transaction")

        monkeypatch.setattr(psycopg.Connection, "transaction", no_transaction)
        use = (ACTORS[0], "n" * 16, NOW + 60_000, NOW)
        assert log.first_use_many([use]) == [True]
        assert log.first_use_many([use]) == [False]  # committed: refused from now on
    finally:
        log.close()
