"""bench/_instances.py: the lock-wait sampler sees a store backend waiting, and the instances
serve one schema together.

The sampler is checked against a real wait: one connection named as a store of the schema holds
an advisory lock, a second asks for it; once PostgreSQL shows the second waiting, one sample
must count it (and an unrelated backend waiting is not ours). Two `convgraph serve` instances
over one schema: a record pushed through one is pulled through the other, and each instance's
CPU time is read from /proc.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import psycopg

import pg
from convgraph import Config, Replica, SigningKey
from convgraph.core.keys import actor_text
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _instances import Instances, LockWaits, prepare, url_for

KEY = 0x636F6E76  # an advisory lock key of this test's own


def _waiting(dsn: str, pid: int) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return row is not None and row[0] == "Lock"


def test_the_sampler_counts_a_store_backend_waiting_on_a_lock_and_no_other(pg_dsn: str) -> None:
    schema = pg.fresh_schema(pg_dsn)
    ours = {"application_name": f"convgraph/{schema}", "autocommit": True}
    with psycopg.connect(pg_dsn, **ours) as holder, psycopg.connect(pg_dsn, **ours) as waiter, \
            psycopg.connect(pg_dsn, autocommit=True, application_name="someone else") as other, \
            LockWaits(pg_dsn, schema, every_s=3600) as waits:  # samples only when told to
        holder.execute("SELECT pg_advisory_lock(%s)", [KEY])
        blocked = [threading.Thread(target=c.execute, args=("SELECT pg_advisory_lock(%s)", [KEY]))
                   for c in (waiter, other)]
        for t in blocked:
            t.start()
        deadline = time.monotonic() + 30
        while not (_waiting(pg_dsn, waiter.info.backend_pid) and _waiting(pg_dsn, other.info.backend_pid)):
            assert time.monotonic() < deadline, "the two connections never waited"
            time.sleep(0.01)
        waits.sample()
        holder.execute("SELECT pg_advisory_unlock(%s)", [KEY])
        blocked[0].join(30)
        waiter.execute("SELECT pg_advisory_unlock(%s)", [KEY])
        blocked[1].join(30)
        other.execute("SELECT pg_advisory_unlock(%s)", [KEY])
        figures = waits.figures()
    assert figures["lock_samples"] == 1
    assert figures["lock_waiters_max"] == 1  # the waiter, not the other application's backend
    assert figures["lock_waits_by_event"] == {"advisory": 1}
    assert figures["pg_locks_ungranted_mean"] >= 2


def test_two_instances_serve_one_schema_and_clients_spread_over_them(pg_dsn: str, tmp_path: Path) -> None:
    key = SigningKey.generate()
    schema = pg.fresh_schema(pg_dsn)
    assert prepare(pg_dsn, schema) == []  # plain PostgreSQL: nothing placed, nothing refused
    allow = ["--allow", f"{actor_text(key.public)}=*"]
    with Instances(tmp_path / "server", 2, allow, db=pg_dsn, schema=schema) as servers:
        assert len(set(servers.urls)) == 2 and [url_for(i, servers.urls) for i in range(3)] == \
            [servers.urls[0], servers.urls[1], servers.urls[0]]
        writer = Replica.in_memory(key, config=Config(legacy_writes=True))
        record = writer.say("room", "user", "through the first instance")
        with HttpRemote(servers.urls[0], key) as remote:
            assert synchronize(ReplicaPeer(writer), remote.exchange, ["room"], salts=lambda: os.urandom(8)).converged
        reader = Replica.in_memory(key, config=Config(legacy_writes=True))
        with HttpRemote(servers.urls[1], key) as remote:
            assert synchronize(ReplicaPeer(reader), remote.exchange, ["room"], salts=lambda: os.urandom(8)).converged
        assert record.cid in {r.cid for r in reader.records("room")}
        assert all(cpu > 0 for cpu in servers.cpu_s())
