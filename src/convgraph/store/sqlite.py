"""The embedded default store, `SqliteStore` (store/sql/sqlite.py): kept at this path."""

from convgraph.store.sql.schema import SCHEMA_VERSION
from convgraph.store.sql.sqlite import SqliteNonces, SqliteStore, Synchronous

__all__ = ["SCHEMA_VERSION", "SqliteNonces", "SqliteStore", "Synchronous"]
