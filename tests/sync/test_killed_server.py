"""No false alarms after a crash: a server killed with SIGKILL and started again is no liar
(docs/integrity.md §2.3, §3, §4).

`convgraph serve` runs in its own process: over a SQLite home, or as two instances (one home,
one key) over one PostgreSQL schema. Three clients write and sync with it over real HTTP,
judging every statement it signs, and two of them sync with each other (so the server holds
gossip to judge too). Then one client pushes a batch spread over several messages and the
link kills the server:

* `after-commit`: the server's reply to the second push, a receipt, has been written (so its
  ingest committed) but never reaches the client;
* `mid-ingest`: while the server's ingest transaction holds the store's write lock;
* `anywhere`: at a seeded moment after a push was sent.

While it is down, every record any reply ever named as stored (delivered or not) must be in
its store, and the others carry on with the surviving instance, if any. It is then started
again over the same store; every client syncs until all agree, and no client and no server
may hold a finding.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

import pg
from convgraph import CID, Draft, Replica, SyncReport
from convgraph.core.keys import actor_text
from convgraph.errors import SyncError
from convgraph.integrity.statement import decode_statement
from convgraph.replica import DB_FILE
from convgraph.server.app import ServerConfig
from convgraph.store.base import Store
from convgraph.store.postgres import PostgresStore
from convgraph.store.sqlite import SqliteStore
from convgraph.sync import auth, wire
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.local import sync_replicas
from convgraph.sync.peer import ReplicaPeer
from servers import ServeProcess

CONVS = ["plan", "chat"]
BULK = 500  # records of the doomed push: several messages of `BUDGET`, each ingest long enough to be caught in
BUDGET = 50_000
AFTER_REPLY, IN_INGEST, IN_FLIGHT = "after its reply was written", "inside its ingest transaction", "in flight"
STRUCK = {"after-commit": {AFTER_REPLY}, "mid-ingest": {IN_INGEST}, "anywhere": {AFTER_REPLY, IN_FLIGHT}}
MODES = list(STRUCK)


class Servers:
    """The server processes over one store, and a view of that store of the test's own."""

    def __init__(self, tmp_path: Path, backend: str, writers: list[bytes]) -> None:
        self.home, self.backend = tmp_path / "server", backend
        self.args = [arg for w in writers for arg in ("--allow", f"{actor_text(w)}=*")]
        if backend == "postgres":
            self.schema = pg.served_schema(pg.dsn())
            self.args += ["--db", pg.dsn(), "--schema", self.schema]
        self.procs = [ServeProcess(self.home, *self.args)]
        if backend == "postgres":  # a second instance shares the home, so the key: one server
            self.procs.append(ServeProcess(self.home, *self.args))
            with self.store() as store:
                self._lock_key = store.lock_key  # type: ignore[attr-defined]
            self._probe: Any = psycopg.connect(pg.dsn(), autocommit=True)
        else:
            self._probe = sqlite3.connect(self.home / DB_FILE, timeout=0, isolation_level=None)

    def url(self, i: int) -> str:
        return self.procs[i].url

    def kill(self, i: int) -> None:
        self.procs[i].kill()
        self.procs[i].close()

    def restart(self, i: int) -> None:
        self.procs[i] = ServeProcess(self.home, *self.args)

    def close(self) -> None:
        for proc in self.procs:
            proc.close()
        self._probe.close()

    @contextlib.contextmanager
    def store(self) -> Iterator[Store]:
        store: Store = (PostgresStore(pg.dsn(), schema=self.schema) if self.backend == "postgres"
                        else SqliteStore(self.home / DB_FILE))
        try:
            yield store
        finally:
            store.close()

    def ingesting(self, nonce: str) -> bool:
        """True when a writer holds the store's write lock after the request with `nonce` was
        admitted: the server is inside the ingest transaction of that request."""
        if self.backend == "postgres":  # PostgreSQL's nonces take no lock: any holder is an ingest
            [took] = self._probe.execute("SELECT pg_try_advisory_lock(%s)", [self._lock_key]).fetchone()
            if took:
                self._probe.execute("SELECT pg_advisory_unlock(%s)", [self._lock_key])
            return not took
        db = self._probe
        if db.execute("SELECT 1 FROM http_nonces WHERE nonce = ?", [nonce]).fetchone() is None:
            return False  # not admitted yet: a lock now could be its nonce's
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            return True
        db.execute("ROLLBACK")
        return False


