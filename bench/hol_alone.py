"""hol.py's push alone: one message of chained orphans through the server's part loop, with
no other client, in one whole part and in parts (issue 31 §1).

Ingests N orphans (hol.py's attack) through `_Peer.ingest` of `server/sync_endpoint.py` into a
fresh store (SQLite, or a PostgreSQL schema with `--db`), once with parts as large as the
message and once with parts of `--part`, and prints each one's wall and process CPU seconds:
what landing in parts adds to a push by itself. Another tree's code is measured by running
this script with that tree's src/ first on PYTHONPATH (bench/README.md, `hol.py`).

    PYTHONPATH=$PWD/src .venv/bin/python bench/hol_alone.py --records 20000
    PYTHONPATH=/tmp/base/src .venv/bin/python bench/hol_alone.py --records 20000 --db postgresql://…
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from _common import drop_schema
from hol import _orphans


def push_alone(records: list[bytes], owner_seed: bytes, attacker: bytes, owner_records: list[bytes],
               conv: str, part: int, db: str | None, tmp: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds of one push of `records` in parts of `part`; the report's length."""
    from convgraph import Replica, SigningKey
    from convgraph.core.keys import actor_text
    from convgraph.server.access import Access
    from convgraph.server.conv_locks import ConvLocks
    from convgraph.server.gate import Gate
    from convgraph.server.sync_endpoint import _Peer
    from convgraph.store.postgres import PostgresStore

    schema = "hol_alone_" + uuid.uuid4().hex[:10]
    store = PostgresStore(db, schema=schema) if db else None
    server = Replica(store, SigningKey.generate()) if store else Replica.open(tmp / f"server-{part}")
    try:
        server.ingest(owner_records)
        access = Access.from_rules([f"{actor_text(SigningKey(owner_seed).public)}={conv}"])
        peer = _Peer(server, Gate(server.reader(), access, ConvLocks()), attacker, lambda _: None, part=part)
        wall, cpu = time.perf_counter(), time.process_time()
        out = peer.ingest(conv, records)
        return time.perf_counter() - wall, time.process_time() - cpu, len(out.report)
    finally:
        server.close()
        if db and (why := drop_schema(db, schema)):
            print(why, file=sys.stderr)


def run(argv: Sequence[str]) -> int:
    from convgraph import Replica, SigningKey

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--part", type=int, default=100, help="records a part (the server's part_records)")
    parser.add_argument("--db", default=None, help="postgresql:// URL: a PostgreSQL schema, else SQLite")
    args = parser.parse_args(argv)
    owner_seed, attacker_seed = b"\1" * 32, b"\2" * 32
    owner = Replica.in_memory(SigningKey(owner_seed))
    conv = owner.create("attacked")
    owner.write(conv, "grant", {"grantee": SigningKey(attacker_seed).public, "rights": ["read"]})
    for i in range(50):
        owner.say(conv, "user", f"history {i}")
    orphans, _ = _orphans(attacker_seed, conv, owner.records(conv)[0].cid, args.records)
    held = [r.data for r in owner.records(conv)]
    with tempfile.TemporaryDirectory(prefix="convgraph-hol-alone-") as tmp:
        for part in (len(orphans), args.part):
            wall, cpu, n = push_alone(orphans, owner_seed, SigningKey(attacker_seed).public, held, conv,
                                      part, args.db, Path(tmp))
            print(f"{args.records} orphans, parts of {part}: wall {wall:.2f} s, cpu {cpu:.2f} s"
                  f" ({n} reported)")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
