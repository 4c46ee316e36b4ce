"""On Citus, a store's tables are distributed as tests/citus.py says, and its rows spread by conversation.

Collected only when the tests run on a Citus coordinator (scripts/test-citus sets
`$CONVGRAPH_CITUS_DSN`). Every table with a conversation column is distributed by `conv` in
one co-location group; the others by their own keys; `meta` is a reference table; no table
is left on the coordinator. Records written into many conversations land on both workers,
each conversation's rows of every table on one shard.
"""

from __future__ import annotations

import psycopg
import pytest

import citus
import pg
from convgraph import Replica, SigningKey
from convgraph.server.pg_nonces import PostgresNonces
from convgraph.store.postgres import PostgresStore

CONVERSATIONS = 16


@pytest.fixture
def schema(pg_dsn: str) -> str:
    name = pg.fresh_schema(pg_dsn)
    PostgresStore(pg_dsn, schema=name).close()
    PostgresNonces(pg_dsn, name).close()
    return name


def test_every_table_is_placed_and_none_is_left_on_the_coordinator(pg_dsn: str, schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        placed = {table: (kind, column, group) for table, kind, column, group in citus.placement(conn, schema)}
    left = {t: citus.refused.get(t) for t, (kind, _, _) in placed.items() if kind in ("coordinator", "plain")}
    assert not left, "\n".join(str(why or f"{t}: not placed") for t, why in sorted(left.items()))
    by_conv = {t for t, (kind, column, _) in placed.items() if column == citus.CONV}
    assert by_conv and len({placed[t][2] for t in by_conv}) == 1, "the conversation tables are not co-located"
    for table, (column, family) in citus.OWN_KEYS.items():
        if table in placed:
            assert placed[table][:2] == ("distributed", column), table
            assert {placed[t][2] for t, (_, f) in citus.OWN_KEYS.items() if f == family and t in placed} \
                == {placed[table][2]}, f"{table} is not co-located with its family {family}"
    assert all(placed[t][0] == "reference" for t in citus.REFERENCE if t in placed)


def test_conversations_spread_over_the_workers_each_on_one_shard(pg_dsn: str, schema: str) -> None:
    with Replica(PostgresStore(pg_dsn, schema=schema), SigningKey.generate()) as replica:
        convs = [f"room-{i}" for i in range(CONVERSATIONS)]
        for conv in convs:
            for n in range(3):
                replica.say(conv, "user", f"message {n} of {conv}")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for table in ("records", "heads", "turn_line"):
            name = psycopg.sql.Identifier(schema, table).as_string(conn)
            nodes = {conn.execute(
                "SELECT nodeport FROM citus_shards WHERE shardid = get_shard_id_for_distribution_column(%s::regclass, %s::text)",
                [name, conv]).fetchone() for conv in convs}
            assert None not in nodes, f"{table} is not distributed"
            assert len(nodes) == 2, f"{table}: {CONVERSATIONS} conversations all on the nodes {nodes}"
            for conv in convs:  # the shard the router picks holds all of the conversation's rows
                shard = conn.execute("SELECT get_shard_id_for_distribution_column(%s::regclass, %s::text)", [name, conv]).fetchone()
                count = conn.execute(
                    psycopg.sql.SQL("SELECT count(*) FROM {} WHERE conv = %s").format(psycopg.sql.Identifier(schema, table)),
                    [conv]).fetchone()
                assert shard is not None and count is not None and count[0] > 0, (table, conv)
