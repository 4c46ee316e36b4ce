"""What only the SQLite store promises about forgetting: a new file reclaims pages on its own
(`auto_vacuum = INCREMENTAL`), `forget` leaves no byte of the conversation in the file or its
WAL and shrinks them, `vacuum` switches a file made before that on, and a process killed in
the middle of a `forget` leaves the store as it was."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from test_contract import chain, commit, pend, rec
from test_migration import sqlite_as_version_5

from convgraph.core.record import Record
from convgraph.store.sqlite import SCHEMA_VERSION, SqliteStore

SECRET = "tell-no-one-7f3a9c"


def _secret_chain(n: int, conv: str = "c1") -> list[Record]:
    out: list[Record] = []
    for i in range(n):
        out.append(rec(conv, i + 1, 1_700_000_000_000 + i, tuple(out[-1:]), text=f"{SECRET} {i} " + "x" * 400))
    return out


def _on_disk(path: Path) -> bytes:
    wal = Path(f"{path}-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def _size(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def test_a_new_store_vacuums_incrementally_in_wal(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite")
    try:
        assert store._q("PRAGMA auto_vacuum")[0][0] == 2  # INCREMENTAL
        assert store._q("PRAGMA journal_mode")[0][0] == "wal"
    finally:
        store.close()


def test_forget_leaves_no_byte_of_the_conversation_and_shrinks_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path)
    try:
        # interleaved: pages hold rows of both conversations, so deleted cells must be zeroed
        secret, kept = _secret_chain(300), chain(300, "c2")
        for a, b in zip(secret, kept, strict=True):
            commit(store, a, b)
        waiting = rec("c1", 400, 1_700_000_100_000, (rec("c1", 399, 1_700_000_099_000),), text=SECRET + " waits")
        commit(store, pending_put=[pend(waiting, missing=waiting.parents)])
        assert SECRET.encode() in _on_disk(path)
        store._q("PRAGMA wal_checkpoint(TRUNCATE)")  # the data in the file, not in the WAL
        size = _size(path)
        store.forget("c1")
        assert SECRET.encode() not in _on_disk(path)
        assert size - _size(path) >= 300 * 400  # at least the forgotten text: no free page kept
        assert store._q("PRAGMA freelist_count")[0][0] == 0
        assert Path(f"{path}-wal").stat().st_size == 0
        assert store.count("c2") == 300 and store.conversations() == ["c2"]
    finally:
        store.close()
    again = SqliteStore(path)  # the file reopens whole, the tombstone kept
    try:
        assert again.forgotten(["c1"]) == {"c1"} and again.count() == 300
    finally:
        again.close()


def test_vacuum_switches_an_older_file_to_auto_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path)
    store.close()
    db = sqlite3.connect(path, isolation_level=None)  # as a store made before version 5 was
    db.execute("PRAGMA auto_vacuum = NONE")
    db.execute("VACUUM")
    assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    db.close()
    empty = _size(path)  # the tables and indexes of an empty store
    store = SqliteStore(path)
    try:
        commit(store, *_secret_chain(200), *chain(50, "c2"))
        store._q("PRAGMA wal_checkpoint(TRUNCATE)")
        size = _size(path)
        store.forget("c1")  # no auto-vacuum yet: the freed pages stay in the file
        assert _size(path) >= size
        store.vacuum()
        assert store._q("PRAGMA auto_vacuum")[0][0] == 2
        assert _size(path) - empty < (size - empty) / 2 and SECRET.encode() not in _on_disk(path)
        assert store.count() == 50
    finally:
        store.close()


def test_a_process_killed_mid_forget_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path)
    secret = _secret_chain(20)
    waiting = rec("c1", 40, 1_700_000_100_000, (rec("c1", 39, 1_700_000_099_000),), text="waits")
    commit(store, *secret, *chain(5, "c2"), pending_put=[pend(waiting, missing=waiting.parents)])
    store.close()
    # the records are deleted before the heads: die there, inside the transaction
    script = textwrap.dedent(f"""
        import os
        import convgraph.store.sqlite as s
        run = s.SqliteStore._x
        def die(self, text, *args):
            if text.startswith("DELETE FROM {{s}}.heads"):
                os._exit(9)
            return run(self, text, *args)
        s.SqliteStore._x = die
        s.SqliteStore({str(path)!r}).forget("c1")
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, check=False, timeout=60)
    assert done.returncode == 9
    store = SqliteStore(path)
    try:
        assert store.count("c1") == 20 and store.forgotten(["c1"]) == set()
        assert store.conversations() == ["c1", "c2"] and store.pending_stats()[0] == 1
        assert store.records("c1") == [(r.cid, r.data) for r in secret]
    finally:
        store.close()


def test_a_version_4_file_gets_its_tombstones_table(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SqliteStore(path)
    commit(store, *chain(3), *chain(2, "c2"))
    store.close()
    sqlite_as_version_5(path)
    db = sqlite3.connect(path, isolation_level=None)  # what version 4 made: no `forgotten`
    db.execute("DROP TABLE forgotten")
    db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    db.close()
    store = SqliteStore(path)
    try:
        assert store._q("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        store.forget("c1")
        assert store.forgotten(["c1", "c2"]) == {"c1"} and store.conversations() == ["c2"]
    finally:
        store.close()
