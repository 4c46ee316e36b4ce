"""The per-store conversation cache: whatever the order of writes and reads, it answers what a
full read of the store answers, and an unchanged conversation is not read again."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from convgraph import ManualClock, Replica, SigningKey
from convgraph.store.sqlite import SqliteStore
from convgraph.sync import conv_cache
from convgraph.sync.conv_cache import ConvCache
from convgraph.sync.keyset import KeySet
from convgraph.sync.peer import ReplicaPeer

CONVS = ("a", "b", "c")
# (what, conversation, how many): write here, write a turn naming an artifact, write through
# another connection, write with an older clock (keys land inside the set, not past its end),
# read, forget, write and read inside a transaction that commits (n even) or rolls back (n odd)
steps = st.lists(st.tuples(st.sampled_from(["say", "art", "other", "late", "read", "forget", "txn"]),
                           st.sampled_from(CONVS), st.integers(1, 3)), max_size=25)


def _full(store: SqliteStore, conv: str) -> tuple[KeySet, list[object]]:
    return KeySet(store.sync_keys(conv)), list(store.heads(conv))


class _Rollback(Exception):
    pass


def _same(cache: ConvCache, store: SqliteStore, conv: str) -> None:
    state = cache.state(conv)
    keys, heads = _full(store, conv)
    n = len(keys)
    assert list(state.keys.keys) == list(keys.keys) and list(state.heads) == heads
    assert state.keys.total() == keys.total() and state.keys.fingerprint(0, n, 16) == keys.fingerprint(0, n, 16)
    assert all(state.keys.fingerprint(i, j) == keys.fingerprint(i, j) for i in range(n + 1) for j in range(i, n + 1))
    assert state.keys.fingerprint(0, n, 16) == KeySet.of(store.keys_since(conv, 0)[0]).fingerprint(0, n, 16)
    assert cache.has_artifacts(conv) is bool(store.artifact_refs(conv))


@settings(max_examples=40, deadline=None)
@given(steps)
def test_any_interleaving_of_writes_and_reads_answers_as_a_full_read(plan: list[tuple[str, str, int]]) -> None:
    clock, late_clock = ManualClock(), ManualClock(1_600_000_000_000)
    key = SigningKey.generate()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "r"
        replica = Replica.open(home, clock=clock)
        other = Replica.open(home, clock=clock)  # its own connection to the same file
        late = Replica.in_memory(key, clock=late_clock)
        cache = ConvCache(replica.store)
        forgotten: set[str] = set()
        try:
            for what, conv, n in plan:
                if what == "read":
                    _same(cache, replica.store, conv)  # type: ignore[arg-type]
                    continue
                if conv in forgotten:
                    continue
                if what == "txn":
                    try:  # what a read inside saw is kept only if it committed
                        with cache.landing(), replica.store.transaction():
                            clock.advance(7)
                            replica.say(conv, "user", f"in a transaction {conv}")
                            _same(cache, replica.store, conv)  # type: ignore[arg-type]
                            if n % 2:
                                raise _Rollback
                    except _Rollback:
                        pass
                    continue
                if what == "forget":
                    if replica.store.heads(conv):
                        replica.forget(conv)
                        forgotten.add(conv)
                    continue
                for i in range(n):
                    clock.advance(7)
                    late_clock.advance(3)
                    if what == "say":
                        replica.say(conv, "user", f"{conv} {i}")
                    elif what == "art":
                        replica.say(conv, "user", f"{conv} {i}", attachments=[f"file {conv} {i}".encode()])
                    elif what == "other":
                        other.say(conv, "assistant", f"other {conv} {i}")
                    else:
                        written = late.say(conv, "user", f"late {conv} {i}")
                        replica.ingest([written.data], conversations={conv})
            for conv in CONVS:
                _same(cache, replica.store, conv)  # type: ignore[arg-type]
        finally:
            other.close()
            replica.close()


def test_an_unchanged_conversation_is_not_read_again_and_a_grown_one_only_in_its_tail(tmp_path: Path) -> None:
    replica = Replica.open(tmp_path / "r", clock=ManualClock())
    for i in range(20):
        replica.say("c", "user", f"turn {i}")
    cache = ConvCache(replica.store)
    first = cache.keys("c")
    assert cache.reads == {"hit": 0, "grown": 0, "full": 1}
    assert cache.keys("c") is first and cache.reads["hit"] == 1
    replica.say("c", "user", "one more")
    grown = cache.keys("c")
    assert cache.reads["full"] == 1 and cache.reads["grown"] == 1
    assert len(grown) == 21 and len(first) == 20  # the old set still answers as it did
    assert set(first.keys) < set(grown.keys) and list(grown.keys) == replica.store.sync_keys("c")
    replica.close()


def test_every_peer_over_one_store_shares_its_cache() -> None:
    replica = Replica.in_memory(clock=ManualClock())
    replica.say("c", "user", "hello")
    one, two = ReplicaPeer(replica), ReplicaPeer(replica)
    assert one.cache is two.cache is conv_cache.of(replica.store)
    assert one.keys("c") is two.keys("c")


def test_a_read_inside_a_transaction_keeps_nothing_that_may_roll_back(tmp_path: Path) -> None:
    replica = Replica.open(tmp_path / "r", clock=ManualClock())
    for i in range(3):
        replica.say("c", "user", f"turn {i}")
    cache = ConvCache(replica.store)
    assert len(cache.keys("c")) == 3
    try:
        with replica.store.transaction():
            replica.say("c", "user", "rolled back")
            assert len(cache.keys("c")) == 4  # this transaction's own view
            assert cache.reads["full"] == 1  # grown from the cached set, not read whole
            raise RuntimeError("roll it back")
    except RuntimeError:
        pass
    assert list(cache.keys("c").keys) == replica.store.sync_keys("c") and len(cache.keys("c")) == 3
    replica.close()


def test_a_landing_keeps_what_was_read_inside_once_committed_and_nothing_rolled_back(tmp_path: Path) -> None:
    replica = Replica.open(tmp_path / "r", clock=ManualClock())
    replica.say("c", "user", "turn")
    cache = ConvCache(replica.store)
    cache.keys("c")
    with contextlib.suppress(RuntimeError), cache.landing(), replica.store.transaction():
        replica.say("c", "user", "rolled back")
        assert len(cache.keys("c")) == 2
        raise RuntimeError("roll it back")
    assert len(cache.keys("c")) == 1
    with cache.landing(), replica.store.transaction():
        replica.say("c", "user", "committed")
        inside = cache.state("c")
    reads = dict(cache.reads)
    assert cache.state("c") is inside and cache.reads["hit"] == reads["hit"] + 1  # no read after the commit
    assert list(inside.keys.keys) == replica.store.sync_keys("c") and len(inside.keys) == 2
    replica.close()
