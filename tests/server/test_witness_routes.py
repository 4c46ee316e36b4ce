"""The server's side of witnessed history over real HTTP: its key, its statements, its findings.

`/.well-known/convgraph` names the key every reply's statements are signed with; a sync
through `HttpRemote` gets a statement per reply section by that key, and a receipt for a
push; `/v1/findings` answers only keys that may read the conversation asked about.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from convgraph import Replica, SigningKey
from convgraph.core.keys import actor_text, fingerprint
from convgraph.errors import ForbiddenError
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