def _pushed(body: bytes) -> list[CID]:
    return [CID.of_record(r) for s in wire.decode(body).sections for r in s.records]


def _receipted(body: bytes) -> set[CID]:
    return {c for s in wire.decode(body).sections if s.statement is not None
            for c in decode_statement(s.statement).stored}


class Link(httpx.BaseTransport):
    """One client's way to the server: it notes every receipt the server writes and, when
    armed, kills instance 0 at the `mode`'s moment of a push (then the client sees a broken
    connection)."""

    def __init__(self, servers: Servers, receipts: set[CID], rng: random.Random) -> None:
        self.inner, self.servers, self.receipts, self.rng = httpx.HTTPTransport(), servers, receipts, rng
        self.mode: str | None = None
        self.at = 0  # the push to strike at, counted from when armed
        self.doomed: list[CID] = []  # the records of the push it struck
        self.struck = ""  # what the kill met

    def arm(self, mode: str) -> None:
        self.mode, self.at = mode, 2 if mode == "after-commit" else 1

    def close(self) -> None:  # each sync's client closes it; the link lives on with fresh sockets
        self.inner.close()
        self.inner = httpx.HTTPTransport()

    def _send(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        response.close()
        if response.status_code == 200 and request.url.path == "/v1/sync":
            self.receipts |= _receipted(response.content)  # written by the server, delivered or not
        return response

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        pushed = _pushed(request.content) if request.url.path == "/v1/sync" else []
        if self.mode is None or not pushed:
            return self._send(request)
        self.at -= 1
        if self.at > 0:
            return self._send(request)
        if self.mode == "after-commit":
            self._send(request)  # answered: its ingest committed before the receipt was signed
            return self._strike(request, pushed, AFTER_REPLY)
        got: list[httpx.Response | BaseException] = []

        def send() -> None:
            try:
                got.append(self._send(request))
            except httpx.HTTPError as exc:  # the kill cut it off
                got.append(exc)

        sending = threading.Thread(target=send, daemon=True)
        sending.start()
        if self.mode == "anywhere":
            sending.join(self.rng.random() * 0.1)  # before, in or after its ingest, as it falls
        else:  # mid-ingest: strike once the server is caught inside the ingest transaction
            nonce = request.headers[auth.NONCE]
            while sending.is_alive() and not self.servers.ingesting(nonce):
                time.sleep(0.001)
            if not sending.is_alive():  # done before it was caught (a machine far too busy): the next push
                self.at = 1
                return _answer(got)
        struck = AFTER_REPLY if not sending.is_alive() else IN_FLIGHT if self.mode == "anywhere" else IN_INGEST
        try:
            return self._strike(request, pushed, struck)
        finally:
            sending.join(10)

    def _strike(self, request: httpx.Request, pushed: list[CID], struck: str) -> httpx.Response:
        self.servers.kill(0)
        self.mode, self.doomed, self.struck = None, pushed, struck
        raise httpx.ReadError(f"server killed ({struck})", request=request)


def _answer(got: list[httpx.Response | BaseException]) -> httpx.Response:
    [answer] = got
    if isinstance(answer, BaseException):
        raise answer
    return answer


def _sync(client: Replica, url: str, link: Link, *, budget: int = 4 << 20) -> SyncReport:
    with httpx.Client(transport=link, timeout=60) as http, HttpRemote(url, client.key, client=http) as remote:
        return synchronize(ReplicaPeer(client), remote.exchange, CONVS, salts=lambda: os.urandom(8),
                           retries=0, witness=client, budget=budget)


def _write(client: Replica, n: int, tag: str) -> None:
    for i in range(n):
        client.say(CONVS[i % 2], ["user", "assistant"][i % 2], f"{tag} {i}")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_server_killed_and_restarted_raises_no_finding(tmp_path: Path, backend: str) -> None:
    rng = random.Random(backend)
    clients = [Replica.open(tmp_path / f"client{i}") for i in range(3)]
    receipts: set[CID] = set()
    servers = Servers(tmp_path, backend, [c.key.public for c in clients])
    links = [Link(servers, receipts, rng) for _ in clients]
    a, n = clients[0], len(servers.procs)
    try:
        for i, client in enumerate(clients):  # each remembers a statement the crash must not contradict
            _write(client, 3, f"client {i}")
            assert _sync(client, servers.url(i % n), links[i]).converged
        sync_replicas(clients[1], clients[2], CONVS)  # client 1 gossips client 2's statements on
        for mode in MODES:  # one store through every crash: each restart starts from the last
            _crash_and_restart(mode, clients, servers, links, receipts)
            for conv in CONVS:
                for i, client in enumerate(clients):
                    assert client.findings(conv) == [], f"client {i} takes a crash {links[0].struck} for a lie"
                    assert client.store.remembered_in(conv), "the client never judged a statement"
            for j in range(n):
                with HttpRemote(servers.url(j), a.key) as remote:
                    assert remote.findings() == [], f"instance {j} raised a finding after a crash {links[0].struck}"
    finally:
        servers.close()
        for client in clients:
            client.close()


def _crash_and_restart(mode: str, clients: list[Replica], servers: Servers, links: list[Link],
                       receipts: set[CID]) -> None:
    """Client 0 pushes a batch and the server dies at `mode`'s moment; check what it kept, restart
    it, and sync everyone until all agree."""
    a, n = clients[0], len(servers.procs)
    a.write_many("plan", [Draft("user_message", {"content": f"{mode} {i}"}) for i in range(BULK)])
    a.checkpoint("plan")  # a checkpoint the server checks once its records have landed
    for i, client in enumerate(clients[1:], 1):
        _write(client, 2, f"client {i} before the {mode} crash")
    links[0].arm(mode)
    with contextlib.suppress(SyncError):
        _sync(a, servers.url(0), links[0], budget=BUDGET)
    struck, doomed = links[0].struck, links[0].doomed
    assert struck in STRUCK[mode], f"{mode}: the server was killed {struck or 'never'}"
    with servers.store() as store:  # the dead instance's store: what did it keep?
        held = store.metas([*receipts, *doomed])
        waiting = store.pending_get(doomed)  # pushed ahead of their parents: in quarantine
    lost = receipts - held.keys()
    assert not lost, f"{len(lost)} records a receipt named are gone after a kill {struck}, first {min(lost)}"
    kept = [c for c in doomed if c in held or c in waiting]
    # a push lands in parts, each one transaction (docs/sync.md, *Concurrency*): a kill leaves
    # whole parts, in the order pushed, never a torn one
    part = ServerConfig().part_records
    assert kept == doomed[:len(kept)] and (len(kept) % part == 0 or kept == doomed), (
        f"a push torn inside a part after a kill {struck}: {len(kept)} of {len(doomed)}")
    if struck == AFTER_REPLY:
        assert kept == doomed
    if n > 1:  # the surviving instance serves the others meanwhile
        for i in (1, 2):
            _sync(clients[i], servers.url(1), links[i])
    servers.restart(0)
    for _ in range(2):  # every client with every instance, twice: the first learns what the last brought
        reports = [_sync(client, servers.url(j), links[i]) for i, client in enumerate(clients) for j in range(n)]
        sync_replicas(clients[1], clients[2], CONVS)
    assert all(r.converged for r in reports), (mode, [r.convs for r in reports])
    for conv in CONVS:
        assert len({tuple(c.store.sync_keys(conv)) for c in clients}) == 1, (mode, conv)
    with servers.store() as store:
        assert store.sync_keys("plan") == a.store.sync_keys("plan"), mode
