"""A store written by schema version 5 opens as version 6, migrated in place (issue 31 §3).

The fixture `fixtures/v5_store.sqlite` is a real replica's store made by the version-5 code
(`fixtures/make_v5_store.py` says how); `v5_store.json` lists what it held. The SQLite test
opens a copy of it; the PostgreSQL test makes a version-5 schema with that version's DDL, fills
every table with the fixture's rows, and opens it. Both check that every record, head, sync
key, quarantined record, equivocation, finding, block and forgotten conversation is still
there, and that the conversations' sync cursors continue where they were.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from test_contract import KEYS

import pg
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import sign_record
from convgraph.store.base import Store
from convgraph.store.postgres import PostgresStore
from convgraph.store.rows import WriteSet, key_summary
from convgraph.store.sql import v5
from convgraph.store.sql.schema import CONV_TABLES, SCHEMA_VERSION
from convgraph.store.sqlite import SqliteStore

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = json.loads((FIXTURES / "v5_store.json").read_text())


def _cids(hexes: list[str]) -> list[CID]:
    return [CID(bytes.fromhex(h)) for h in hexes]


def _check_everything_is_there(store: Store) -> None:
    for conv, want in EXPECTED["convs"].items():
        held = store.sync_keys(conv)
        assert sorted(bytes(c).hex() for c, _ in store.records(conv)) == want["cids"]  # with bytes
        assert store.count(conv) == want["count"] == len(held)
        assert [bytes(c).hex() for c in store.heads(conv)] == want["heads"]
        assert [[w, d.hex()] for w, d in held] == want["keys"]
        assert store.key_summary(conv) == key_summary(held)
        assert sorted(store.keys_since(conv, 0)[0]) == held
        # the conversation goes on from the store-wide cursor: a v5 cursor misses nothing later
        assert store.cursor(conv) == EXPECTED["cursor"] and store.since(EXPECTED["cursor"], conv)[0] == []
        snap = store.snapshot(conv)
        assert (None if snap is None else bytes(snap[0]).hex()) == want["snapshot"]
    waiting = store.pending_get(_cids(EXPECTED["pending"]))
    assert sorted(bytes(c).hex() for c in waiting) == EXPECTED["pending"]
    assert store.pending_stats()[0] == len(EXPECTED["pending"])
    assert [[bytes(a).hex(), bytes(b).hex()] for a, b in store.equivocations()] == EXPECTED["equivocations"]
    assert [[bytes(f.id).hex(), f.conv] for f in store.findings()] == EXPECTED["findings"]
    assert sorted(store.forgotten(EXPECTED["forgotten"] + ["never"])) == EXPECTED["forgotten"]
    assert sorted(bytes(c).hex() for c in store.block_cids()) == EXPECTED["blocks"]
    assert store.cursor() == EXPECTED["cursor"]  # the store-wide feed too


def _check_syncs_continue(store: Store) -> None:
    """A record that arrives after the upgrade is the next one of its conversation's cursor."""
    conv = sorted(EXPECTED["convs"])[0]
    before, token = store.cursor(conv), store.conv_token(conv)
    assert before == EXPECTED["cursor"]  # what a client that read v5's `cursor()` holds
    heads = store.heads(conv)
    late = sign_record(KEYS[2], conv=conv, seq=1, hlc=Hlc(1_900_000_000_000, 0), parents=heads,
                       kind="user_message", payload={"content": "after the upgrade"})
    store.commit(WriteSet(records=[late]))
    assert store.since(before, conv) == ([(late.cid, late.data)], before + 1)
    assert store.keys_since(conv, before) == ([(late.hlc.wall_ms, late.cid.digest)], before + 1)
    assert store.conv_token(conv) != token
    assert store.key_summary(conv) == key_summary(store.sync_keys(conv))
    assert store.heads(conv) == [late.cid]


def test_a_version_5_sqlite_store_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "replica.sqlite"
    shutil.copyfile(FIXTURES / "v5_store.sqlite", path)
    store = SqliteStore(path)
    try:
        _check_everything_is_there(store)
        _check_syncs_continue(store)
    finally:
        store.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert not {t for t in tables if t.endswith("_v5")}
    finally:
        db.close()
    SqliteStore(path).close()  # and it opens again, as it is


