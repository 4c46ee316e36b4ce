"""No lock spans conversations (issue 31 §1), on SQLite and on PostgreSQL, over real HTTP.

A push is held between two of its parts by a barrier in the server's `landed` hook: meanwhile
a sync of another conversation completes and a reader of the pushed one gets exactly what is
committed. A big push lands in several parts and loses nothing, and its report is the one a
single ingest of the whole message gives. Nothing here reads a clock to judge: the barrier
says who waited on whom.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import pg
from convgraph import Replica, SigningKey
from convgraph.core.hlc import Hlc
from convgraph.core.keys import actor_text
from convgraph.core.record import Record, sign_record
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.server.conv_locks import ConvLocks
from convgraph.server.sync_endpoint import PartHook
from convgraph.store.postgres import PostgresStore
from convgraph.sync import auth, wire
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from server.live import LiveServer

OWNER, READER, WRITER, AUTHOR = (SigningKey(bytes([i]) * 32) for i in (21, 22, 23, 24))
WAIT_S = 60.0  # a deadline for a barrier that is never reached, not a measure of anything


@pytest.fixture(params=["sqlite", "postgres"])
def server_replica(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replica]:
    if request.param == "sqlite":
        replica = Replica.open(tmp_path / "server")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        replica = Replica(PostgresStore(dsn, schema=pg.fresh_schema(dsn)), SigningKey.generate())
    yield replica
    replica.close()


class Barrier:
    """The `landed` hook: once armed, the first part landed in `conv` parks its push until `go`."""

    def __init__(self, conv: str) -> None:
        self.conv, self.armed = conv, False
        self.parked, self.go = threading.Event(), threading.Event()
        self.landed: list[int] = []

    def __call__(self, conv: str, count: int) -> None:
        if conv != self.conv or not self.armed:
            return
        self.landed.append(count)
        if len(self.landed) == 1:
            self.parked.set()
            assert self.go.wait(WAIT_S), "the test never let the push go on"


def push(url: str, key: SigningKey, conv: str, records: list[bytes]) -> tuple[wire.Reported, ...]:
    """One message of one section holding `records`; the report of the reply."""
    with HttpRemote(url, key, timeout_s=WAIT_S) as remote:
        message = wire.Message(wire.Kind.CONTINUE, os.urandom(8), (wire.Section(conv, records=tuple(records)),))
        reply = wire.decode(remote.exchange(wire.encode(message)))
    return reply.sections[0].report or ()


def signed_get(url: str, key: SigningKey, path: str) -> httpx.Response:
    headers = auth.sign(key, "GET", path, b"", now_ms=int(time.time() * 1000), nonce=os.urandom(8).hex())
    return httpx.get(url + path, headers=headers, timeout=WAIT_S)


def pull(url: str, key: SigningKey, conv: str) -> Replica:
    replica = Replica.in_memory(key)
    with HttpRemote(url, key, timeout_s=WAIT_S) as remote:
        assert synchronize(ReplicaPeer(replica), remote.exchange, [conv], salts=lambda: os.urandom(8)).converged
    return replica


def test_a_push_held_between_parts_blocks_neither_another_conversation_nor_a_reader_of_its_own(
    server_replica: Replica,
) -> None:
    owner = Replica.in_memory(OWNER)
    attacked = owner.create("held mid-push")
    owner.write(attacked, "grant", {"grantee": READER.public, "rights": ["read"]})
    access = Access.from_rules([f"{actor_text(OWNER.public)}={attacked}", f"{actor_text(WRITER.public)}=b"])
    barrier = Barrier(attacked)
    config = ServerConfig(access=access, part_records=10, poll_s=0.1)
    with LiveServer(create_app(server_replica, config, landed=barrier)) as live:
        with HttpRemote(live.url, OWNER) as remote:
            assert synchronize(ReplicaPeer(owner), remote.exchange, [attacked], salts=lambda: b"s" * 8).converged
        held_before = [r.cid for r in owner.records(attacked)]
        turns = [owner.say(attacked, "user", f"turn {i}").data for i in range(35)]
        barrier.armed = True
        reports: list[tuple[wire.Reported, ...]] = []
        pusher = threading.Thread(target=lambda: reports.append(push(live.url, OWNER, attacked, turns)),
                                  daemon=True)
        pusher.start()
        assert barrier.parked.wait(WAIT_S)  # the push is held after its first part committed

        writer = Replica.in_memory(WRITER)
        for i in range(5):
            writer.say("b", "user", f"other {i}")
        with HttpRemote(live.url, WRITER, timeout_s=WAIT_S) as remote:
            assert synchronize(ReplicaPeer(writer), remote.exchange, ["b"], salts=lambda: b"t" * 8).converged
        assert server_replica.store.count("b") == 5 and pusher.is_alive()

        committed = server_replica.store.count(attacked)
        assert len(held_before) + 10 == committed  # the first part, no more, no less
        reader = pull(live.url, READER, attacked)
        assert reader.store.count(attacked) == committed and pusher.is_alive()
        heads = signed_get(live.url, READER, f"/v1/conversations/{attacked}/heads")
        assert heads.status_code == 200 and heads.json()["count"] == committed

        barrier.go.set()
        pusher.join(WAIT_S)
        assert not pusher.is_alive()
    assert barrier.landed == [10, 20, 30, 35]
    assert [e.fate for e in reports[0]] == [wire.Fate.ACCEPTED] * 35
    assert server_replica.store.count(attacked) == len(held_before) + 35


def _orphans(key: SigningKey, conv: str, n: int) -> tuple[Record, list[Record]]:
    now = int(time.time() * 1000)
    ghost = sign_record(key, conv=conv, seq=1, hlc=Hlc(now, 0), parents=[], kind="user_message",
                        payload={"content": "never sent"})
    chain, parent = [], ghost
    for i in range(n):
        parent = sign_record(key, conv=conv, seq=2 + i, hlc=Hlc(now, 1 + i), parents=[parent.cid],
                             kind="user_message", payload={"content": f"orphan {i}"})
        chain.append(parent)
    return ghost, chain


def test_a_chain_of_orphans_lands_in_parts_and_nothing_is_lost(server_replica: Replica) -> None:
    ghost, chain = _orphans(AUTHOR, "c", 1000)
    access = Access.from_rules([f"{actor_text(WRITER.public)}=c"])
    landed: list[int] = []
    hook: PartHook = lambda conv, count: landed.append(count)  # noqa: E731
    with LiveServer(create_app(server_replica, ServerConfig(access=access, part_records=100),
                               landed=hook)) as live:
        report = push(live.url, WRITER, "c", [r.data for r in chain])
        assert landed == list(range(100, 1001, 100))
        assert [e.digest for e in report] == [r.cid.digest for r in chain]
        assert {e.fate for e in report} == {wire.Fate.QUARANTINED}
        assert report[0].parents == (ghost.cid.digest,)
        assert server_replica.store.pending_stats()[0] == 1000 and server_replica.store.count("c") == 0
        answer = push(live.url, WRITER, "c", [ghost.data])
        assert answer[0].fate is wire.Fate.ACCEPTED
        assert {e.fate for e in answer[1:]} == {wire.Fate.RELEASED}
    assert server_replica.store.count("c") == 1001 and server_replica.store.pending_stats()[0] == 0


def _tricky(conv: str) -> list[bytes]:
    """Two chains in one message: one with a record whose clock is not after its parent's, so
    every descendant is rejected, some in later parts; one with a child sent before its parent
    across a part boundary, which one ingest would accept as any other."""
    now = int(time.time() * 1000)
    bad: list[Record] = []
    for i in range(30):
        hlc = Hlc(now, i if i != 10 else 9)  # record 10 is not after its parent
        bad.append(sign_record(OWNER, conv=conv, seq=1 + i, hlc=hlc, parents=[bad[-1].cid] if bad else [],
                               kind="user_message", payload={"content": f"x {i}"}))
    good: list[Record] = []
    for i in range(12):
        good.append(sign_record(READER, conv=conv, seq=1 + i, hlc=Hlc(now + 1, i),
                                parents=[good[-1].cid] if good else [], kind="user_message",
                                payload={"content": f"y {i}"}))
    good[4], good[5] = good[5], good[4]  # with parts of 5: the child ends part 1, its parent starts part 2
    return [r.data for r in good] + [r.data for r in bad] + [r.data for r in good[:3]]  # and duplicates


@pytest.mark.parametrize("part", [5, 7])
def test_a_report_in_parts_is_the_report_of_one_ingest(tmp_path: Path, part: int) -> None:
    records = _tricky("c")
    access = Access.from_rules([f"{actor_text(WRITER.public)}=c"])
    reports: list[tuple[wire.Reported, ...]] = []
    counts: list[tuple[int, int]] = []
    for name, size in (("parts", part), ("whole", 10_000)):
        replica = Replica.open(tmp_path / name)
        with LiveServer(create_app(replica, ServerConfig(access=access, part_records=size))) as live:
            reports.append(push(live.url, WRITER, "c", records))
        counts.append((replica.store.count("c"), replica.store.pending_stats()[0]))
        replica.close()
    in_parts, whole = reports
    assert in_parts == whole and counts == [(22, 0), (22, 0)]
    assert sum(e.fate is wire.Fate.REJECTED for e in whole) == 20


def test_conversation_locks_are_per_conversation_and_dropped_when_unused() -> None:
    locks = ConvLocks()
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with locks.writing("a"):
            inside.set()
            assert release.wait(WAIT_S)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert inside.wait(WAIT_S)
    with locks.writing("b"), locks.reading("a"):  # another conversation's writer, and a's reader
        assert locks.held() == 2
    release.set()
    holder.join(WAIT_S)
    assert locks.held() == 0
