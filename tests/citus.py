"""The PostgreSQL tests on a Citus coordinator: where each store table goes, and what Citus refused.

With `$CONVGRAPH_CITUS_DSN` set (scripts/test-citus sets it), tests/pg.py hands out that DSN
and conftest installs `place` as the store's DDL hook (`PostgresStore.on_create`): every schema
a test's store creates is distributed right after its tables are, inside the set-up transaction.
The rule, read from the tables themselves so that it follows the schema as it changes:

* a table with a `conv` column is distributed by `conv`, all of them co-located (one conversation's
  rows of every table on one shard, so no per-conversation join or write leaves it);
* a table with no `conv` is distributed by its own key (`OWN_KEYS`: artifact blocks by CID, a
  manifest's links by manifest, the nonce log by actor), co-located within its family;
* `meta` (a handful of rows, bounded) is a reference table, copied to every node.

Nothing is made an unbounded reference table. Citus refuses a table whose primary or unique
keys lack its distribution column, and an UPDATE of a distributed or reference table that calls
a volatile function: such a table stays a plain table on the coordinator, and `refused` records
which and why (scripts/test-citus prints it; docs/scale.md lists today's). `python tests/citus.py
DSN` creates one store on DSN, prints where every table went, and drops it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

ENV = "CONVGRAPH_CITUS_DSN"
# "distribute" (the rule below), or "none": every table stays a plain table on the coordinator,
# the baseline that tells a failure of distribution from a failure of Citus itself
MODE = os.environ.get("CONVGRAPH_CITUS_PLACE", "distribute")
SHARDS = int(os.environ.get("CONVGRAPH_CITUS_SHARDS", "4"))  # per table: enough to spread over 2 workers
CONV = "conv"
# tables without a conversation column: (distribution column, co-location family)
OWN_KEYS: dict[str, tuple[str, str]] = {
    "blocks": ("cid", "blocks"),
    "block_links": ("manifest", "blocks"),  # a manifest's links beside the manifest's block
    "http_nonces": ("actor", "nonces"),
}
REFERENCE = frozenset({"meta"})
# statements the store runs on a reference table that Citus may refuse at run time, not at
# create_reference_table: tried once, rolled back, right after placing the table. Version 6 has
# none: `meta` holds the schema version and the forget floor, written by no volatile function.
PROBES: dict[str, str] = {}


@dataclass(frozen=True)
class Refusal:
    """Citus would not place `table` as `wanted`: it stays a plain table on the coordinator."""

    table: str
    wanted: str
    reason: str

    def __str__(self) -> str:
        return f"{self.table}: {self.wanted} refused: {self.reason}"


refused: dict[str, Refusal] = {}  # by table name, over every schema placed in this process


def dsn() -> str | None:
    """The coordinator's DSN when the tests run on Citus, else None."""
    return os.environ.get(ENV) or None


def _why(exc: psycopg.Error) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    detail = exc.diag.message_detail
    return f"{first} ({detail})" if detail else first


def _tables(conn: psycopg.Connection[Any], schema: str) -> list[tuple[str, bool, str]]:
    """(name, has a conv column, Citus partition method or '' if unplaced) of each top-level
    table of `schema`, by name."""
    rows = conn.execute(
        "SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid"
        "  AND a.attname = %s AND NOT a.attisdropped),"
        " (SELECT p.partmethod FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY c.relname",
        [CONV, schema]).fetchall()
    return [(str(r[0]), bool(r[1]), str(r[2] or "")) for r in rows]


def _anchor(conn: psycopg.Connection[Any], schema: str, family: str) -> str | None:
    """A table of `schema` already distributed in `family`, to co-locate the next one with."""
    for name, has_conv, method in _tables(conn, schema):
        if method == "h" and ((family == CONV and has_conv) or OWN_KEYS.get(name, ("", ""))[1] == family):
            return sql.Identifier(schema, name).as_string(conn)
    return None


def _plan(name: str, has_conv: bool) -> tuple[str, str, str] | None:
    """(kind, column, family) for one table; None for a table this module knows no place for."""
    if name in REFERENCE:
        return ("reference", "", "")
    if has_conv:
        return ("distributed", CONV, CONV)
    if name in OWN_KEYS:
        column, family = OWN_KEYS[name]
        return ("distributed", column, family)
    return None


