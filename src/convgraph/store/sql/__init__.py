"""The SQL stores: one base that holds the logic (core, records, quarantine, index, witness,
blocks, forget) and two dialects (sqlite, postgres) that hold only what differs."""
