"""The DDL of schema version 5 in both dialects, kept for what opens an older store: a store of
version 1 to 4 is first brought to version 5 (the tables it lacks, filled from its records),
then migrated to version 6 (store/sql/migrate.py). The tests make version-5 stores from it.
Invariant: this is exactly what version 5 created; it never changes.
"""

from __future__ import annotations

from typing import Final

# SQLite: one script (an older file runs it whole, then is migrated)
SQLITE: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    cid BLOB NOT NULL UNIQUE,
    conv TEXT NOT NULL,
    actor BLOB NOT NULL,
    seq INTEGER NOT NULL,
    wall INTEGER NOT NULL,
    counter INTEGER NOT NULL,
    parents BLOB NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS records_order ON records (conv, wall, counter, actor, cid);
CREATE INDEX IF NOT EXISTS records_chain ON records (actor, conv, seq);
CREATE TABLE IF NOT EXISTS heads (conv TEXT NOT NULL, cid BLOB NOT NULL,
    PRIMARY KEY (conv, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending (
    id INTEGER PRIMARY KEY,
    cid BLOB NOT NULL UNIQUE,
    reason TEXT NOT NULL,
    wall INTEGER NOT NULL,
    missing BLOB NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS pending_due ON pending (reason, wall);
CREATE TABLE IF NOT EXISTS pending_missing (missing BLOB NOT NULL, cid BLOB NOT NULL,
    PRIMARY KEY (missing, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (conv TEXT PRIMARY KEY, checkpoint BLOB NOT NULL,
    data BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS equivocations (a BLOB NOT NULL, b BLOB NOT NULL, conv TEXT NOT NULL,
    PRIMARY KEY (a, b)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS http_nonces (actor BLOB NOT NULL, nonce TEXT NOT NULL, expires INTEGER NOT NULL,
    PRIMARY KEY (actor, nonce)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS http_nonces_expiry ON http_nonces (expires);
CREATE TABLE IF NOT EXISTS remembered (peer BLOB NOT NULL, conv TEXT NOT NULL, statement BLOB NOT NULL,
    PRIMARY KEY (peer, conv));
CREATE TABLE IF NOT EXISTS receipts (peer BLOB NOT NULL, conv TEXT NOT NULL, cid BLOB NOT NULL,
    time_ms INTEGER NOT NULL, statement BLOB NOT NULL, PRIMARY KEY (peer, conv, cid));
CREATE TABLE IF NOT EXISTS gossip (conv TEXT NOT NULL, key BLOB NOT NULL, cid BLOB NOT NULL,
    time_ms INTEGER NOT NULL, statement BLOB NOT NULL, PRIMARY KEY (conv, key, cid));
CREATE TABLE IF NOT EXISTS pending_checks (id INTEGER PRIMARY KEY, peer BLOB NOT NULL, conv TEXT NOT NULL,
    reason TEXT NOT NULL, statements BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS pending_checks_of ON pending_checks (peer, conv, id);
CREATE TABLE IF NOT EXISTS findings (id BLOB PRIMARY KEY, conv TEXT NOT NULL, kind TEXT NOT NULL,
    found INTEGER NOT NULL, summary TEXT NOT NULL, cites BLOB NOT NULL, statements BLOB NOT NULL,
    bundle BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS findings_order ON findings (found, id);
CREATE TABLE IF NOT EXISTS finding_cites (conv TEXT NOT NULL, cid BLOB NOT NULL, finding BLOB NOT NULL,
    PRIMARY KEY (conv, cid, finding)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_line (conv TEXT NOT NULL, line TEXT NOT NULL, wall INTEGER NOT NULL,
    counter INTEGER NOT NULL, actor BLOB NOT NULL, cid BLOB NOT NULL, kind TEXT NOT NULL,
    PRIMARY KEY (conv, line, wall, counter, actor, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_targets (conv TEXT NOT NULL, target BLOB NOT NULL, wall INTEGER NOT NULL,
    counter INTEGER NOT NULL, actor BLOB NOT NULL, cid BLOB NOT NULL, kind TEXT NOT NULL,
    PRIMARY KEY (conv, target, wall, counter, actor, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_branches (conv TEXT NOT NULL, name TEXT NOT NULL, wall INTEGER NOT NULL,
    counter INTEGER NOT NULL, actor BLOB NOT NULL, cid BLOB NOT NULL, origin BLOB NOT NULL,
    PRIMARY KEY (conv, name, wall, counter, actor, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_hidden (conv TEXT NOT NULL, cid BLOB NOT NULL,
    PRIMARY KEY (conv, cid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blocks (id INTEGER PRIMARY KEY, cid BLOB NOT NULL UNIQUE, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS artifact_refs (conv TEXT NOT NULL, cid BLOB NOT NULL, record BLOB NOT NULL,
    PRIMARY KEY (conv, cid, record)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS artifact_refs_cid ON artifact_refs (cid, conv);
CREATE TABLE IF NOT EXISTS block_admitted (conv TEXT NOT NULL, cid BLOB NOT NULL,
    PRIMARY KEY (conv, cid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS block_admitted_cid ON block_admitted (cid, conv);
CREATE TABLE IF NOT EXISTS block_links (manifest BLOB NOT NULL, chunk BLOB NOT NULL,
    PRIMARY KEY (manifest, chunk)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS block_links_chunk ON block_links (chunk, manifest);
CREATE TABLE IF NOT EXISTS turn_hidden_as_of (conv TEXT PRIMARY KEY, cursor INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS forgotten (conv TEXT PRIMARY KEY) WITHOUT ROWID;
"""

# PostgreSQL: the tables each version had, and their DDL by the version that added them
PG_TABLES_V1: Final = frozenset({"meta", "records", "heads", "pending", "pending_missing", "snapshots",
                               "equivocations"})
PG_TABLES_V2: Final = PG_TABLES_V1 | {"remembered", "receipts", "gossip", "pending_checks", "findings",
                                  "finding_cites"}
PG_TABLES_V3: Final = PG_TABLES_V2 | {"turn_line", "turn_targets", "turn_branches", "turn_hidden",
                                  "turn_hidden_as_of"}
PG_TABLES_V4: Final = PG_TABLES_V3 | {"blocks", "artifact_refs", "block_links", "block_admitted"}
PG_TABLES_V5: Final = PG_TABLES_V4 | {"forgotten"}
# conv is COLLATE "C": code-point order, as Python's sorted() and SQLite's BINARY give
PG_DDL: Final = """
CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value bigint NOT NULL);
CREATE SEQUENCE IF NOT EXISTS {s}.version_seq;
CREATE TABLE IF NOT EXISTS {s}.records (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cid bytea NOT NULL UNIQUE, conv text COLLATE "C" NOT NULL, actor bytea NOT NULL, seq bigint NOT NULL,
    wall bigint NOT NULL, counter bigint NOT NULL, parents bytea NOT NULL, data bytea NOT NULL);
CREATE INDEX IF NOT EXISTS records_order ON {s}.records (conv, wall, counter, actor, cid);
CREATE INDEX IF NOT EXISTS records_chain ON {s}.records (actor, conv, seq);
CREATE TABLE IF NOT EXISTS {s}.heads (conv text COLLATE "C" NOT NULL, cid bytea NOT NULL,
    PRIMARY KEY (conv, cid));
CREATE TABLE IF NOT EXISTS {s}.pending (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cid bytea NOT NULL UNIQUE, reason text NOT NULL, wall bigint NOT NULL, missing bytea NOT NULL,
    data bytea NOT NULL);
CREATE INDEX IF NOT EXISTS pending_due ON {s}.pending (reason, wall);
CREATE TABLE IF NOT EXISTS {s}.pending_missing (missing bytea NOT NULL, cid bytea NOT NULL,
    PRIMARY KEY (missing, cid));
CREATE INDEX IF NOT EXISTS pending_missing_cid ON {s}.pending_missing (cid);
CREATE TABLE IF NOT EXISTS {s}.snapshots (conv text COLLATE "C" PRIMARY KEY, checkpoint bytea NOT NULL,
    data bytea NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.equivocations (a bytea NOT NULL, b bytea NOT NULL,
    conv text COLLATE "C" NOT NULL, PRIMARY KEY (a, b));
"""
PG_DDL_V2: Final = """
CREATE TABLE IF NOT EXISTS {s}.remembered (peer bytea NOT NULL, conv text COLLATE "C" NOT NULL,
    statement bytea NOT NULL, PRIMARY KEY (peer, conv));
CREATE TABLE IF NOT EXISTS {s}.receipts (peer bytea NOT NULL, conv text COLLATE "C" NOT NULL,
    cid bytea NOT NULL, time_ms bigint NOT NULL, statement bytea NOT NULL, PRIMARY KEY (peer, conv, cid));
CREATE TABLE IF NOT EXISTS {s}.gossip (conv text COLLATE "C" NOT NULL, key bytea NOT NULL, cid bytea NOT NULL,
    time_ms bigint NOT NULL, statement bytea NOT NULL, PRIMARY KEY (conv, key, cid));
CREATE TABLE IF NOT EXISTS {s}.pending_checks (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    peer bytea NOT NULL, conv text COLLATE "C" NOT NULL, reason text NOT NULL, statements bytea NOT NULL);
CREATE INDEX IF NOT EXISTS pending_checks_of ON {s}.pending_checks (peer, conv, id);
CREATE TABLE IF NOT EXISTS {s}.findings (id bytea PRIMARY KEY, conv text COLLATE "C" NOT NULL,
    kind text NOT NULL, found bigint NOT NULL, summary text NOT NULL, cites bytea NOT NULL,
    statements bytea NOT NULL, bundle bytea NOT NULL);
CREATE INDEX IF NOT EXISTS findings_order ON {s}.findings (found, id);
CREATE TABLE IF NOT EXISTS {s}.finding_cites (conv text COLLATE "C" NOT NULL, cid bytea NOT NULL,
    finding bytea NOT NULL, PRIMARY KEY (conv, cid, finding));
"""
PG_DDL_V4: Final = """
CREATE TABLE IF NOT EXISTS {s}.blocks (cid bytea PRIMARY KEY, data bytea NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.artifact_refs (conv text COLLATE "C" NOT NULL, cid bytea NOT NULL,
    record bytea NOT NULL, PRIMARY KEY (conv, cid, record));
CREATE INDEX IF NOT EXISTS artifact_refs_cid ON {s}.artifact_refs (cid, conv);
CREATE TABLE IF NOT EXISTS {s}.block_admitted (conv text COLLATE "C" NOT NULL, cid bytea NOT NULL,
    PRIMARY KEY (conv, cid));
CREATE INDEX IF NOT EXISTS block_admitted_cid ON {s}.block_admitted (cid, conv);
CREATE TABLE IF NOT EXISTS {s}.block_links (manifest bytea NOT NULL, chunk bytea NOT NULL,
    PRIMARY KEY (manifest, chunk));
CREATE INDEX IF NOT EXISTS block_links_chunk ON {s}.block_links (chunk, manifest);
"""
PG_DDL_V5: Final = """
CREATE TABLE IF NOT EXISTS {s}.forgotten (conv text COLLATE "C" PRIMARY KEY);
"""
PG_DDL_V3: Final = """
CREATE TABLE IF NOT EXISTS {s}.turn_line (conv text COLLATE "C" NOT NULL, line text COLLATE "C" NOT NULL,
    wall bigint NOT NULL, counter bigint NOT NULL, actor bytea NOT NULL, cid bytea NOT NULL,
    kind text NOT NULL, PRIMARY KEY (conv, line, wall, counter, actor, cid));
CREATE TABLE IF NOT EXISTS {s}.turn_targets (conv text COLLATE "C" NOT NULL, target bytea NOT NULL,
    wall bigint NOT NULL, counter bigint NOT NULL, actor bytea NOT NULL, cid bytea NOT NULL,
    kind text NOT NULL, PRIMARY KEY (conv, target, wall, counter, actor, cid));
CREATE TABLE IF NOT EXISTS {s}.turn_branches (conv text COLLATE "C" NOT NULL, name text COLLATE "C" NOT NULL,
    wall bigint NOT NULL, counter bigint NOT NULL, actor bytea NOT NULL, cid bytea NOT NULL,
    origin bytea NOT NULL, PRIMARY KEY (conv, name, wall, counter, actor, cid));
CREATE TABLE IF NOT EXISTS {s}.turn_hidden (conv text COLLATE "C" NOT NULL, cid bytea NOT NULL,
    PRIMARY KEY (conv, cid));
CREATE TABLE IF NOT EXISTS {s}.turn_hidden_as_of (conv text COLLATE "C" PRIMARY KEY, cursor bigint NOT NULL);
"""
