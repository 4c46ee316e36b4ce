"""A real PostgreSQL for the tests, found or started once per process; never a skip.

`dsn()` tries, in order: `$CONVGRAPH_TEST_PG`, the server this machine runs
(`postgresql://postgres@127.0.0.1:5432/test`), and a throwaway cluster made here with
`initdb` + `pg_ctl` (as an unprivileged user when we are root) and stopped at exit. If all
three fail it raises, saying why each did. With `$CONVGRAPH_CITUS_DSN` set it is that Citus
coordinator and nothing else (tests/citus.py). `fresh_schema(dsn)` names a schema unique to
this test process; `cleanup()` drops every schema it named and stops the cluster.
"""

from __future__ import annotations

import atexit
import itertools
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import citus

ENV = "CONVGRAPH_TEST_PG"
LOCAL = "postgresql://postgres@127.0.0.1:5432/test"


class _State:
    dsn: str | None = None
    cluster: tuple[Path, dict[str, Any]] | None = None  # data directory, how to run pg_ctl


_state = _State()
_made: list[tuple[str, str]] = []  # (dsn, schema)
_counter = itertools.count()


def reachable(dsn: str) -> str | None:
    """None when `dsn` accepts a connection, else why not."""
    try:
        with psycopg.connect(dsn, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


def dsn() -> str:
    """The DSN of a PostgreSQL server the tests may create schemas in: the Citus coordinator
    when `$CONVGRAPH_CITUS_DSN` is set (tests/citus.py), and then that one or none."""
    if _state.dsn is not None:
        return _state.dsn
    if citus.dsn():
        why = reachable(citus.dsn() or "")
        if why is not None:
            raise RuntimeError(f"${citus.ENV}: the Citus coordinator refuses connections: {why}")
        _state.dsn = citus.dsn()
        return _state.dsn or ""
    reasons: list[str] = []
    candidates = [(f"${ENV}", os.environ[ENV])] if os.environ.get(ENV) else []
    for name, candidate in [*candidates, ("the local server", LOCAL)]:
        why = reachable(candidate)
        if why is None:
            _state.dsn = candidate
            return candidate
        reasons.append(f"{name}: {why}")
    try:
        _state.dsn = _start_cluster()
    except (OSError, subprocess.CalledProcessError, RuntimeError) as exc:
        detail = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) and exc.stderr else exc
        reasons.append(f"a throwaway cluster (initdb + pg_ctl): {detail}")
        raise RuntimeError("no PostgreSQL for the tests; " + "; ".join(reasons)) from exc
    return _state.dsn


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_cluster() -> str:
    for tool in ("initdb", "pg_ctl"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not on PATH")
    base = Path(tempfile.mkdtemp(prefix="convgraph-pg-"))
    run: dict[str, Any] = {"capture_output": True, "text": True}
    if os.geteuid() == 0:  # initdb refuses root: run the cluster as an unprivileged user
        name = "postgres" if _has_user("postgres") else "nobody"
        user = pwd.getpwnam(name)
        os.chown(base, user.pw_uid, user.pw_gid)
        run |= {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "cwd": base}
    data, port = base / "data", _free_port()
    try:
        subprocess.run(["initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
                       check=True, **run)
        subprocess.run(
            ["pg_ctl", "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60", "start",
             "-o", f"-k {base} -c listen_addresses=127.0.0.1 -p {port} -c fsync=off"],  # throwaway: no fsync
            check=True, **run,
        )
        _state.cluster = (data, run)
        found = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        why = reachable(found)
        if why is not None:
            raise RuntimeError(f"the throwaway cluster started but refuses connections: {why}")
    except BaseException:
        _stop_cluster()
        shutil.rmtree(base, ignore_errors=True)
        raise
    atexit.register(_stop_cluster)
    return found


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _stop_cluster() -> None:
    if _state.cluster is None:
        return
    data, run = _state.cluster
    _state.cluster = None
    subprocess.run(["pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"], check=False, **run)
    shutil.rmtree(data.parent, ignore_errors=True)


def fresh_schema(dsn: str, *, suffix: str = "") -> str:
    """A schema name no other test (or test process) uses on `dsn`; dropped by `cleanup()`."""
    name = f"t_{os.getpid()}_{next(_counter)}_{secrets.token_hex(3)}{suffix}"
    _made.append((dsn, name))
    return name


def served_schema(dsn: str) -> str:
    """A `fresh_schema` for server processes to open. On Citus the store's DDL hook that
    distributes the tables lives in this process only, so the store and its nonce log are
    created here first; elsewhere the first server process creates them, as in production."""
    name = fresh_schema(dsn)
    if citus.dsn():
        from convgraph.server.pg_nonces import PostgresNonces
        from convgraph.store.postgres import PostgresStore

        PostgresStore(dsn, schema=name).close()
        PostgresNonces(dsn, name).close()
    return name


def emptied(dsn: str, schema: str) -> str:
    """`schema` (a `fresh_schema` a store has set up) as a fresh one reads: no row, every
    sequence back at its start. It keeps its tables, so the next store opens it in milliseconds
    where setting up a fresh schema takes about half a second (and dropping it a quarter of a
    second more at `cleanup`): for a property test that wants a fresh store every example.
    The meta rows go too: the store that opens it next writes them again, as on a fresh schema."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL client_min_messages = warning")
        found = conn.execute(
            "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'S')", [schema]).fetchall()
        assert found, f"no schema {schema!r} to empty"
        for name, kind in found:
            if kind == "r":
                conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, name)))
            else:
                conn.execute("SELECT setval(%s::regclass, 1, false)", [sql.Identifier(schema, name).as_string(conn)])
    return schema


def cleanup() -> None:
    """Drop the schemas this process named (one per statement), then stop any cluster."""
    by_server: dict[str, list[str]] = {}
    for server, name in _made:
        by_server.setdefault(server, []).append(name)
    _made.clear()
    for server, names in by_server.items():
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '10s'")
            conn.execute("SET client_min_messages = warning")
            for name in names:  # one a statement: a schema holds some 300 relations (partitions), each a lock
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
    _stop_cluster()
