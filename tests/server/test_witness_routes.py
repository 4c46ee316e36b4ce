"""The server's side of witnessed history over real HTTP: its key, its statements, its findings.

`/.well-known/convgraph` names the key every reply's statements are signed with; a sync
through `HttpRemote` gets a statement per reply section by that key, and a receipt for a
push; `/v1/findings` answers only keys that may read the conversation asked about.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from convgraph import Replica, SigningKey
from convgraph.core.hlc import Hlc
from convgraph.core.keys import actor_text, fingerprint
from convgraph.core.record import sign_record
from convgraph.errors import ForbiddenError
from convgraph.integrity.evidence import verify_bundle
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from server.live import LiveServer

WRITER, STRANGER = SigningKey(bytes([7]) * 32), SigningKey(bytes([8]) * 32)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Replica, str]]:
    replica = Replica.open(tmp_path / "server")
    access = Access.from_rules([f"{actor_text(WRITER.public)}=c", f"{actor_text(STRANGER.public)}=other"])
    with LiveServer(create_app(replica, ServerConfig(access=access))) as live:
        yield replica, live.url
    replica.close()


def test_the_well_known_route_names_the_key_that_signs_every_statement(served: tuple[Replica, str]) -> None:
    server, url = served
    body = httpx.get(url + "/.well-known/convgraph").json()  # unsigned, like /v1/health
    assert body == {"key": server.actor.hex(), "fingerprint": fingerprint(server.actor),
                    "actor": actor_text(server.actor)}
    client = Replica.in_memory(WRITER)
    for i in range(3):
        client.say("c", "user", f"turn {i}")
    with HttpRemote(url, client.key) as remote:
        assert remote.identity() == server.actor
        report = synchronize(ReplicaPeer(client), remote.exchange, ["c"], salts=lambda: os.urandom(8),
                             peer_key=server.actor)
    conv = report.convs["c"]
    assert report.converged and report.peer_key == server.actor and conv.statements >= 1
    assert conv.accepted_there == 3 and len(conv.stored_there) == 3 and not conv.unconfirmed


def test_findings_are_answered_only_to_keys_that_may_read(served: tuple[Replica, str]) -> None:
    _, url = served
    with HttpRemote(url, WRITER) as remote:
        assert remote.findings("c") == []
        assert remote.findings() == []
    with HttpRemote(url, STRANGER) as remote, pytest.raises(ForbiddenError):
        remote.findings("c")
    assert httpx.get(url + "/v1/findings").status_code == 401


def test_a_finding_the_server_holds_is_served_with_its_bundle(served: tuple[Replica, str]) -> None:
    server, url = served
    twice = [sign_record(WRITER, conv="c", seq=1, hlc=Hlc(1_700_000_000_000, 0), parents=[],
                         kind="user_message", payload={"content": text}).data for text in ("one", "two")]
    server.ingest(twice)  # one author, one seq, two records: a record equivocation
    [held] = server.findings("c")
    with HttpRemote(url, WRITER) as remote:
        [served_one] = remote.findings("c")
        assert remote.findings() == [served_one]
    assert served_one["id"] == str(held.id) and served_one["kind"] == "record_equivocation"
    assert base64.b64decode(served_one["bundle"]) == held.bundle and verify_bundle(held.bundle).ok
