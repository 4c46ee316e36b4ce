"""A sync message that pushes records is landed in one transaction with its nonce (issue 31 §2).

Counted, not timed: the outermost write transactions the server's store and nonce log begin
for each exchange of a tiny two-section sync, on SQLite (`COMMIT`s on the file's connection too)
and on PostgreSQL (the store's transactions and the nonce log's own). Replay protection stays as
docs/sync.md has it: a pushing request replayed, even to a server started again on the same
store, gets 401 and lands nothing twice; a pushing request that fails still has its nonce
recorded, so its replay gets 401 too.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import pg
from convgraph import Replica, SigningKey
from convgraph.core.keys import actor_text
from convgraph.errors import LockOrderError, StoreError
from convgraph.server import sync_endpoint
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.server.pg_nonces import PostgresNonces
from convgraph.store.postgres import PostgresStore
from convgraph.sync import auth, wire
from convgraph.sync.auth import NonceLog
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from server.live import LiveServer

WRITER = SigningKey(bytes([31]) * 32)
ACCESS = Access.from_rules([f"{actor_text(WRITER.public)}={conv}" for conv in ("a", "b")])


@pytest.fixture(params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Replica, NonceLog | None]]:
    """The server's replica and its nonce log (None: the default one, in the SQLite file)."""
    if request.param == "sqlite":
        replica = Replica.open(tmp_path / "server")
        yield replica, None
        replica.close()
        return
    dsn = request.getfixturevalue("pg_dsn")
    schema = pg.fresh_schema(dsn)
    replica = Replica(PostgresStore(dsn, schema=schema), SigningKey.generate())
    nonces = PostgresNonces(dsn, schema)  # as `convgraph serve --db` makes it
    yield replica, nonces
    nonces.close()
    replica.close()


