"""The sync server takes access to a rooted conversation from its authority projection.

One story, told against a SQLite server and against two server instances over one PostgreSQL
schema (each step at the other instance): the owner creates a conversation (the `--allow`
rule lets it create conversations here) and grants a second key `write`; that key, named in
no configuration, syncs and writes; a third key named nowhere, and a fourth named only for a
legacy conversation, are refused with 403s that say why, and nothing they push is stored; a
record the writer relays in a stranger's name is rejected by ingest; the owner revokes the
writer, whose next push and read are refused citing the revocation, and whose open event
stream ends before the revocation reaches it. Legacy conversations keep the configuration.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import httpx
import pytest

import pg
from convgraph import Replica, SigningKey
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import actor_text
from convgraph.core.record import sign_record
from convgraph.core.rooted import conv_id
from convgraph.errors import ForbiddenError
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.server.pg_nonces import PostgresNonces
from convgraph.store.postgres import PostgresStore, listen
from convgraph.sync import auth, wire
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import SyncReport, synchronize
from convgraph.sync.peer import ReplicaPeer
from server.live import LiveServer

OWNER, WRITER, STRANGER, OUTSIDER, READER = (SigningKey(bytes([i + 40]) * 32) for i in range(5))
NONCE = bytes(range(16))
CONV = conv_id(OWNER.public, NONCE)


def _access() -> Access:
    # the owner may create conversations here; the outsider may use one legacy conversation
    return Access.from_rules([f"{actor_text(OWNER.public)}=*", f"{actor_text(OUTSIDER.public)}=lobby"])


@dataclass
class Deployment:
    """Server URLs to take turns at (one SQLite server twice, or two PostgreSQL instances)."""

    urls: list[str]
    replicas: list[Replica]

    def url(self, step: int) -> str:
        return self.urls[step % len(self.urls)]


@pytest.fixture(params=["sqlite", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    made: list[Any] = []
    config = ServerConfig(access=_access(), poll_s=0.1, heartbeat_s=0.2)
    if request.param == "sqlite":
        replica = Replica.open(tmp_path / "server")
        server = LiveServer(create_app(replica, config))
        made += [server, replica]
        deployed = Deployment([server.url], [replica])
    else:
        dsn = request.getfixturevalue("pg_dsn")
        schema = pg.fresh_schema(dsn)
        deployed = Deployment([], [])
        for _ in range(2):
            replica = Replica(PostgresStore(dsn, schema=schema), SigningKey.generate())
            nonces = PostgresNonces(dsn, schema)
            server = LiveServer(create_app(replica, config, nonces=nonces,
                                           listen=lambda: listen(dsn, schema)))
            made += [server, nonces, replica]
            deployed.urls.append(server.url)
            deployed.replicas.append(replica)
    yield deployed
    for thing in made:
        thing.close()


def sync(replica: Replica, url: str, conv: str = CONV) -> SyncReport:
    with HttpRemote(url, replica.key) as remote:
        return synchronize(ReplicaPeer(replica), remote.exchange, [conv], salts=lambda: os.urandom(8))


def push(url: str, key: SigningKey, *records: bytes, conv: str = CONV) -> tuple[wire.Reported, ...]:
    """A CONTINUE message carrying `records`, as `key`; the reply's report of them."""
    message = wire.Message(wire.Kind.CONTINUE, b"s" * 8, (wire.Section(conv, records=records),))
    with HttpRemote(url, key) as remote:
        reply = wire.decode(remote.exchange(wire.encode(message)))
    return reply.sections[0].report or ()


def signed_get(url: str, key: SigningKey, path: str) -> httpx.Response:
    headers = auth.sign(key, "GET", path, b"", now_ms=int(time.time() * 1000), nonce=os.urandom(8).hex())
    return httpx.get(url + path, headers=headers, timeout=30)


def forbidden(call: Any) -> ForbiddenError:
    with pytest.raises(ForbiddenError) as caught:
        call()
    return caught.value


def stored(d: Deployment) -> set[CID]:
    return {cid for cid, _ in d.replicas[0].store.records(CONV)}


