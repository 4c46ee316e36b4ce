"""Where the server's CPU goes on a tiny sync: the sync route's work, in one thread, under cProfile.

Clients (in-memory replicas, one key each) write one turn to their own conversation and one
to a shared one, then sync both, as `bench/load.py` does; every message goes through what
`POST /v1/sync` runs after the signature check (the nonce log, decoding with the gate's
admission, the stateless responder), in this thread, so cProfile sees all of it. No HTTP:
this is for finding costs, `load.py` measures them.

    python bench/profile_sync_server.py                      # SQLite, 50 clients, 20 rounds
    python bench/profile_sync_server.py --db postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--db", default=None)
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--no-profile", action="store_true", help="server CPU per sync, unprofiled")
    parser.add_argument("--count-sql", action="store_true",
                        help="SQLite: also count the statements (and COMMITs) the server runs per sync")
    args = parser.parse_args(argv)
    from convgraph import Config, Replica, SigningKey
    from convgraph.server.app import _nonce_log
    from convgraph.server.gate import Gate
    from convgraph.server.sync_endpoint import SyncEndpoint
    from convgraph.sync import auth
    from convgraph.sync.initiator import synchronize
    from convgraph.sync.live import Hub
    from convgraph.sync.peer import ReplicaPeer

    keys = [SigningKey.generate() for _ in range(args.clients)]
    profile = cProfile.Profile(time.process_time)
    spent = [0.0]
    from convgraph.server.access import ANY, Access

    access = Access(writers={ANY: frozenset(k.public for k in keys)})
    with tempfile.TemporaryDirectory() as tmp:
        schema = "prof_" + uuid.uuid4().hex[:8]
        if args.db:
            from convgraph.server.pg_nonces import PostgresNonces
            from convgraph.store.postgres import PostgresStore

            server = Replica(PostgresStore(args.db, schema=schema), SigningKey.generate())
            nonces: auth.NonceLog = PostgresNonces(args.db, schema)
        else:
            server = Replica.open(Path(tmp) / "server", synchronous="FULL")
            nonces = _nonce_log(server)
        # wired as create_app wires them: grouped nonce commits, per-conversation locks, pushes in parts
        from convgraph.server.app import ServerConfig
        from convgraph.server.conv_locks import ConvLocks
        from convgraph.server.nonces import grouped

        verifier = auth.Verifier(grouped(nonces))
        gate = Gate(server.reader(), access, ConvLocks())
        endpoint = SyncEndpoint(server, gate, verifier, Hub(), server.clock, budget=4 << 20,
                                inline_bytes=16 << 10, decoders=2, per_key=4,
                                part=ServerConfig().part_records)
        clients = [Replica.in_memory(k, config=Config(legacy_writes=True)) for k in keys]

        def transport(key: SigningKey) -> object:
            def send(body: bytes) -> bytes:
                headers = auth.sign(key, "POST", "/v1/sync", body, now_ms=int(time.time() * 1000),
                                    nonce=os.urandom(16).hex())
                signed = verifier.check("POST", "/v1/sync", body, headers, now_ms=int(time.time() * 1000))
                t = time.process_time()
                if not args.no_profile:
                    profile.enable()  # the server's part only: the clients' work is not the question
                try:
                    return endpoint._answer_whole(signed, body)
                finally:
                    profile.disable()
                    spent[0] += time.process_time() - t

            return send

        def sync_all() -> None:
            for c, key in zip(clients, keys, strict=True):
                own = f"own-{key.public.hex()[:8]}"
                c.say(own, "user", "turn")
                c.say("shared", "assistant", f"{own} turn")
                synchronize(ReplicaPeer(c), transport(key), [own, "shared"],  # type: ignore[arg-type]
                            salts=lambda: os.urandom(8))

        sync_all()  # warm: every conversation exists
        statements = {"all": 0, "COMMIT": 0}
        shapes: collections.Counter[str] = collections.Counter()

        def traced(text: str) -> None:
            statements["all"] += 1
            statements["COMMIT"] += text.strip().upper() == "COMMIT"
            # the statement's shape: the literals SQLite's trace expands, taken out again
            shapes[re.sub(r"X'[0-9A-Fa-f]*'|'[^']*'|\b\d+\b", "?", " ".join(text.split()))[:100]] += 1

        if args.count_sql and not args.db:  # the clients are in memory: every statement is the server's
            server.store._db.set_trace_callback(traced)  # type: ignore[attr-defined]
        elif args.count_sql:  # PostgreSQL: each statement the server's cursors send (a batch counts once)
            import psycopg

            def counting(method: Any) -> Any:
                def run(cursor: Any, query: Any, *rest: Any, **named: Any) -> Any:
                    traced(query if isinstance(query, str) else query.as_string(cursor.connection))
                    return method(cursor, query, *rest, **named)

                return run

            psycopg.Cursor.execute = counting(psycopg.Cursor.execute)  # type: ignore[method-assign]
            psycopg.Cursor.executemany = counting(psycopg.Cursor.executemany)  # type: ignore[method-assign]
        profile.create_stats()
        profile = cProfile.Profile(time.process_time)  # CPU, not wall: an fsync wait is no cost here
        spent[0] = 0.0
        for _ in range(args.rounds):
            sync_all()
        if args.no_profile:
            print(f"{spent[0] / (args.rounds * args.clients) * 1000:.2f} ms server CPU per sync (unprofiled)")
            if args.count_sql:
                syncs = args.rounds * args.clients
                print(f"{statements['all'] / syncs:.1f} SQL statements,"
                      f" {statements['COMMIT'] / syncs:.2f} COMMITs per sync")
                for shape, n in shapes.most_common(args.top):
                    print(f"  {n / syncs:5.2f}  {shape}")
            server.close()
            return 0
        stats = pstats.Stats(profile)
        syncs = args.rounds * args.clients
        print(f"{syncs} syncs, {stats.total_tt / syncs * 1000:.2f} ms server CPU per sync (cProfile)")
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
        server.close()
        if args.db:
            import psycopg

            with psycopg.connect(args.db, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