class _Transactions:
    """Counts the outermost transactions begun on `store`, and the nonce log's own batches."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, replica: Replica, nonces: NonceLog | None) -> None:
        self.count = 0
        store, cls = replica.store, type(replica.store)
        original = cls.transaction

        @contextlib.contextmanager
        def counted(this: Any, *convs: str) -> Iterator[None]:
            if this is store and not this.in_transaction():
                self.count += 1
            with original(this, *convs):
                yield

        monkeypatch.setattr(cls, "transaction", counted)
        if isinstance(nonces, PostgresNonces):  # its own pool: one transaction a batch
            batch = nonces.first_use_many

            def many(uses: Any) -> Any:
                self.count += 1
                return batch(uses)

            monkeypatch.setattr(nonces, "first_use_many", many)


def test_a_tiny_two_section_push_is_one_transaction_with_its_nonce(
    served: tuple[Replica, NonceLog | None], monkeypatch: pytest.MonkeyPatch,
) -> None:
    replica, nonces = served
    client = Replica.in_memory(WRITER)
    client.say("a", "user", "first")
    client.say("b", "user", "first")
    with LiveServer(create_app(replica, ServerConfig(access=ACCESS), nonces=nonces)) as live, \
            HttpRemote(live.url, WRITER) as remote:
        assert synchronize(ReplicaPeer(client), remote.exchange, ["a", "b"], salts=lambda: os.urandom(8)).converged
        client.say("a", "user", "second")
        client.say("b", "user", "second")
        counter = _Transactions(monkeypatch, replica, nonces)
        commits: list[str] = []
        if not isinstance(replica.store, PostgresStore):
            replica.store._db.set_trace_callback(  # type: ignore[attr-defined]
                lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None)
        per_exchange: list[tuple[int, int, int]] = []  # (records pushed, transactions, COMMITs)

        def exchange(body: bytes) -> bytes:
            before, committed = counter.count, len(commits)
            reply = remote.exchange(body)
            pushed = sum(len(s.records) for s in wire.decode(body).sections)
            per_exchange.append((pushed, counter.count - before, len(commits) - committed))
            return reply

        assert synchronize(ReplicaPeer(client), exchange, ["a", "b"], salts=lambda: os.urandom(8)).converged
    assert replica.store.count("a") == replica.store.count("b") == 2
    pushing = [e for e in per_exchange if e[0]]
    assert [e[0] for e in pushing] == [2], per_exchange  # both sections' records in one message
    assert pushing[0][1] == 1, per_exchange  # its records and its nonce: one transaction
    if not isinstance(replica.store, PostgresStore):
        assert pushing[0][2] == 1, per_exchange  # one fsynced COMMIT for the message
    assert all(t == 1 for _, t, _ in per_exchange), per_exchange  # the others: their nonce alone


def _sign(body: bytes) -> dict[str, str]:
    return auth.sign(WRITER, "POST", "/v1/sync", body, now_ms=int(time.time() * 1000), nonce=os.urandom(16).hex())


def _pushing(url: str, conv: str, text: str) -> tuple[bytes, dict[str, str], httpx.Response]:
    """Sync one new record of `conv` to the server at `url`; the request that pushed it, as
    sent (body and signed headers), and its answer."""
    sent: list[tuple[bytes, dict[str, str], httpx.Response]] = []

    def exchange(body: bytes) -> bytes:
        headers = _sign(body)
        answer = httpx.post(url + "/v1/sync", content=body, headers=headers)
        if any(s.records for s in wire.decode(body).sections):
            sent.append((body, headers, answer))
        answer.raise_for_status()
        return answer.content

    with Replica.in_memory(WRITER) as client:
        client.say(conv, "user", text)
        with contextlib.suppress(httpx.HTTPStatusError):
            synchronize(ReplicaPeer(client), exchange, [conv], salts=lambda: os.urandom(8))
    assert len(sent) == 1
    return sent[0]


def _replay_is_refused(url: str, body: bytes, headers: dict[str, str]) -> None:
    """The very request again: 401, its nonce already used (docs/sync.md, replay)."""
    again = httpx.post(url + "/v1/sync", content=body, headers=headers)
    assert again.status_code == 401 and "already used" in again.json()["reason"], again.text


def test_a_replayed_push_gets_401_after_a_restart_and_lands_nothing_twice(tmp_path: Path) -> None:
    home = tmp_path / "server"
    with Replica.open(home) as replica, LiveServer(create_app(replica, ServerConfig(access=ACCESS))) as live:
        body, headers, answer = _pushing(live.url, "a", "once")
        assert answer.status_code == 200, answer.text
        assert replica.store.count("a") == 1
        _replay_is_refused(live.url, body, headers)
    with Replica.open(home) as replica, LiveServer(create_app(replica, ServerConfig(access=ACCESS))) as live:
        _replay_is_refused(live.url, body, headers)
        assert replica.store.count("a") == 1


def test_a_push_that_fails_inside_its_transaction_still_records_its_nonce(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    failed: list[str] = []

    def failing(self: Any, conv: str, records: Any, **_: Any) -> Any:
        assert self.replica.store.in_transaction()
        failed.append(conv)
        raise StoreError("injected failure inside the message's transaction")

    monkeypatch.setattr(sync_endpoint._Peer, "take", failing)
    with Replica.open(tmp_path / "server") as replica, \
            LiveServer(create_app(replica, ServerConfig(access=ACCESS))) as live:
        body, headers, answer = _pushing(live.url, "a", "fails once")
        assert answer.status_code == 500 and failed == ["a"], answer.text
        assert replica.store.count("a") == 0  # rolled back whole
        monkeypatch.undo()
        _replay_is_refused(live.url, body, headers)
        assert replica.store.count("a") == 0


def test_a_small_push_has_its_signatures_checked_before_its_transaction_begins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    inside: list[bool] = []
    with Replica.open(tmp_path / "server") as replica:
        decode = sync_endpoint.prepared

        def watched(records: Any, limits: Any) -> Any:
            inside.append(replica.store.in_transaction())
            return decode(records, limits)

        monkeypatch.setattr(sync_endpoint, "prepared", watched)
        with LiveServer(create_app(replica, ServerConfig(access=ACCESS))) as live:
            _, _, answer = _pushing(live.url, "a", "decoded first")
            assert answer.status_code == 200, answer.text
        assert replica.store.count("a") == 1
    assert inside == [False], inside  # once, holding no store lock


def test_the_transaction_ends_with_the_last_pushed_section_before_the_reply_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, bool]] = []
    with Replica.open(tmp_path / "server") as replica:
        outcome = sync_endpoint._Peer.outcome

        def watched(self: Any, conv: str, *args: Any, **named: Any) -> Any:
            seen.append((conv, replica.store.in_transaction()))
            return outcome(self, conv, *args, **named)

        monkeypatch.setattr(sync_endpoint._Peer, "outcome", watched)
        client = Replica.in_memory(WRITER)
        for conv in ("a", "b"):
            client.say(conv, "user", "one")
        with LiveServer(create_app(replica, ServerConfig(access=ACCESS))) as live, \
                HttpRemote(live.url, WRITER) as remote:
            assert synchronize(ReplicaPeer(client), remote.exchange, ["a", "b"], salts=lambda: os.urandom(8)).converged
        assert replica.store.count("a") == replica.store.count("b") == 1
    # the first section's outcome inside the open transaction, the last one's after its commit
    assert seen == [("a", True), ("b", False)], seen


def test_a_push_whose_release_needs_a_lock_out_of_order_lands_in_parts_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The message's transaction is rolled back on `LockOrderError` (docs: a release into a
    conversation sorting before the held ones, whose lock another writer holds): the request
    is answered the way a large push is, its nonce recorded once, the records landed once."""
    tried: list[str] = []
    def out_of_order(self: Any, held: Any, conv: str, records: Any, *, report: bool) -> Any:
        tried.append(conv)
        held.begin()  # the transaction begun, then rolled back
        raise LockOrderError("injected: a lock needed out of order", convs=("0", conv))

    monkeypatch.setattr(sync_endpoint._Peer, "_ingest_landing", out_of_order)
    with Replica.open(tmp_path / "server") as replica, \
            LiveServer(create_app(replica, ServerConfig(access=ACCESS))) as live:
        body, headers, answer = _pushing(live.url, "a", "lands in parts")
        assert answer.status_code == 200 and tried == ["a"], answer.text
        assert replica.store.count("a") == 1
        _replay_is_refused(live.url, body, headers)
        assert replica.store.count("a") == 1
