"""The server-scale store, `PostgresStore` (store/sql/postgres.py): kept at this path."""

from convgraph.store.sql.postgres import SCHEMA_VERSION, PostgresStore, listen

__all__ = ["SCHEMA_VERSION", "PostgresStore", "listen"]
