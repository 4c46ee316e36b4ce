"""Fifty clients sync against one server at once: no record is lost, every client finishes.

Each client writes to its own conversation and to one they all share, and syncs, a fixed
number of rounds over real HTTP, all starting together. At the end every client has
finished every round, every record any client wrote is on the server, and a fresh client
that pulls everything holds exactly the union. The work is fixed, not the time: a busy
machine makes the test slower, never different. (Throughput and latency figures come
from `bench/load.py`; this only proves nothing is lost under contention.)
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from convgraph import Replica, SigningKey
from convgraph.core.keys import actor_text
from convgraph.errors import SyncError
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from server.live import LiveServer

CLIENTS = 50
ROUNDS = 3
PATIENCE_S = 240.0  # only a hung client gets near this; pytest's own timeout is 300 s


@pytest.mark.slow
def test_fifty_concurrent_clients_lose_nothing(tmp_path: Path) -> None:
    keys = [SigningKey.generate() for _ in range(CLIENTS + 1)]
    access = Access.from_rules([f"{actor_text(k.public)}=*" for k in keys])
    server = Replica.open(tmp_path / "server")
    written: list[set[str]] = [set() for _ in range(CLIENTS)]
    errors: list[BaseException] = []
    rounds = [0] * CLIENTS
    converged = [False] * CLIENTS
    start = threading.Barrier(CLIENTS)
    with LiveServer(create_app(server, ServerConfig(access=access))) as live:

        def client(i: int) -> None:
            replica = Replica.in_memory(keys[i])
            convs = [f"own-{i}", "shared"]
            try:
                with HttpRemote(live.url, keys[i], timeout_s=60) as remote:
                    start.wait(PATIENCE_S)
                    for n in range(ROUNDS):
                        for conv in convs:
                            written[i].add(str(replica.say(conv, "user", f"client {i} says {n}").cid))
                        synchronize(ReplicaPeer(replica), remote.exchange, convs, salts=lambda: os.urandom(8))
                        rounds[i] += 1
                    report = synchronize(ReplicaPeer(replica), remote.exchange, convs, salts=lambda: os.urandom(8))
                    converged[i] = report.convs[f"own-{i}"].converged
            except (SyncError, threading.BrokenBarrierError) as exc:
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(PATIENCE_S)
        assert not [t for t in threads if t.is_alive()], "a client never finished"
        assert not errors, errors[:3]
        assert rounds == [ROUNDS] * CLIENTS and all(converged)
        held = {str(r.cid) for conv in server.conversations() for r in server.records(conv)}
        mine = set().union(*written)
        assert len(mine) == CLIENTS * ROUNDS * 2
        lost = mine - held
        assert not lost, f"{len(lost)} acknowledged records missing on the server"
        fresh = Replica.in_memory(keys[-1])
        with HttpRemote(live.url, keys[-1]) as remote:
            synchronize(ReplicaPeer(fresh), remote.exchange, ["shared"], salts=lambda: os.urandom(8))
        assert {str(r.cid) for r in fresh.records("shared")} == {str(r.cid) for r in server.records("shared")}
        assert len(fresh.records("shared")) == CLIENTS * ROUNDS
    assert server.verify().ok
    server.close()
