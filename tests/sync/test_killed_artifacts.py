"""An artifact push cut by a server killed with SIGKILL is finished by the next sync, after a
restart over the same home: blocks the server stored stay, the rest arrive, nothing is lost."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import httpx
import pytest

from convgraph import Replica
from convgraph.core.keys import actor_text
from convgraph.errors import SyncError
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from servers import ServeProcess

_salt = itertools.count(1)


class _KillAfter(httpx.HTTPTransport):
    """Lets `n` sync requests through, then kills the server before the next one's reply."""

    def __init__(self, server: ServeProcess, n: int) -> None:
        super().__init__()
        self.server, self.left = server, n

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/sync":
            if self.left == 0:
                response = super().handle_request(request)  # the server acts on it...
                self.server.kill()  # ...and dies before its reply is read
                response.close()
                raise httpx.ReadError("server killed", request=request)
            self.left -= 1
        return super().handle_request(request)


def _sync(client: Replica, url: str, transport: httpx.BaseTransport | None = None) -> object:
    with httpx.Client(transport=transport, timeout=30) as http, HttpRemote(url, client.key, client=http) as remote:
        return synchronize(ReplicaPeer(client), remote, ["team"], salts=lambda: next(_salt).to_bytes(8, "big"),
                           retries=0)


@pytest.mark.parametrize("cut_after", [1, 2])
def test_a_killed_server_gets_the_rest_of_the_artifact_after_a_restart(tmp_path: Path, cut_after: int) -> None:
    client = Replica.open(tmp_path / "client")
    data = random.Random(cut_after).randbytes(10 << 20)  # 40 chunks: three 4 MiB messages of blocks
    cid = client.put(data)
    client.write("team", "user_message", {"content": "the build"}, refs=[cid])
    allow = ("--allow", f"{actor_text(client.actor)}=team")
    try:
        server = ServeProcess(tmp_path / "server", *allow)
        with pytest.raises(SyncError):
            _sync(client, server.url, _KillAfter(server, cut_after))
        server.close()
        with ServeProcess(tmp_path / "server", *allow) as again:
            report = _sync(client, again.url)
            assert report.converged  # type: ignore[attr-defined]
            conv = report.convs["team"]  # type: ignore[attr-defined]
            assert conv.missing_there == [] and conv.refused_there == []
            # 40 chunks and the manifest; the blocks the killed server had stored are not sent again
            assert conv.blocks_sent == 41 if cut_after == 1 else 0 < conv.blocks_sent < 41
            with HttpRemote(again.url, client.key) as remote:
                assert remote.artifact(cid) == data
    finally:
        client.close()
