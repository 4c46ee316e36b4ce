"""Stores: the `Store` protocol, an in-memory twin and the embedded SQLite default."""