def _v5_schema(dsn: str, schema: str) -> None:
    """A version-5 PostgreSQL schema (that version's DDL), holding every row of the fixture."""
    src = sqlite3.connect(FIXTURES / "v5_store.sqlite")
    ident = sql.Identifier(schema).as_string()
    ddl = v5.PG_DDL + v5.PG_DDL_V2 + v5.PG_DDL_V3 + v5.PG_DDL_V4 + v5.PG_DDL_V5
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(f"CREATE SCHEMA {ident}")
        for statement in filter(str.strip, ddl.split(";")):
            conn.execute(statement.replace("{s}", ident))
        conn.execute(f"INSERT INTO {ident}.meta VALUES ('schema_version', 5),"
                     f" ('version', nextval('{ident}.version_seq'))")
        tables = [r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            if table in ("meta", "http_nonces"):
                continue
            cols = [r[1] for r in src.execute(f"PRAGMA table_info({table})")]
            if table == "blocks":
                cols.remove("id")  # PostgreSQL's blocks are keyed by cid alone
            rows = src.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
            if rows:
                marks = ", ".join(["%s"] * len(cols))
                with conn.cursor() as cur:
                    cur.executemany(f"INSERT INTO {ident}.{table} ({', '.join(cols)}) OVERRIDING SYSTEM VALUE"
                                    f" VALUES ({marks})", rows)
        for table in ("records", "pending", "pending_checks"):
            conn.execute(f"SELECT setval(pg_get_serial_sequence('{ident}.{table}', 'id'),"
                         f" (SELECT coalesce(max(id), 0) + 1 FROM {ident}.{table}), false)")
        for key, value in src.execute("SELECT key, value FROM meta WHERE key != 'schema_version'"):
            conn.execute(f"INSERT INTO {ident}.meta VALUES (%s, %s)", [key, int(value)])
    src.close()


def test_a_version_5_postgres_schema_is_migrated_in_place(pg_dsn: str) -> None:
    schema = pg.fresh_schema(pg_dsn)
    _v5_schema(pg_dsn, schema)
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        _check_everything_is_there(store)
        _check_syncs_continue(store)
    finally:
        store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        kinds = dict(conn.execute(
            "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'p')", [schema]).fetchall())
        others = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE %s", [schema + "_v5_%"])
        assert others.fetchone() == (0,)
    assert kinds["records"] == "p" and kinds["convs"] == "p" and kinds["blocks"] == "r"
    PostgresStore(pg_dsn, schema=schema).close()  # and it opens again, as it is


def as_version_5(conn: psycopg.Connection[Any], schema: str) -> None:
    """Turn a version-6 schema back into what version 5 made of the same rows (its DDL, its
    columns): how the tests of older versions make one before cutting it down further."""
    ident = sql.Identifier(schema).as_string(conn)
    held: dict[str, list[dict[str, Any]]] = {}
    with conn.transaction():
        for table in CONV_TABLES:
            cur = conn.execute(f"SELECT * FROM {ident}.{table}")
            names = [d.name for d in cur.description or ()]
            held[table] = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
            conn.execute(f"DROP TABLE {ident}.{table} CASCADE")
        conn.execute(f"DROP SEQUENCE {ident}.records_id")
        ddl = v5.PG_DDL + v5.PG_DDL_V2 + v5.PG_DDL_V3 + v5.PG_DDL_V4 + v5.PG_DDL_V5
        for statement in filter(str.strip, ddl.split(";")):
            conn.execute(statement.replace("{s}", ident))
        order = {"pending": "added", "pending_checks": "pos"}  # their v5 ids: the same order
        for table, found in held.items():
            if table == "convs" or not found:
                continue
            cols = [r[0] for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
                " ORDER BY ordinal_position", [schema, table])]
            rows = found
            if table in order:
                rows = [{**r, "id": i + 1} for i, r in enumerate(sorted(found, key=lambda r: r[order[table]]))]
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {ident}.{table} ({', '.join(cols)}) OVERRIDING SYSTEM VALUE"
                                f" VALUES ({', '.join(['%s'] * len(cols))})", [[r[c] for c in cols] for r in rows])
        for table in ("records", "pending", "pending_checks"):
            conn.execute(f"SELECT setval(pg_get_serial_sequence('{ident}.{table}', 'id'),"
                         f" (SELECT coalesce(max(id), 0) + 1 FROM {ident}.{table}), false)")
        conn.execute(f"INSERT INTO {ident}.meta VALUES ('version', nextval('{ident}.version_seq'))")
        conn.execute(f"UPDATE {ident}.meta SET value = 5 WHERE key = 'schema_version'")


def sqlite_as_version_5(path: Path) -> None:
    """Turn a version-6 SQLite file back into what version 5 made of the same rows."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        held: dict[str, list[dict[str, Any]]] = {}
        for table in CONV_TABLES:
            cur = db.execute(f"SELECT * FROM {table}")
            names = [d[0] for d in cur.description]
            held[table] = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
            db.execute(f"DROP TABLE {table}")
        for statement in filter(str.strip, v5.SQLITE.split(";")):
            db.execute(statement)
        order = {"pending": "added", "pending_checks": "pos"}  # their v5 ids: the same order
        for table, found in held.items():
            if table == "convs" or not found:
                continue
            cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            rows = found
            if table in order:
                rows = [{**r, "id": i + 1} for i, r in enumerate(sorted(found, key=lambda r: r[order[table]]))]
            db.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                           [[r[c] for c in cols] for r in rows])
        db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
        db.execute("COMMIT")
    finally:
        db.close()
