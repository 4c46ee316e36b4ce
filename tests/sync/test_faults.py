"""Convergence under network faults: three replicas, two server instances on one database
(PostgreSQL, and a shared SQLite file).

Each client reaches the servers over real HTTP through a fault-injecting httpx transport
that drops requests, loses replies, duplicates requests, delivers stale requests late,
delays, and cuts peers off for a while. Every replica keeps writing meanwhile, servers
too, and some records name artifacts (one block, or several chunks). After the faults heal,
a bounded number of sync rounds must leave every replica with the same record set, a
byte-identical transcript, and every named artifact held whole. Seeded: a failure names its seed.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import pg
from conftest import IN_CI
from convgraph import Replica, SigningKey, transcript_bytes
from convgraph.core.keys import actor_text
from convgraph.errors import SyncError
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.server.pg_nonces import PostgresNonces
from convgraph.store.base import Store
from convgraph.store.postgres import PostgresStore
from convgraph.store.postgres import listen as pg_listen
from convgraph.store.sqlite import SqliteStore
from convgraph.sync.auth import MemoryNonces, NonceLog
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from server.live import LiveServer

CONVS = ["plan", "chat"]
SEEDS = range(5 if IN_CI else 3)  # each seed ~10-25 s of real HTTP and PostgreSQL


class FaultyTransport(httpx.BaseTransport):
    """An httpx transport that misbehaves the way networks do, on a seeded schedule."""

    def __init__(self, rng: random.Random, p: float) -> None:
        self.inner = httpx.HTTPTransport()
        self.rng, self.p = rng, p
        self.cut = False
        self.stale: list[httpx.Request] = []
        self.faults: dict[str, int] = {}

    def _fault(self, name: str) -> bool:
        hit = self.rng.random() < self.p
        if hit:
            self.faults[name] = self.faults.get(name, 0) + 1
        return hit

    def _send(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        response.close()
        return response

    def close(self) -> None:  # each sync's client closes it; the link lives on with fresh sockets
        self.inner.close()
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.cut:
            raise httpx.ConnectError("partitioned", request=request)
        request.read()
        if self.stale and self._fault("late"):  # an old request turns up after newer ones
            self._send(self.stale.pop(self.rng.randrange(len(self.stale))))
        if self._fault("drop"):
            raise httpx.ConnectError("request lost", request=request)
        if self._fault("delay"):
            time.sleep(self.rng.random() * 0.02)
        response = self._send(request)
        if self._fault("duplicate"):
            self._send(request)  # the server sees it twice; the network hands back the first answer
        if len(self.stale) < 8 and self.rng.random() < 0.3:
            self.stale.append(request)
        if self._fault("lose-reply"):
            raise httpx.ReadError("reply lost", request=request)
        return response


def _servers(
    tmp_path: Path, keys: list[SigningKey], backend: str
) -> tuple[list[Replica], list[LiveServer], list[PostgresNonces]]:
    """Two server instances over one database: each its own connections, key cache and
    listener; on PostgreSQL their nonces are shared through the database, as in production."""
    access = Access.from_rules([f"{actor_text(k.public)}=*" for k in keys])
    schema = pg.fresh_schema(pg.dsn()) if backend == "postgres" else ""
    shared = MemoryNonces()
    replicas, servers, logs = [], [], []
    for _ in range(2):
        if backend == "postgres":
            store: Store = PostgresStore(pg.dsn(), schema=schema)
            log = PostgresNonces(pg.dsn(), schema)
            logs.append(log)
            nonces: NonceLog = log
            listen: Any = lambda: pg_listen(pg.dsn(), schema)  # noqa: E731
        else:
            store, nonces, listen = SqliteStore(tmp_path / "server.sqlite"), shared, None
        replica = Replica(store, SigningKey.generate())
        replicas.append(replica)
        app = create_app(replica, ServerConfig(access=access), nonces=nonces, listen=listen)
        servers.append(LiveServer(app))
    return replicas, servers, logs


def _write(rng: random.Random, replica: Replica) -> None:
    for _ in range(rng.randrange(4)):
        conv = rng.choice(CONVS)
        role = rng.choice(["user", "assistant"])
        text = rng.choice(["yes", "no", "ok", f"step {rng.randrange(1000)}"])  # identical texts on purpose
        replica.say(conv, role, text)
        if rng.random() < 0.3:  # an artifact, one block or several chunks, named by a record
            size = rng.choice([0, 1, 1000, 262_144, 262_145, 600_000])
            cid = replica.put(rng.randbytes(size))
            replica.write(conv, "user_message", {"content": "attached"}, refs=[cid])


def _sync(client: Replica, url: str, transport: httpx.BaseTransport) -> Any:
    with httpx.Client(transport=transport, timeout=10) as http, HttpRemote(url, client.key, client=http) as remote:
        # the client judges every statement the servers sign (docs/integrity.md §4, §5): faults,
        # two instances over one database and their restarts must raise no finding
        return synchronize(ReplicaPeer(client), remote.exchange, CONVS, salts=lambda: os.urandom(8),
                           retries=1, witness=client)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("seed", SEEDS)
def test_replicas_converge_after_faults_heal(tmp_path: Path, seed: int, backend: str) -> None:
    rng = random.Random(seed)
    clients = [Replica.open(tmp_path / f"client{i}") for i in range(3)]
    servers_r, servers, logs = _servers(tmp_path, [c.key for c in clients], backend)
    links = [[FaultyTransport(random.Random(rng.random()), p=0.15) for _ in servers] for _ in clients]
    try:
        for _ in range(12):  # the faulty phase: writes everywhere, syncs that may break
            for replica in [*clients, rng.choice(servers_r)]:
                _write(rng, replica)
            for row in links:  # partitions come and go
                for link in row:
                    link.cut = rng.random() < 0.2
            for i, client in enumerate(clients):
                j = rng.randrange(len(servers))
                with contextlib.suppress(SyncError):  # a broken sync is normal while the network misbehaves
                    _sync(client, servers[j].url, links[i][j])
        for row in links:  # heal
            for link in row:
                link.cut, link.p = False, 0.0
        for _ in range(2):  # bounded: every client with each instance, twice
            for i, client in enumerate(clients):
                for j, server in enumerate(servers):
                    _sync(client, server.url, links[i][j])
        _assert_converged([*clients, *servers_r], seed)
        # the judging really ran: every client remembers a signed statement of every conversation
        assert all(c.store.remembered_in(conv) for c in clients for conv in CONVS)
        assert sum(sum(link.faults.values()) for row in links for link in row) > 0
    finally:
        for server in servers:
            server.close()
        for replica in [*clients, *servers_r]:
            replica.close()
        for log in logs:
            log.close()


def _assert_converged(replicas: list[Replica], seed: int) -> None:
    for conv in CONVS:
        keys = {tuple(r.store.sync_keys(conv)) for r in replicas}
        assert len(keys) == 1, f"seed {seed}: record sets of {conv!r} differ"
        transcripts = {transcript_bytes(r.transcript(conv)) for r in replicas}
        assert len(transcripts) == 1, f"seed {seed}: transcripts of {conv!r} differ"
        named = {frozenset(r.store.artifact_refs(conv)) for r in replicas}
        assert len(named) == 1, f"seed {seed}: artifacts named in {conv!r} differ"
        assert all(r.missing_artifacts(conv) == [] for r in replicas), f"seed {seed}: an artifact was lost"
        for cid in next(iter(named)):
            assert len({r.get_artifact(cid) for r in replicas}) == 1
    assert all(r.verify().ok for r in replicas)
    assert [f for r in replicas for f in r.findings()] == [], f"seed {seed}: an honest run raised a finding"
