"""The server-scale store, `PostgresStore` (store/sql/postgres.py): kept at this path."""

from convgraph.store.sql.postgres import PostgresStore, listen
from convgraph.store.sql.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "PostgresStore", "listen"]