def place(conn: psycopg.Connection[Any], schema: str) -> None:
    """Distribute every table of `schema` not yet placed (the store's DDL hook); record refusals."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ["convgraph/citus/" + schema])
        conn.execute(sql.SQL("SET LOCAL citus.shard_count = {}").format(sql.Literal(SHARDS)))
        for name, has_conv, method in _tables(conn, schema):
            if method or MODE == "none":
                continue
            table = sql.Identifier(schema, name).as_string(conn)
            plan = _plan(name, has_conv)
            if plan is None:
                refused[name] = Refusal(name, "placement", "no conv column and no key in tests/citus.py OWN_KEYS")
                continue
            kind, column, family = plan
            wanted = "reference table" if kind == "reference" else f"distribution by {column}"
            anchor = _anchor(conn, schema, family) if kind == "distributed" else None
            try:
                with conn.transaction():  # a savepoint: a refusal leaves the table as it was
                    if kind == "reference":
                        conn.execute("SELECT create_reference_table(%s)", [table])
                    else:
                        conn.execute("SELECT create_distributed_table(%s, %s, colocate_with => %s)",
                                     [table, column, anchor or "default"])
                    _probe(conn, schema, name, table)
            except psycopg.Error as exc:
                lacking = _keys_lacking(conn, table, column) if column else []
                why = f"{', '.join(lacking)} lack{'s' * (len(lacking) == 1)} {column}" if lacking else _why(exc)
                refused[name] = Refusal(name, wanted, why)
                _keep_local(conn, schema, name, table)


def _keys_lacking(conn: psycopg.Connection[Any], table: str, column: str) -> list[str]:
    """The primary and unique keys of `table` without `column`: why Citus refuses to distribute it."""
    rows = conn.execute(
        "SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k WHERE k.conrelid = %s::regclass"
        " AND k.contype IN ('p', 'u') AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = k.conrelid"
        "  AND a.attname = %s AND a.attnum = ANY(k.conkey)) ORDER BY k.contype, k.conname",
        [table, column]).fetchall()
    return [str(r[0]) for r in rows]


def _keep_local(conn: psycopg.Connection[Any], schema: str, name: str, table: str) -> None:
    """Leave a refused table on the coordinator, known to Citus if it can be: a plain table
    cannot be joined with a distributed one, a Citus local table can (recursive planning), but
    Citus then refuses there what it refuses on distributed tables (the probe says)."""
    try:
        with conn.transaction():
            conn.execute("SELECT citus_add_local_table_to_metadata(%s)", [table])
            _probe(conn, schema, name, table)
    except psycopg.Error:
        pass  # then it stays a plain table: the tests show what that breaks


def _probe(conn: psycopg.Connection[Any], schema: str, name: str, table: str) -> None:
    """Run the store's statement that Citus may refuse on `name` at run time, and undo it."""
    if name not in PROBES:
        return
    with conn.transaction(force_rollback=True):
        conn.execute(PROBES[name].replace("{t}", table))


def install() -> None:
    """Make `place` the store's DDL hook for this process."""
    from convgraph.store.postgres import PostgresStore

    PostgresStore.on_create = place


def placement(conn: psycopg.Connection[Any], schema: str) -> list[tuple[str, str, str, int]]:
    """(table, how it is placed, distribution column, co-location id) per table of `schema`:
    'distributed', 'reference', 'coordinator' (a Citus local table) or 'plain' (unknown to Citus)."""
    rows = conn.execute(
        "SELECT c.relname, CASE WHEN p.partmethod = 'h' THEN 'distributed' WHEN p.repmodel = 't'"
        "  THEN 'reference' WHEN p.partmethod IS NOT NULL THEN 'coordinator' ELSE 'plain' END,"
        " CASE WHEN p.partmethod = 'h' THEN column_to_column_name(p.logicalrelid, p.partkey) END,"
        " p.colocationid"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY c.relname",
        [schema]).fetchall()
    return [(str(r[0]), str(r[1]), r[2] or "", int(r[3] or 0)) for r in rows]


def reltuples(conn: psycopg.Connection[Any], table: str) -> float:
    """The planner's row count of `table` (schema-qualified), where its statistics live: on the
    coordinator for a plain table, summed over the shards on the workers for a distributed one
    (its coordinator table is an empty shell; ANALYZE on it runs on the shards)."""
    one = "SELECT reltuples FROM pg_class WHERE oid = %s::regclass"
    if dsn() and conn.execute("SELECT 1 FROM pg_dist_partition WHERE logicalrelid = %s::regclass"
                              " AND partmethod = 'h'", [table]).fetchone():
        rows = conn.execute("SELECT result FROM run_command_on_shards(%s, %s)",
                            [table, one.replace("%s", "'%s'")]).fetchall()
        return sum(float(r[0]) for r in rows)
    row = conn.execute(one, [table]).fetchone()
    return float(row[0]) if row else 0.0


def report() -> list[str]:
    """One line per table Citus refused in this process, for the end of the test run."""
    return [str(r) for _, r in sorted(refused.items())]


def main(argv: list[str]) -> int:
    """Create one store (and nonce log) on the coordinator `argv[1]`, print where each table went."""
    from convgraph.server.pg_nonces import PostgresNonces
    from convgraph.store.postgres import PostgresStore

    target = argv[1] if len(argv) > 1 else dsn()
    if not target:
        print(f"usage: python tests/citus.py DSN (or set ${ENV})", file=sys.stderr)
        return 2
    install()
    schema = f"citus_layout_{os.getpid()}"
    try:
        PostgresStore(target, schema=schema).close()
        PostgresNonces(target, schema).close()
        with psycopg.connect(target, autocommit=True) as conn:
            rows = placement(conn, schema)
        width = max(len(r[0]) for r in rows)
        for table, kind, column, colocation in rows:
            where = f"{kind} by {column}, co-location {colocation}" if column else kind
            print(f"  {table:<{width}}  {where}")
        counts = {k: sum(kind == k for _, kind, _, _ in rows) for k in ("distributed", "reference", "coordinator", "plain")}
        why = "as asked (CONVGRAPH_CITUS_PLACE=none)" if MODE == "none" else "refused, see below"
        print(", ".join(f"{n} {k}" for k, n in counts.items()) + f" (coordinator, plain: {why})")
        for line in report():
            print("  REFUSED " + line)
    finally:
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("SET client_min_messages = warning")
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