def test_access_to_a_rooted_conversation_follows_its_grants_and_revocations(deployment: Deployment) -> None:
    d = deployment
    owner, writer, stranger, outsider = (Replica.in_memory(k) for k in (OWNER, WRITER, STRANGER, OUTSIDER))
    genesis = owner.write(CONV, "genesis", {"nonce": NONCE, "title": "design review"})
    grant = owner.write(CONV, "grant", {"grantee": WRITER.public, "rights": ["read", "write"]})
    owner.write(CONV, "grant", {"grantee": READER.public, "rights": ["read"]})
    assert sync(owner, d.url(0)).converged  # created here: the --allow rule names the owner

    # the writer is named in no configuration: its grant, stored through the other instance, admits it
    assert sync(writer, d.url(1)).converged and writer.authority(CONV).genesis == genesis.cid
    hello = writer.say(CONV, "user", "hello from the writer")
    report = sync(writer, d.url(0))
    assert report.converged and report.convs[CONV].accepted_there == 1
    assert hello.cid in stored(d)
    answer = signed_get(d.url(1), WRITER, f"/v1/conversations/{CONV}/authority")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["owner"] == actor_text(OWNER.public) and body["genesis"] == str(genesis.cid)
    assert body["members"][actor_text(WRITER.public)]["write"] == {
        "chain": [str(genesis.cid), str(grant.cid)], "until": None}
    assert set(body["members"][actor_text(OWNER.public)]) == {"admin", "decide", "merge", "read", "review", "write"}

    # a key named nowhere: the cheap refusal, before its body is read
    refusal = forbidden(lambda: sync(stranger, d.url(1)))
    assert "admitted to no conversation" in refusal.reason
    # a key named for a legacy conversation, never granted here: the projection's refusal
    refusal = forbidden(lambda: sync(outsider, d.url(0)))
    assert refusal.reason == f"key {actor_text(OUTSIDER.public)} lacks `read` in conversation {CONV}: no grant of it"
    assert (refusal.capability, refusal.blocked_by, refusal.conv) == ("read", (), CONV)
    raw = signed_get(d.url(1), OUTSIDER, f"/v1/conversations/{CONV}/heads")
    assert raw.status_code == 403 and raw.json() == {
        "error": "forbidden", "detail": "no access", "reason": refusal.reason,
        "conversation": CONV, "capability": "read", "blocked_by": [], "hint": refusal.hint}
    assert f"`convgraph serve --allow {actor_text(OUTSIDER.public)}={CONV}`" in refusal.hint
    assert signed_get(d.url(0), OUTSIDER, f"/v1/records/{hello.cid}").status_code == 404
    assert signed_get(d.url(0), OUTSIDER, f"/v1/conversations/{CONV}/authority").status_code == 403
    # their records, pushed directly, are refused whole: nothing is stored
    before = stored(d)
    forged = sign_record(STRANGER, conv=CONV, seq=1, hlc=Hlc(int(time.time() * 1000), 0),
                         parents=[hello.cid], kind="agent_message", payload={"content": "the team agreed to ship"})
    for key in (STRANGER, OUTSIDER):
        forbidden(lambda key=key: push(d.url(1), key, forged.data))  # type: ignore[misc]
    # relayed by a member, the stranger's record meets ingest, which judges it by its author
    (entry,) = push(d.url(0), WRITER, forged.data)
    assert (entry.fate, entry.rule) == (wire.Fate.REJECTED, "authority")
    # a member that holds only `read` may push, but its own turn is judged the same way
    own = sign_record(READER, conv=CONV, seq=1, hlc=Hlc(int(time.time() * 1000), 0),
                      parents=[hello.cid], kind="user_message", payload={"content": "a reader writes"})
    (entry,) = push(d.url(1), READER, own.data)
    assert (entry.fate, entry.rule) == (wire.Fate.REJECTED, "authority")
    assert stored(d) == before

    # the writer listens; then the owner revokes it
    ended: list[BaseException] = []
    seen: list[CID] = []
    ready = threading.Event()

    def listen_as_writer() -> None:
        with HttpRemote(d.url(1), WRITER) as remote:
            try:
                for _, cid, _ in remote.events(CONV):
                    if cid is None:
                        ready.set()
                    else:
                        seen.append(cid)
            except ForbiddenError as exc:
                ended.append(exc)

    listener = threading.Thread(target=listen_as_writer, daemon=True)
    listener.start()
    assert ready.wait(10)
    time.sleep(0.3)  # the instance's LISTEN connection is up by now
    assert sync(owner, d.url(1)).converged  # the owner learns of the writer's turn first
    revocation = owner.write(CONV, "revocation", {"grantee": WRITER.public, "rights": ["read"], "reason": "left"})
    assert sync(owner, d.url(0)).converged
    listener.join(10)
    assert not listener.is_alive() and seen == [] and len(ended) == 1, (seen, ended)
    assert ended[0].blocked_by == (str(revocation.cid),)

    # the writer has not seen the revocation: it writes on, and is refused, citing it
    late = writer.say(CONV, "user", "written after the revocation")
    why = f"key {actor_text(WRITER.public)} lacks `read` in conversation {CONV}: revoked by {revocation.cid}"
    for step in (0, 1):
        refusal = forbidden(lambda step=step: sync(writer, d.url(step)))  # type: ignore[misc]
        assert refusal.reason == why and refusal.blocked_by == (str(revocation.cid),)
        assert why in str(refusal)
        forbidden(lambda step=step: push(d.url(step), WRITER, late.data))  # type: ignore[misc]
        heads = signed_get(d.url(step), WRITER, f"/v1/conversations/{CONV}/heads")
        assert heads.status_code == 403 and heads.json()["blocked_by"] == [str(revocation.cid)]
        assert signed_get(d.url(step), WRITER, f"/v1/records/{hello.cid}").status_code == 404
    assert late.cid not in stored(d)
    body = signed_get(d.url(1), OWNER, f"/v1/conversations/{CONV}/authority").json()
    assert actor_text(WRITER.public) not in body["members"]
    # a grant that has seen the revocation opens access again, from the next request
    owner.write(CONV, "grant", {"grantee": WRITER.public, "rights": ["read", "write"]})
    assert sync(owner, d.url(1)).converged
    assert sync(writer, d.url(0)).converged
    assert late.cid in stored(d)  # accepted at ingest, excluded from the views (concurrent with the revocation)
    assert str(late.cid) in {e["cid"] for e in signed_get(d.url(1), WRITER,
                                                         f"/v1/conversations/{CONV}/authority").json()["excluded"]}


