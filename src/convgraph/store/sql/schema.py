"""The conversation tables of the SQL stores (schema version 6), written once for both dialects.

Every table of conversation data has `conv` first in its primary key and in every unique
key, so PostgreSQL partitions them `BY HASH (conv)` and Citus distributes them by `conv`,
co-located; nothing in them is shared across conversations but the `id` of `records`, the
store-wide arrival feed (`arrivals`), which no key includes. The other tables (`KEYED_TABLES`)
are keyed by their own column. Invariant: the two dialects create the same tables, columns,
keys and indexes; only the type names and the physical options differ.
"""

from __future__ import annotations

from typing import Final

SCHEMA_VERSION: Final = 6
# name: (columns, primary key); {conv} {text} {blob} {int} are the dialect's type names
CONV_TABLES: Final[dict[str, tuple[str, str]]] = {
    "convs": ("conv {conv}, arrivals {int}, token {int}, key_sum {blob}, key_count {int}", "conv"),
    "records": ("cid {blob}, conv {conv}, actor {blob}, seq {int}, wall {int}, counter {int},"
                " parents {blob}, data {blob}, id {int}, arrival {int}", "conv, cid"),
    "heads": ("conv {conv}, cid {blob}", "conv, cid"),
    "pending": ("cid {blob}, reason {text}, wall {int}, missing {blob}, data {blob}, conv {conv},"
                " added {int}", "conv, cid"),
    "pending_missing": ("missing {blob}, cid {blob}, conv {conv}", "conv, missing, cid"),
    "snapshots": ("conv {conv}, checkpoint {blob}, data {blob}", "conv"),
    "equivocations": ("a {blob}, b {blob}, conv {conv}", "conv, a, b"),
    "remembered": ("peer {blob}, conv {conv}, statement {blob}", "conv, peer"),
    "receipts": ("peer {blob}, conv {conv}, cid {blob}, time_ms {int}, statement {blob}", "conv, peer, cid"),
    "gossip": ("conv {conv}, key {blob}, cid {blob}, time_ms {int}, statement {blob}", "conv, key, cid"),
    "pending_checks": ("peer {blob}, conv {conv}, reason {text}, statements {blob}, pos {int}",
                       "conv, peer, pos"),
    "findings": ("id {blob}, conv {conv}, kind {text}, found {int}, summary {text}, cites {blob},"
                 " statements {blob}, bundle {blob}", "conv, id"),
    "finding_cites": ("conv {conv}, cid {blob}, finding {blob}", "conv, cid, finding"),
    "turn_line": ("conv {conv}, line {conv}, wall {int}, counter {int}, actor {blob}, cid {blob},"
                  " kind {text}", "conv, line, wall, counter, actor, cid"),
    "turn_targets": ("conv {conv}, target {blob}, wall {int}, counter {int}, actor {blob}, cid {blob},"
                     " kind {text}", "conv, target, wall, counter, actor, cid"),
    "turn_branches": ("conv {conv}, name {conv}, wall {int}, counter {int}, actor {blob}, cid {blob},"
                      " origin {blob}", "conv, name, wall, counter, actor, cid"),
    "turn_hidden": ("conv {conv}, cid {blob}", "conv, cid"),
    "turn_hidden_as_of": ("conv {conv}, cursor {int}", "conv"),
    "artifact_refs": ("conv {conv}, cid {blob}, record {blob}", "conv, cid, record"),
    "block_admitted": ("conv {conv}, cid {blob}", "conv, cid"),
    "forgotten": ("conv {conv}", "conv"),
}
# the tables that are not per conversation, and the column each is keyed (and distributed) by
KEYED_TABLES: Final = {"meta": "key", "blocks": "cid", "block_links": "manifest"}
INDEXES: Final = (
    ("records_order", "records", "conv, wall, counter, actor, cid"),
    ("records_chain", "records", "conv, actor, seq"),
    ("records_arrival", "records", "conv, arrival"),
    ("records_cid", "records", "cid"),
    ("records_id", "records", "id"),
    ("pending_due", "pending", "reason, wall"),
    ("pending_added", "pending", "added"),
    ("pending_cid", "pending", "cid"),
    ("pending_missing_of", "pending_missing", "missing"),
    ("pending_missing_cid", "pending_missing", "cid"),
    ("findings_order", "findings", "found, id"),
    ("artifact_refs_cid", "artifact_refs", "cid, conv"),
    ("block_admitted_cid", "block_admitted", "cid, conv"),
)
# the v5 names of indexes on the conversation tables (dropped with them when migrating)
V5_INDEXES: Final = ("records_order", "records_chain", "pending_due", "pending_missing_cid",
                     "pending_checks_of", "findings_order", "artifact_refs_cid", "block_admitted_cid")


def columns(table: str) -> list[str]:
    """The column names of a conversation table, in order."""
    return [c.split()[0] for c in CONV_TABLES[table][0].split(",")]


def conv_ddl(types: dict[str, str], suffix: str = "", rowid: frozenset[str] = frozenset()) -> list[str]:
    """One statement each: the conversation tables (each followed by `suffix`, but for the
    `rowid` ones, which get none) and their indexes, in `types`' type names."""
    out: list[str] = []
    for name, (cols, key) in CONV_TABLES.items():
        body = ", ".join(c.strip() + " NOT NULL" for c in cols.format(**types).split(","))
        after = "" if name in rowid else suffix
        out.append(f"CREATE TABLE IF NOT EXISTS {{s}}.{name} ({body}, PRIMARY KEY ({key})){after}")
    out += [f"CREATE INDEX IF NOT EXISTS {i} ON {{s}}.{t} ({c})" for i, t, c in INDEXES]
    return out
