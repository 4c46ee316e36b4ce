"""A transaction reads a conversation's `convs` row once, however many commits inside it write
the conversation (a sync message lands two sections in one): counted, on SQLite and PostgreSQL.
The counters stay right: arrivals, key count and token move with every commit, and a rolled
back transaction leaves nothing of its rows for the next one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_contract import chain, commit

import pg
from convgraph.store.postgres import PostgresStore
from convgraph.store.sql.forget import SqlStore
from convgraph.store.sqlite import SqliteStore


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    if request.param == "sqlite":
        opened: SqlStore = SqliteStore(tmp_path / "s.sqlite")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        opened = PostgresStore(dsn, schema=pg.fresh_schema(dsn))
    yield opened
    opened.close()


def _row_reads(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    run = store._x

    def counted(text: str, *args: Any) -> Any:
        # a read of the row, or PostgreSQL's hold of it in one upsert that returns it
        if text.startswith("SELECT conv, arrivals, token") or "RETURNING conv, arrivals, token" in text:
            reads.append(str(args[0]))
        return run(text, *args)

    monkeypatch.setattr(store, "_x", counted)
    return reads


def test_one_transaction_reads_each_conversation_row_once(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = chain(3, "a"), chain(2, "b")
    reads = _row_reads(store, monkeypatch)
    with store.transaction("a", "b"):
        commit(store, a[0])
        commit(store, b[0])
        commit(store, a[1], a[2])
        commit(store, b[1])
    assert sorted(reads) == ["a", "b"], reads
    assert store.count("a") == 3 and store.count("b") == 2
    assert store.keys_since("a", 0)[1] == 3  # the arrival counter moved with each commit
    token = store.conv_token("a")
    commit(store, *chain(4, "a")[3:])  # a transaction of its own reads the row again
    assert reads.count("a") == 2 and store.keys_since("a", 0)[1] == 4 and store.conv_token("a") != token


def test_a_rolled_back_transaction_leaves_no_row_for_the_next(store: SqlStore) -> None:
    a = chain(2, "a")
    commit(store, a[0])
    with contextlib.suppress(RuntimeError), store.transaction("a"):
        commit(store, a[1])
        raise RuntimeError("roll it back")
    assert store.count("a") == 1
    commit(store, a[1])
    assert store.count("a") == 2 and store.keys_since("a", 0)[1] == 2


def test_a_transaction_answers_the_token_of_a_row_it_holds_without_a_read(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = chain(2, "a")
    commit(store, a[0])
    before = store.conv_token("a")
    reads: list[str] = []
    run = store._q

    def counted(text: str, *args: Any, **named: Any) -> Any:
        reads.append(text)
        return run(text, *args, **named)

    monkeypatch.setattr(store, "_q", counted)
    with store.transaction("a"):
        commit(store, a[1])
        inside = store.conv_token("a")
        assert not [t for t in reads if "SELECT token" in t]
    assert inside != before and store.conv_token("a") == inside  # what committed