def test_creating_a_rooted_conversation_needs_the_configuration(deployment: Deployment) -> None:
    d = deployment
    other = Replica.in_memory(OUTSIDER)
    theirs = conv_id(OUTSIDER.public, NONCE)
    other.write(theirs, "genesis", {"nonce": NONCE})
    # the outsider may use `lobby` only: it may not create conversations here
    refusal = forbidden(lambda: sync(other, d.url(0), theirs))
    assert refusal.reason == f"key {actor_text(OUTSIDER.public)} lacks `read` in conversation {theirs}: no grant of it"
    assert d.replicas[0].store.count(theirs) == 0
    # the owner may: before it pushes, it reads an empty conversation; its authority is not there yet
    assert signed_get(d.url(1), OWNER, f"/v1/conversations/{CONV}/heads").json()["count"] == 0
    assert signed_get(d.url(1), OWNER, f"/v1/conversations/{CONV}/authority").status_code == 404


def test_legacy_conversations_keep_the_configuration(deployment: Deployment) -> None:
    d = deployment
    assert signed_get(d.url(0), OUTSIDER, "/v1/conversations/lobby/heads").status_code == 200
    answer = signed_get(d.url(0), OUTSIDER, "/v1/conversations/lobby/authority")
    assert answer.status_code == 404 and answer.json()["error"] == "legacy"
    refused = signed_get(d.url(1), OUTSIDER, "/v1/conversations/elsewhere/heads")
    assert refused.status_code == 403 and "capability" not in refused.json()
    # a grant names a key for the cheap check, never for a legacy conversation
    owner = Replica.in_memory(OWNER)
    owner.write(CONV, "genesis", {"nonce": NONCE})
    owner.write(CONV, "grant", {"grantee": WRITER.public, "rights": ["read"]})
    assert sync(owner, d.url(0)).converged
    assert signed_get(d.url(1), WRITER, f"/v1/conversations/{CONV}/heads").status_code == 200
    assert "may not read conversation(s) lobby" in signed_get(
        d.url(1), WRITER, "/v1/conversations/lobby/heads").json()["reason"]
    assert json.loads(signed_get(d.url(0), OUTSIDER, "/v1/conversations/lobby/heads").text)["count"] == 0


