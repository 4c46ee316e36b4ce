"""What one tiny sync costs a real `convgraph serve` per HTTP exchange, and how many it makes.

`load.py`'s scenario at a smaller scale: each client writes one turn to its own conversation
and one to `shared`, then syncs both over HTTP. With `--together` the clients run at once
(threads, as in `load.py`), otherwise they take turns, so the server's work per sync is seen
without queueing. Reported: the server's CPU (from /proc, as `load.py` takes it) per sync and
per exchange, how many syncs took 1, 2, 3… exchanges, the mean bytes each way of each exchange
(a second INITIATE shows as an exchange as small as the first), and the server's CPU per
`GET /v1/health`, the floor of any request. Figures go in bench/README.md (issue 31 §2).

    PYTHONPATH=src python bench/sync_exchanges.py                  # 10 clients in turn, 20 rounds
    PYTHONPATH=src python bench/sync_exchanges.py --together --seconds 6
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from _common import Server, process_cpu_s


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=20, help="rounds of syncs, clients in turn")
    parser.add_argument("--together", action="store_true", help="clients at once, for --seconds")
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args(argv)
    from convgraph import Config, Replica, SigningKey
    from convgraph.core.keys import actor_text
    from convgraph.sync.http import HttpRemote
    from convgraph.sync.initiator import synchronize
    from convgraph.sync.peer import ReplicaPeer

    keys = [SigningKey.generate() for _ in range(args.clients)]
    took: collections.Counter[int] = collections.Counter()
    sizes: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="convgraph-exchanges-") as tmp:
        home = Path(tmp)
        serve_args = [a for k in keys for a in ("--allow", f"{actor_text(k.public)}=*")]
        with Server(home / "server", serve_args, log=home / "server.log") as server:
            url = server.url
            clients = [Replica.in_memory(k, config=Config(legacy_writes=True)) for k in keys]
            remotes = [HttpRemote(url, k, timeout_s=120) for k in keys]

            def one_sync(i: int) -> None:
                replica, remote = clients[i], remotes[i]
                own = f"own-{keys[i].public.hex()[:8]}"
                replica.say(own, "user", "turn")
                replica.say("shared", "assistant", f"{own} turn")
                seen: list[tuple[int, int]] = []

                def send(message: bytes) -> bytes:
                    reply = remote.exchange(message)
                    seen.append((len(message), len(reply)))
                    return reply

                synchronize(ReplicaPeer(replica), send, [own, "shared"], salts=lambda: os.urandom(8))
                with lock:
                    took[len(seen)] += 1
                    for n, pair in enumerate(seen):
                        sizes[n].append(pair)

            for i in range(len(keys)):  # warm: every conversation exists, not counted
                one_sync(i)
            took.clear()
            sizes.clear()
            cpu0 = process_cpu_s(server.pid)
            if args.together:
                _together(one_sync, len(keys), args.seconds)
            else:
                for _ in range(args.rounds):
                    for i in range(len(keys)):
                        one_sync(i)
            time.sleep(0.3)  # the last reply's bookkeeping
            cpu = process_cpu_s(server.pid) - cpu0
            cpu_health = _health_cpu(url, server.pid)
            for remote in remotes:
                remote.close()
    syncs, exchanges = sum(took.values()), sum(k * v for k, v in took.items())
    how = f"at once, {args.seconds:g} s" if args.together else f"in turn, {args.rounds} rounds"
    mode = f"{args.clients} clients {how}"
    print(f"{mode}: {syncs} syncs, {exchanges / syncs:.2f} exchanges a sync {dict(sorted(took.items()))}")
    print(f"server CPU {cpu / syncs * 1000:.2f} ms a sync, {cpu / exchanges * 1000:.2f} ms an exchange; "
          f"GET /v1/health {cpu_health * 1000:.2f} ms a request")
    for n in sorted(sizes):
        pairs = sizes[n]
        print(f"  exchange {n + 1}: {len(pairs)} syncs, sent {sum(a for a, _ in pairs) / len(pairs):.0f} B, "
              f"reply {sum(b for _, b in pairs) / len(pairs):.0f} B (means)")
    return 0


def _together(one_sync: Callable[[int], None], clients: int, seconds: float) -> None:
    """Every client syncing in a loop of its own until `seconds` have passed."""
    deadline = time.monotonic() + seconds

    def loop(i: int) -> None:
        while time.monotonic() < deadline:
            one_sync(i)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _health_cpu(url: str, pid: int, n: int = 400) -> float:
    """The server's CPU seconds per unsigned `GET /v1/health`, over `n` requests on one connection."""
    import httpx

    with httpx.Client() as http:
        http.get(url + "/v1/health")
        cpu0 = process_cpu_s(pid)
        for _ in range(n):
            http.get(url + "/v1/health")
        time.sleep(0.3)
        return (process_cpu_s(pid) - cpu0) / n


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
