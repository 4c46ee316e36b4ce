"""The replica facade: opening, authoring (parents, seq, hlc), reading and verifying."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from convgraph import Draft, Hlc, ManualClock, NotFoundError, Replica, SigningKey, sign_record
from convgraph.core.cid import CID
from convgraph.errors import InvalidTextError, SchemaError, UnknownKindError


def test_open_creates_key_and_store_and_reopens_as_same_actor(tmp_path: Path) -> None:
    home = tmp_path / "r"
    with Replica.open(home) as r:
        actor = r.actor
        rec = r.write("c", "user_message", {"content": "hi"})
    assert (home / "actor.key").stat().st_mode & 0o777 == 0o600
    with Replica.open(home) as r:
        assert r.actor == actor
        assert r.get(rec.cid) == rec
        assert r.write("c", "user_message", {"content": "again"}).seq == 2


def test_write_names_heads_and_own_previous(clock: ManualClock) -> None:
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    a1 = a.write("c", "user_message", {"content": "1"})
    b.ingest([a1.data])
    b1 = b.write("c", "agent_message", {"content": "2"})
    a.ingest([b1.data])
    a2 = a.write("c", "user_message", {"content": "3"})
    assert a2.parents == tuple(sorted([a1.cid, b1.cid]))
    b.ingest([a2.data])
    b2 = b.write("c", "agent_message", {"content": "4"})  # own b1 is no longer a head
    assert b2.parents == tuple(sorted([a2.cid, b1.cid]))
    assert a2.hlc > b1.hlc > a1.hlc and b2.seq == 2


def test_write_many_chains_in_one_transaction(replica: Replica) -> None:
    recs = replica.write_many("c", [Draft("user_message", {"content": str(i)}) for i in range(5)])
    assert [r.seq for r in recs] == [1, 2, 3, 4, 5]
    assert all(recs[i].parents == (recs[i - 1].cid,) for i in range(1, 5))
    assert replica.heads("c") == [recs[-1].cid]


def test_a_failing_draft_writes_nothing(replica: Replica) -> None:
    with pytest.raises(SchemaError):
        replica.write_many("c", [Draft("user_message", {"content": "ok"}), Draft("user_message", {})])
    assert replica.store.count() == 0
    with pytest.raises(UnknownKindError):
        replica.write("c", "gossip", {})


def test_clock_is_monotonic_even_when_wall_clock_stalls_or_goes_back(clock: ManualClock) -> None:
    r = Replica.in_memory(clock=clock)
    first = r.write("c", "user_message", {"content": "a"})
    clock.advance(-5000)
    second = r.write("c", "user_message", {"content": "a"})
    assert second.hlc > first.hlc and second.cid != first.cid


MAX_WALL_MS, MAX_COUNTER = 2**53 - 1, 2**32 - 1  # the last stamp, as docs/format.md §4 writes it


def _seen_at(replica: Replica, stamp: Hlc) -> None:
    """Let `replica` receive a foreign record stamped `stamp` (in a conversation of its own)."""
    other = sign_record(SigningKey(bytes(32)), conv="elsewhere", seq=1, hlc=stamp, parents=[],
                        kind="user_message", payload={"content": "a peer's"})
    assert replica.ingest([other.data]).accepted == [other.cid]


def test_counter_overflow_moves_the_wall_time_one_millisecond_on() -> None:
    replica = Replica.in_memory(clock=ManualClock(5))
    _seen_at(replica, Hlc(5, MAX_COUNTER - 2))
    stamps = [replica.write("c", "user_message", {"content": str(i)}).hlc for i in range(3)]
    assert stamps == [Hlc(5, MAX_COUNTER), Hlc(6, 0), Hlc(6, 1)]  # the physical clock still says 5


def test_no_record_can_be_written_past_the_maximum_stamp() -> None:
    replica = Replica.in_memory(clock=ManualClock(MAX_WALL_MS))
    _seen_at(replica, Hlc(MAX_WALL_MS, MAX_COUNTER - 2))
    last = replica.write("c", "user_message", {"content": "the last one"})
    assert last.hlc == Hlc(MAX_WALL_MS, MAX_COUNTER)
    for _ in range(2):  # the clock does not move: the next write fails the same way
        with pytest.raises(SchemaError, match=r"past the last stamp a record can carry"):
            replica.write("c", "user_message", {"content": "one more"})
    assert replica.store.count() == 2 and replica.now() == last.hlc
    broken = Replica.in_memory(clock=ManualClock(MAX_WALL_MS + 1))
    with pytest.raises(SchemaError, match=r"\[9007199254740992, 0\] is past"):
        broken.write("c", "user_message", {"content": "from a clock past the maximum"})
    assert broken.store.count() == 0


def test_records_last_and_conversations(replica: Replica) -> None:
    for i in range(10):
        replica.write("one" if i % 2 else "two", "user_message", {"content": str(i)})
    assert replica.conversations() == ["one", "two"]
    assert [r.payload["content"] for r in replica.records("one", last=2)] == ["7", "9"]
    assert len(replica.records("one")) == 5 and replica.records("none") == []


def test_get_unknown(replica: Replica) -> None:
    with pytest.raises(NotFoundError):
        replica.get(CID.of_record(b"nothing"))


def test_verify_detects_tampering_in_the_file(tmp_path: Path) -> None:
    home = tmp_path / "r"
    with Replica.open(home) as r:
        rec = r.write("c", "user_message", {"content": "original"})
        r.write("c", "user_message", {"content": "second"})
    db = sqlite3.connect(home / "replica.sqlite")
    data = db.execute("SELECT data FROM records WHERE cid = ?", (bytes(rec.cid),)).fetchone()[0]
    db.execute("UPDATE records SET data = ? WHERE cid = ?", (data.replace(b"original", b"0riginal"), bytes(rec.cid)))
    db.commit()
    db.close()
    with Replica.open(home) as r:
        report = r.verify()
    assert not report.ok and report.checked == 2
    assert [c for c, _ in report.failures] == [rec.cid]
    assert report.failures[0][1].rule == "cid"


def _open_and_collect(home: Path, barrier: object, actors: list[bytes], errors: list[BaseException]) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    try:
        with Replica.open(home) as r:
            actors.append(r.actor)
    except BaseException as exc:  # collected and asserted by the caller
        errors.append(exc)


def test_concurrent_first_open_of_a_fresh_directory(tmp_path: Path) -> None:
    import threading

    for trial in range(15):
        home = tmp_path / f"r{trial}"
        barrier = threading.Barrier(6)
        actors: list[bytes] = []
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=_open_and_collect, args=(home, barrier, actors, errors)) for _ in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(set(actors)) == 1 and len(actors) == 6
        assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []


def _assert_one_chain(r: Replica, conv: str) -> None:
    recs = sorted((x for x in r.records(conv) if x.actor == r.actor), key=lambda x: x.seq)
    assert [x.seq for x in recs] == list(range(1, len(recs) + 1))
    assert all(recs[i - 1].cid in recs[i].parents for i in range(1, len(recs)))
    assert r.store.equivocations() == [] and r.verify().ok


def test_cached_tip_is_dropped_when_another_connection_writes(tmp_path: Path) -> None:
    # two handles on one directory share the actor key: a stale tip would fork its chain
    with Replica.open(tmp_path / "r") as a, Replica.open(tmp_path / "r") as b:
        for i in range(6):
            (a if i % 3 else b).write("c", "user_message", {"content": str(i)})
            a.write("d", "user_message", {"content": str(i)})
        _assert_one_chain(a, "c")
        _assert_one_chain(a, "d")
        assert len(a.heads("c")) == 1


def test_cached_tip_is_dropped_after_ingest_and_after_a_failed_write(clock: ManualClock) -> None:
    a, other = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    a1 = a.write("c", "user_message", {"content": "1"})
    other.ingest([a1.data])
    o1 = other.write("c", "agent_message", {"content": "2"})
    a.ingest([o1.data])
    a2 = a.write("c", "user_message", {"content": "3"})
    assert a2.parents == tuple(sorted([a1.cid, o1.cid]))
    with pytest.raises(SchemaError):
        a.write_many("c", [Draft("user_message", {"content": "4"}), Draft("user_message", {})])
    a3 = a.write("c", "user_message", {"content": "5"})
    assert (a3.seq, a3.parents) == (3, (a2.cid,))
    _assert_one_chain(a, "c")


def test_two_replicas_sharing_one_memory_store_keep_one_chain(clock: ManualClock) -> None:
    first = Replica.in_memory(clock=clock)
    second = Replica(first.store, first.key, clock=clock)
    for i in range(5):
        (first if i % 2 else second).write("c", "user_message", {"content": str(i)})
    _assert_one_chain(first, "c")


def test_a_conversation_id_that_is_not_utf8_is_a_typed_error_and_writes_nothing(tmp_path: Path) -> None:
    with Replica.open(tmp_path / "r") as replica:  # SQLite: the store would raise UnicodeEncodeError
        for call in (
            lambda: replica.say("\udcff", "user", "x"),
            lambda: replica.write("\udcff", "user_message", {"content": "x"}),
            lambda: replica.records("\udcff"),
            lambda: replica.heads("\udcff"),
            lambda: replica.transcript("\udcff"),
            lambda: replica.resume("\udcff", "openai"),
            lambda: replica.checkpoint("\udcff"),
        ):
            with pytest.raises(InvalidTextError) as info:
                call()
            assert info.value.field == "conv"
        with pytest.raises(InvalidTextError) as info:
            replica.say("ok", "user", "a\udcffb")
        assert info.value.field == "payload.content"
        assert replica.conversations() == []