def test_access_questions_never_wait_for_a_writer_of_the_conversation(tmp_path: Path) -> None:
    from convgraph.server.conv_locks import ConvLocks
    from convgraph.server.gate import Gate

    replica = Replica.open(tmp_path / "server")
    owner = Replica.in_memory(OWNER)
    owner.write(CONV, "genesis", {"nonce": NONCE})
    replica.ingest([r.data for r in owner.records(CONV)])
    locks = ConvLocks()
    gate = Gate(replica.reader(), _access(), locks)
    answers: dict[int, object] = {}
    questions = [lambda: gate.check_read(OWNER.public, [CONV]), lambda: gate.can_read(OWNER.public, CONV),
                 lambda: gate.push_refusal(OWNER.public, CONV), lambda: gate.projection(OWNER.public, CONV)]
    with locks.writing(CONV):  # as a part of a push holds it: every question is answered meanwhile
        threads = [threading.Thread(target=lambda i=i, q=q: answers.setdefault(i, q()), daemon=True)  # type: ignore[misc]
                   for i, q in enumerate(questions)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert [answers[i] for i in range(3)] == [None, True, None]
        assert answers[3]["members"] == {actor_text(OWNER.public): ANY}  # type: ignore[index]
        assert gate.push_refusal(OUTSIDER.public, "lobby") is None
        gate.check_read(OUTSIDER.public, ["lobby"])
    assert locks.held() == 0  # entries live only while in use
    replica.close()


def _rules(hint: str) -> list[str]:
    """The `--allow` rules the `convgraph serve` command in `hint` passes, as a shell reads them."""
    command = re.search(r"`convgraph serve ([^`]*)`", hint)
    assert command, hint
    words = shlex.split(command[1])
    return [rule for flag, rule in pairwise(words) if flag == "--allow"]


def test_a_refusal_names_the_allow_rule_that_admits_the_key_held_or_not(tmp_path: Path) -> None:
    from convgraph.server.conv_locks import ConvLocks
    from convgraph.server.gate import Gate

    replica, lock = Replica.open(tmp_path / "server"), ConvLocks()
    owner = Replica.in_memory(OWNER)
    owner.write(CONV, "genesis", {"nonce": NONCE})
    outsider = actor_text(OUTSIDER.public)
    with pytest.raises(ForbiddenError) as unheld:
        Gate(replica, _access(), lock).check_read(OUTSIDER.public, [CONV])
    assert _rules(unheld.value.hint) == [f"{outsider}={CONV}"]
    admitted = Gate(replica, _access().merged(Access.from_rules(_rules(unheld.value.hint))), lock)
    assert admitted.can_read(OUTSIDER.public, CONV)  # may create it here
    # held: the same words, so the refusal does not tell; the grant it names is what admits the key
    replica.ingest([r.data for r in owner.records(CONV)])
    gate = Gate(replica, _access(), lock)
    with pytest.raises(ForbiddenError) as held:
        gate.check_read(OUTSIDER.public, [CONV])
    assert (held.value.reason, held.value.hint) == (unheld.value.reason, unheld.value.hint)
    grant = re.search(r"`convgraph grant (\S+) (\w+) --conv (\S+)`", held.value.hint)
    assert grant and grant.groups() == (outsider, "read", CONV)
    granted = owner.write(CONV, "grant", {"grantee": OUTSIDER.public, "rights": [grant[2]]})
    replica.ingest([granted.data])
    assert gate.can_read(OUTSIDER.public, CONV)
    # revoked: no rule of the configuration would admit the key, so none is named
    revoked = owner.write(CONV, "revocation", {"grantee": OUTSIDER.public, "rights": ["read"], "reason": "left"})
    replica.ingest([revoked.data])
    with pytest.raises(ForbiddenError) as cut:
        gate.check_read(OUTSIDER.public, [CONV])
    assert cut.value.blocked_by == (str(revoked.cid),) and cut.value.hint == ""
    replica.close()


@pytest.mark.parametrize("scope", ["*", "own"])
def test_a_read_only_key_neither_creates_nor_reads_a_rooted_conversation_not_held(
    tmp_path: Path, scope: str,
) -> None:
    theirs = conv_id(READER.public, NONCE)
    rule = f"{actor_text(READER.public)}={'*' if scope == '*' else theirs}:read"
    replica = Replica.open(tmp_path / "server")
    config = ServerConfig(access=Access.from_rules([f"{actor_text(OWNER.public)}=*", rule]), poll_s=0.1)
    with LiveServer(create_app(replica, config)) as server:
        reader = Replica.in_memory(READER)
        reader.write(theirs, "genesis", {"nonce": NONCE})
        reader.say(theirs, "user", "may I start one here?")
        refusal = forbidden(lambda: sync(reader, server.url, theirs))
        assert "read" in refusal.reason or "create" in refusal.reason
        records = [r.data for r in reader.iter_records(theirs)]
        pushed = forbidden(lambda: push(server.url, READER, *records, conv=theirs))
        assert "read" in pushed.reason or "create" in pushed.reason
        assert replica.store.count(theirs) == 0  # nothing it pushed was stored
        answer = signed_get(server.url, READER, f"/v1/conversations/{theirs}/heads")
        assert answer.status_code == 403
    replica.close()
