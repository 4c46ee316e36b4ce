"""Two server instances on one PostgreSQL schema behave as one server.

A record pushed to one instance reaches an events subscriber connected to the other,
woken by PostgreSQL NOTIFY alone (polling and heartbeats are set far beyond the test's
patience); a session may hop between instances message by message; a request replayed
to the other instance is refused through the shared nonce table.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import pg
from convgraph import Replica, SigningKey
from convgraph.core.cid import CID
from convgraph.core.keys import actor_text
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.server.pg_nonces import PostgresNonces
from convgraph.store.postgres import PostgresStore, listen
from convgraph.sync import wire
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import Initiator, synchronize
from convgraph.sync.peer import ReplicaPeer
from server.live import LiveServer

KEY = SigningKey(bytes([7]) * 32)


@pytest.fixture
def instances(pg_dsn: str) -> Iterator[list[tuple[Replica, str]]]:
    schema = pg.fresh_schema(pg_dsn)
    access = Access.from_rules([f"{actor_text(KEY.public)}=*"])
    config = ServerConfig(access=access, poll_s=3600, heartbeat_s=3600)  # only NOTIFY can wake a subscriber
    made: list[Any] = []
    out = []
    server_key = SigningKey.generate()  # instances of one server share its key: they sign for it
    for _ in range(2):
        replica = Replica(PostgresStore(pg_dsn, schema=schema), server_key)
        nonces = PostgresNonces(pg_dsn, schema)
        server = LiveServer(create_app(replica, config, nonces=nonces, listen=lambda: listen(pg_dsn, schema)))
        made += [server, nonces, replica]
        out.append((replica, server.url))
    yield out
    for thing in made:
        thing.close()


def test_a_record_pushed_to_one_instance_reaches_a_subscriber_of_the_other(
    instances: list[tuple[Replica, str]],
) -> None:
    (_, first), (_, second) = instances
    got: list[CID] = []
    ready = threading.Event()

    def subscribe() -> None:
        with HttpRemote(second, KEY) as remote:
            for _, cid, _ in remote.events("room"):
                if cid is None:
                    ready.set()
                else:
                    got.append(cid)
                    return

    thread = threading.Thread(target=subscribe, daemon=True)
    thread.start()
    assert ready.wait(10)
    time.sleep(0.3)  # the instance's LISTEN connection is up by now
    client = Replica.in_memory(KEY)
    record = client.say("room", "user", "hello from the first instance")
    with HttpRemote(first, KEY) as remote:
        assert synchronize(ReplicaPeer(client), remote.exchange, ["room"], salts=lambda: os.urandom(8)).converged
    thread.join(10)
    assert got == [record.cid], "the subscriber on the second instance never heard of the record"


def test_one_session_may_hop_between_instances(instances: list[tuple[Replica, str]]) -> None:
    (server, first), (_, second) = instances
    for i in range(300):
        server.say("c", "user", f"on the server {i}")
    client = Replica.in_memory(KEY)
    for i in range(40):
        client.say("c", "assistant", f"on the client {i}")
    with HttpRemote(first, KEY) as a, HttpRemote(second, KEY) as b:
        session = Initiator(ReplicaPeer(client), ["c"], salt=os.urandom(8))
        message, hops = session.initiate(), 0
        while message is not None:
            message = session.receive((a if hops % 2 == 0 else b).exchange(message))
            hops += 1
    assert session.converged() and hops >= 2
    assert server.store.sync_keys("c") == client.store.sync_keys("c")


def test_a_request_replayed_to_the_other_instance_is_refused(instances: list[tuple[Replica, str]]) -> None:
    (_, first), (_, second) = instances
    from convgraph.sync import auth

    body = wire.encode(wire.Message(wire.Kind.INITIATE, b"s" * 8, ()))
    headers = auth.sign(KEY, "POST", "/v1/sync", body, now_ms=int(time.time() * 1000), nonce="q" * 16)
    assert httpx.post(first + "/v1/sync", content=body, headers=headers).status_code == 200
    replay = httpx.post(second + "/v1/sync", content=body, headers=headers)
    assert replay.status_code == 401 and "already used" in replay.json()["reason"]


def test_the_server_store_is_shared(instances: list[tuple[Replica, str]], tmp_path: Path) -> None:
    (a, _), (b, _) = instances
    record = a.say("shared", "user", "written through one instance's store")
    assert b.get(record.cid).data == record.data
