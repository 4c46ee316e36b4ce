"""`Replica.transaction()`: several writes land together or not at all, and the writer's
cached state (its tips, the folded authority) stays true across commits and rollbacks."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from convgraph import Replica, SigningKey, SqliteStore
from counting_store import CountingStore


class _Boom(Exception):
    pass


def _in_failed_transaction(replica: Replica, body: Callable[[], object]) -> None:
    """Run `body` inside a transaction that then raises, so it rolls back."""

    def run() -> None:
        with replica.transaction():
            body()
            raise _Boom

    with pytest.raises(_Boom):
        run()


def _unconfirmed(r: Replica) -> int:
    """Records the folds still re-check on every read, waiting to see their transaction commit."""
    folds = r._folds
    return sum(len(v[2]) for v in folds.authorities.values()) + sum(len(v[2]) for v in folds.views.values())


@pytest.fixture(params=["memory", "sqlite"])
def replica(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replica]:
    r = Replica.in_memory() if request.param == "memory" else Replica.open(tmp_path / "home")
    yield r
    r.close()


def test_writes_in_one_transaction_land_together(replica: Replica) -> None:
    conv = replica.create()
    with replica.transaction():
        a = replica.say(conv, "user", "a")
        b = replica.say(conv, "assistant", "b")
    assert replica.heads(conv) == [b.cid]
    assert a.cid in b.parents
    assert [t.text for t in replica.transcript(conv)] == ["a", "b"]


def test_a_rolled_back_transaction_leaves_no_record_and_the_next_write_builds_on_what_is_stored(
    replica: Replica,
) -> None:
    conv = replica.create()
    kept = replica.say(conv, "user", "kept")
    _in_failed_transaction(replica, lambda: replica.say(conv, "assistant", "gone"))
    assert replica.heads(conv) == [kept.cid]
    after = replica.say(conv, "assistant", "after")  # once pointed at the rolled-back record
    assert after.parents == (kept.cid,)
    assert after.seq == kept.seq + 1
    assert replica.verify().ok
    assert [t.text for t in replica.transcript(conv)] == ["kept", "after"]


def test_a_rollback_of_a_first_write_in_a_transaction_is_noticed_by_the_folds(replica: Replica) -> None:
    conv = replica.create()

    def body() -> None:
        replica.say(conv, "user", "gone")
        assert [t.text for t in replica.transcript(conv)] == ["gone"]

    _in_failed_transaction(replica, body)
    assert replica.transcript(conv) == []
    replica.say(conv, "user", "next")
    assert replica.verify().ok


def test_writes_inside_transactions_are_confirmed_once_the_outermost_commits(replica: Replica) -> None:
    """Once unconfirmed, every later write re-checked all of them: quadratic work."""
    conv = replica.create()
    for i in range(20):
        with replica.transaction():
            replica.say(conv, "user", f"m{i}")
    assert _unconfirmed(replica) == 0


def test_nested_transactions_commit_with_the_outermost(replica: Replica) -> None:
    conv = replica.create()

    def body() -> None:
        with replica.transaction():
            replica.say(conv, "user", "inner")
        assert _unconfirmed(replica) > 0  # the outer one may still roll back

    _in_failed_transaction(replica, body)
    assert replica.transcript(conv) == []
    replica.say(conv, "user", "next")
    assert [t.text for t in replica.transcript(conv)] == ["next"]
    assert replica.verify().ok


def test_a_transaction_in_another_thread_is_not_mistaken_for_an_outer_one(replica: Replica) -> None:
    """The store's in-transaction flag is any thread's: nesting is counted per thread."""
    conv = replica.create()
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with replica.transaction():
            entered.set()
            release.wait(5)

    other = threading.Thread(target=hold)
    other.start()
    entered.wait(5)
    threading.Timer(0.2, release.set).start()  # ours waits for the store's lock meanwhile
    with replica.transaction():
        replica.say(conv, "user", "mine")
    other.join()
    assert _unconfirmed(replica) == 0


def test_a_long_transaction_checks_its_rollback_with_one_look_up_a_write(tmp_path: Path) -> None:
    """Inside one transaction every write used to look up every record the transaction had
    written so far (500 checkpoints imported in one took 27 s): now the newest one tells."""
    counted = CountingStore(SqliteStore(tmp_path / "r.sqlite"))
    replica = Replica(counted.store, SigningKey(bytes([7]) * 32))
    conv = replica.create()
    n = 200
    counted.reset()
    with replica.transaction():
        for i in range(n):
            replica.say(conv, "user", f"m{i}")
    looked_up = sum(len(list(args[0])) for name, args in counted.args if name == "metas")
    assert looked_up <= 4 * n, f"{looked_up} CIDs looked up for {n} writes"
    assert [t.text for t in replica.transcript(conv)][-1] == f"m{n - 1}"
    # and a rollback after such a transaction's writes is still noticed
    _in_failed_transaction(replica, lambda: [replica.say(conv, "user", f"gone{i}") for i in range(5)])
    assert [t.text for t in replica.transcript(conv)][-1] == f"m{n - 1}"
    replica.say(conv, "user", "next")
    assert replica.verify().ok
