"""Nonces shared by every server instance on one PostgreSQL database.

A replayed request may reach another instance than the first one did; a per-process
`MemoryNonces` would accept it there. This log keeps nonces in a table of the store's
schema, and lets the primary key decide: the first insert wins, and every later one
finds the row. Expired rows are swept now and then. `first_use_many` records a batch in one
transaction, for the server's group commit (`server/nonces.py`); `first_use_in` records one
inside the store's own transaction, when the store is in the same schema. Invariant: within its window, a
nonce is accepted once across all instances.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from convgraph.errors import ConvgraphError, MissingExtraError, StoreError
from convgraph.store.base import Store
from convgraph.store.sql.postgres import PostgresStore

try:  # the [postgres] extra: without it, a typed error that says what to install
    import psycopg
    from psycopg import sql
    from psycopg_pool import ConnectionPool
except ModuleNotFoundError as exc:
    raise MissingExtraError("postgres", "the PostgreSQL store", module=exc.name) from exc


class PostgresNonces:
    """A `NonceLog` in table `<schema>.http_nonces`."""

    def __init__(self, dsn: str, schema: str, *, sweep_every: int = 1000) -> None:
        self._schema, self._table = schema, sql.Identifier(schema, "http_nonces")
        self._pool = ConnectionPool(dsn, min_size=1, max_size=4, kwargs={"autocommit": True}, open=True)
        self._sweep_every, self._count, self._lock = sweep_every, 0, threading.Lock()
        with self._pool.connection() as conn:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            conn.execute(sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (actor bytea NOT NULL, nonce text NOT NULL,"
                " expires bigint NOT NULL, PRIMARY KEY (actor, nonce))").format(self._table))
            if PostgresStore.on_create is not None:  # the store's DDL hook places this table too
                PostgresStore.on_create(conn, schema)

    def first_use(self, actor: bytes, nonce: str, expires_ms: int, now_ms: int) -> bool:
        try:
            with self._pool.connection() as conn:
                with self._lock:
                    self._count += 1
                    sweep = self._count % self._sweep_every == 0
                if sweep:
                    conn.execute(sql.SQL("DELETE FROM {} WHERE expires < %s").format(self._table), (now_ms,))
                cur = conn.execute(sql.SQL(
                    "INSERT INTO {} AS n VALUES (%s, %s, %s) ON CONFLICT (actor, nonce) DO UPDATE"
                    " SET expires = excluded.expires WHERE n.expires < %s").format(self._table),
                    (actor, nonce, expires_ms, now_ms))
                return cur.rowcount == 1  # inserted, or an expired row reused
        except psycopg.Error as exc:
            raise StoreError(f"nonce log unavailable: {exc}") from exc

    def first_use_many(self, uses: Sequence[tuple[bytes, str, int, int]]) -> list[bool | ConvgraphError]:
        """`first_use` of each, in order, in one transaction: one commit for the batch
        (`server/nonces.py` groups concurrent requests into it)."""
        if len(uses) == 1:  # one statement in autocommit commits it alone: no BEGIN, no COMMIT to send
            return [self.first_use(*uses[0])]
        out: list[bool | ConvgraphError] = []
        try:
            with self._pool.connection() as conn, conn.transaction():
                if uses:
                    with self._lock:
                        self._count += len(uses)
                        sweep = self._count >= self._sweep_every
                        self._count %= self._sweep_every
                    if sweep:
                        conn.execute(sql.SQL("DELETE FROM {} WHERE expires < %s").format(self._table),
                                     (uses[-1][3],))
                insert = sql.SQL("INSERT INTO {} AS n VALUES (%s, %s, %s) ON CONFLICT (actor, nonce)"
                                 " DO UPDATE SET expires = excluded.expires WHERE n.expires < %s"
                                 ).format(self._table)
                for actor, nonce, expires_ms, now_ms in uses:
                    out.append(conn.execute(insert, (actor, nonce, expires_ms, now_ms)).rowcount == 1)
        except psycopg.Error as exc:
            raise StoreError(f"nonce log unavailable: {exc}") from exc
        return out

    def joins(self, store: Store) -> bool:
        return isinstance(store, PostgresStore) and store.schema == self._schema

    def first_use_in(self, store: Store, actor: bytes, nonce: str, expires_ms: int, now_ms: int) -> bool:
        """`first_use` on the connection of `store`'s open transaction: committed with it."""
        assert isinstance(store, PostgresStore)
        assert store.in_transaction()
        with self._lock:
            self._count += 1
            sweep = self._count >= self._sweep_every
            if sweep:
                self._count = 0
        if sweep:
            store._x("DELETE FROM {s}.http_nonces WHERE expires < %s", now_ms)
        return bool(store._x(
            "INSERT INTO {s}.http_nonces AS n VALUES (%s, %s, %s) ON CONFLICT (actor, nonce)"
            " DO UPDATE SET expires = excluded.expires WHERE n.expires < %s",
            actor, nonce, expires_ms, now_ms).rowcount == 1)

    def close(self) -> None:
        self._pool.close()
