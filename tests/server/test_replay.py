"""A SQLite server remembers the nonces it accepted across a crash: replays stay refused.

The server runs as `convgraph serve` in its own process. Signed requests are captured as
sent, the process is killed with SIGKILL and started again on the same replica, and the
same bytes are sent again within the signature window.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx

from convgraph import Replica, SigningKey
from convgraph.core.keys import actor_text
from convgraph.sync import auth, wire
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import Initiator, synchronize
from convgraph.sync.peer import ReplicaPeer
from servers import ServeProcess

WRITER = SigningKey(bytes([1]) * 32)


def _signed(method: str, path: str, body: bytes = b"") -> dict[str, str]:
    return auth.sign(WRITER, method, path, body, now_ms=int(time.time() * 1000), nonce=os.urandom(16).hex())


def test_a_replay_after_a_kill_and_a_restart_gets_401(tmp_path: Path) -> None:
    home, allow = tmp_path / "server", ("--allow", f"{actor_text(WRITER.public)}=c")
    writer = Replica.in_memory(WRITER)
    writer.say("c", "user", "what a replay must not fetch again")
    heads = "/v1/conversations/c/heads"
    with Replica.in_memory(SigningKey.generate()) as empty:  # a first message that asks for everything
        first = Initiator(ReplicaPeer(empty), ["c"], salt=b"s" * 8).initiate()
    with ServeProcess(home, *allow) as server:
        with HttpRemote(server.url, WRITER) as remote:
            synchronize(ReplicaPeer(writer), remote.exchange, ["c"], salts=lambda: os.urandom(8))
        captured = [("GET", heads, b"", _signed("GET", heads)),
                    ("POST", "/v1/sync", first, _signed("POST", "/v1/sync", first))]
        for method, path, body, headers in captured:
            answer = httpx.request(method, server.url + path, content=body, headers=headers)
            assert answer.status_code == 200, answer.text
        assert wire.decode(answer.content).sections[0].records  # what a replay would have fetched
        server.kill()
    with ServeProcess(home, *allow) as again:
        for method, path, body, headers in captured:
            answer = httpx.request(method, again.url + path, content=body, headers=headers)
            assert answer.status_code == 401, (path, answer.text)
            assert "already used" in answer.json()["reason"]
        fresh = httpx.get(again.url + heads, headers=_signed("GET", heads))
        assert fresh.status_code == 200 and fresh.json()["count"] == 1  # the server itself is fine
