"""N `convgraph serve` processes over one PostgreSQL schema, and the database's lock waits while they run.

For `bench/load.py --instances N` (issue 31 §5): `Instances` starts the N servers on one home
(so one server key: instances of one server sign for it), over `--db DSN --schema SCHEMA`, and
reads each one's CPU time from /proc; `url_for` spreads clients over them round-robin.
`LockWaits` samples, in a thread, the backends of that schema waiting on a lock
(`pg_stat_activity.wait_event_type = 'Lock'`, by wait event) and the ungranted `pg_locks`
rows, on plain PostgreSQL and on a Citus coordinator (then also `citus_lock_waits`, the
waits on the workers). The lead wires them into load.py:

    refused = prepare(dsn, schema)     # on Citus: the schema distributed first; what Citus refused
    with Instances(home, n, serve_args, db=dsn, schema=schema) as servers, LockWaits(dsn, schema) as waits:
        urls = servers.urls            # client i syncs with url_for(i, urls)
        cpu0 = servers.cpu_s()
        ...                            # run the clients
        figures |= waits.figures() | {"server_cpu_s": servers.cpu_s() - cpu0}
"""

from __future__ import annotations

import re
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from _common import ROOT, Server, process_cpu_s


def url_for(client: int, urls: Sequence[str]) -> str:
    """The instance client number `client` talks to: round-robin, so N instances get equal shares."""
    return urls[client % len(urls)]


def prepare(db: str, schema: str) -> list[str]:
    """On a Citus coordinator, create the store's schema here, distributed as tests/citus.py
    places it (the servers would create plain coordinator tables); return what Citus refused.
    On plain PostgreSQL do nothing: the first instance creates the schema, as in production."""
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is None:
            return []
    sys.path.insert(0, str(ROOT / "tests"))
    import citus
    from convgraph.server.pg_nonces import PostgresNonces
    from convgraph.store.postgres import PostgresStore

    citus.refused.clear()
    PostgresStore.on_create = citus.place
    try:
        PostgresStore(db, schema=schema).close()
        PostgresNonces(db, schema).close()
    finally:
        PostgresStore.on_create = None
    return citus.report()


class Instances:
    """`n` server processes on `home` over `--db db --schema schema`; closing stops them all."""

    def __init__(self, home: Path, n: int, serve_args: Sequence[str], *, db: str, schema: str,
                 start_timeout_s: float = 60.0) -> None:
        if n < 1:
            raise ValueError("at least one instance")
        self._servers: list[Server] = []
        try:
            for i in range(n):  # one after the other: the first creates the schema, the others find it
                self._servers.append(Server(home, [*serve_args, "--db", db, "--schema", schema],
                                            log=home.parent / f"{home.name}.instance{i}.log",
                                            start_timeout_s=start_timeout_s))
        except BaseException:
            self.close()
            raise
        self.urls: list[str] = [s.url for s in self._servers]

    @property
    def pids(self) -> list[int]:
        return [s.pid for s in self._servers]

    def cpu_s(self) -> list[float]:
        """Each instance's CPU seconds so far, in instance order."""
        return [process_cpu_s(pid) for pid in self.pids]

    def close(self) -> None:
        for server in self._servers:  # all told first, so they stop side by side
            if server.proc.poll() is None:
                server.proc.terminate()
        for server in self._servers:
            server.close()
        self._servers = []

    def __enter__(self) -> Instances:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class LockWaits:
    """Samples, every `every_s`, the backends of `schema`'s stores waiting on a lock; a thread."""

    def __init__(self, dsn: str, schema: str, *, every_s: float = 0.02) -> None:
        import psycopg

        self._conn = psycopg.connect(dsn, autocommit=True)
        self._app = f"convgraph/{schema}"  # PostgresStore's application_name
        citus = self._conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone()
        self._citus = citus is not None
        self._every = every_s
        self._stop = threading.Event()
        self.samples = 0
        self.waiting = 0  # samples in which at least one backend of ours waited on a lock
        self.waiters = 0  # backend-samples waiting: mean waiters = waiters / samples
        self.most = 0
        self.ungranted = 0  # pg_locks rows not granted, summed over samples
        self.worker_waits = 0  # citus_lock_waits rows, summed over samples (Citus only)
        self.by_event: Counter[str] = Counter()
        self.by_query: Counter[str] = Counter()  # what the waiters were running, schema left out
        self._thread = threading.Thread(target=self._run, name="lock-waits", daemon=True)

    def __enter__(self) -> LockWaits:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            if self._thread.is_alive():
                self._thread.join()
            self._conn.close()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.sample()

    def sample(self) -> None:
        """One look at who waits; public so a test or a bench can take one by hand."""
        rows = self._conn.execute(
            "SELECT wait_event, query FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND application_name = %s",
            [self._app]).fetchall()
        events = [str(r[0]) for r in rows]
        self.by_query.update(_shape(str(r[1])) for r in rows)
        ungranted = self._conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
        worker = None
        if self._citus:
            worker = self._conn.execute("SELECT count(*) FROM citus_lock_waits").fetchone()
        self.samples += 1
        self.waiting += bool(events)
        self.waiters += len(events)
        self.most = max(self.most, len(events))
        self.by_event.update(events)
        self.ungranted += int(ungranted[0]) if ungranted else 0
        self.worker_waits += int(worker[0]) if worker else 0

    def figures(self) -> dict[str, Any]:
        """The sampled waits, for the bench's JSON and table."""
        n = max(self.samples, 1)
        return {
            "lock_samples": self.samples,
            "lock_wait_share": round(self.waiting / n, 3),  # share of samples with a waiter
            "lock_waiters_mean": round(self.waiters / n, 3),
            "lock_waiters_max": self.most,
            "lock_waits_by_event": dict(self.by_event.most_common()),
            "lock_waits_by_query": dict(self.by_query.most_common(5)),
            "pg_locks_ungranted_mean": round(self.ungranted / n, 3),
            **({"citus_lock_waits_mean": round(self.worker_waits / n, 3)} if self._citus else {}),
        }


def _shape(query: str) -> str:
    """A waiting statement, short and without its schema: what kind of lock it waited for."""
    return re.sub(r'"?[a-z0-9_]+"?\.', "", " ".join(query.split()))[:70]
