"""`who_can` costs the length of the chain, not the length of the history.

Run from the project root:

    .venv/bin/python bench/authority.py            # 10k, 100k and 1M records (~3 minutes)
    .venv/bin/python bench/authority.py --quick    # 10k and 100k

Builds the authority projection (`projections/authority.py`) of one rooted conversation with
1,000 grants and revocations among 20 members, spread through the history, then N turns by
the members on top. Every row is the median of 2,000 `who_can` calls at the current heads,
for a member whose chain from the genesis is 1, 4 or 8 grants long, beside the baseline
the issue names: the history's size. "cold" is the first answer after a grant or revocation
arrives, when the effective revocations (§6.1) are found again: it grows with the number of
revocations, not with the history. The records are built without signatures: the
projection never verifies (ingest does, before it), and signing a million records would
measure PyNaCl. The `apply` rate of the whole build is printed too (it is what ingest adds).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import environment, on_snapshot, own_cpu_s, status_kib

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import Record
from convgraph.core.rooted import conv_id
from convgraph.projections import authority as au

T0 = 1_700_000_000_000
NONCE = bytes(16)
CALLS = 2_000


def actor(i: int) -> bytes:
    return (i + 1).to_bytes(32, "big")


class History:
    """Unsigned records of one rooted conversation, applied as they are made."""

    def __init__(self) -> None:
        self.owner = actor(0)
        self.conv = conv_id(self.owner, NONCE)
        self.state = au.AuthorityState()
        self.seq: dict[bytes, int] = {}
        self.last: dict[bytes, CID] = {}
        self.head: CID | None = None
        self.tick = 0
        self.add(self.owner, "genesis", {"nonce": NONCE})

    def add(self, who: bytes, kind: str, payload: dict[str, Any]) -> CID:
        self.tick += 1
        seq = self.seq.get(who, 0) + 1
        parents = tuple(sorted({p for p in (self.head, self.last.get(who)) if p is not None}))
        cid = CID.of_record(self.tick.to_bytes(8, "big") + who)
        record = Record(self.conv, who, seq, Hlc(T0 + self.tick, 0), parents, kind, payload, (), None,
                        bytes(64), b"", cid)
        au.apply(self.state, record)
        self.seq[who], self.last[who], self.head = seq, cid, cid
        return cid


def build(turns: int, authority_records: int, seed: int = 1) -> tuple[History, float, dict[int, bytes]]:
    """A history of `turns` turns with `authority_records` grants and revocations spread through it."""
    rng = random.Random(seed)
    h = History()
    started = time.perf_counter()
    # a delegation ladder: member i is granted admin by member i-1, so depth grows to 8
    chains = {1: actor(1)}
    h.add(h.owner, "grant", {"grantee": actor(1), "rights": ["admin", "read", "write"]})
    for depth in range(2, 9):
        h.add(actor(depth - 1), "grant", {"grantee": actor(depth), "rights": ["admin", "read", "write"]})
        chains[depth] = actor(depth)
    members = [actor(i) for i in range(1, 21)]
    for i in range(9, 21):
        h.add(h.owner, "grant", {"grantee": actor(i), "rights": ["read", "write"]})
    made = 8 + 12
    every = max(1, turns // max(1, authority_records - made))
    for n in range(turns):
        if made < authority_records and n % every == 0:
            target = rng.choice(members[10:])  # churn among the plain members, never the ladder
            kind = "revocation" if made % 2 else "grant"
            h.add(h.owner, kind, {"grantee": target, "rights": ["write"] if kind == "revocation" else
                                  ["read", "write"]})
            made += 1
        h.add(rng.choice(members[:9]), "user_message", {"content": "t"})
    return h, time.perf_counter() - started, chains


def median_us(h: History, who: bytes, *, cold: bool = False, calls: int = CALLS) -> float:
    """Median µs of a `who_can`; `cold`: right after a grant or revocation arrived (every cache
    dropped, so the effective revocations of §6.1 are found again first)."""
    heads = (h.head,) if h.head is not None else ()
    samples = []
    for _ in range(min(20, calls) if cold else calls):
        if cold:
            h.state.forget_effective()
        t = time.perf_counter()
        answer = au.who_can(h.state, who, "write", heads, T0 + 10**12)
        samples.append(time.perf_counter() - t)
        assert answer.allowed
    return statistics.median(samples) * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    return on_snapshot(__file__, run, argv)


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k and 100k records only")
    parser.add_argument("--smoke", action="store_true", help="1k records, 100 grants: checks that it runs")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    sizes = (10_000, 100_000) if args.quick else (10_000, 100_000, 1_000_000)
    authority, calls = 1_000, CALLS
    if args.smoke:  # its figures mean nothing: tests/bench/test_smoke.py runs it
        sizes, authority, calls = (1_000,), 100, 50
    env = environment(())
    print(f"convgraph who_can benchmark: {env}")
    rows = []
    for size in sizes:
        cpu = own_cpu_s()
        h, build_s, chains = build(size, authority)
        grants = len(h.state.kept.get("grant", ())) + len(h.state.revocations)
        row: dict[str, Any] = {"records": size + grants + 1, "authority_records": grants,
                               "apply_per_s": round((size + grants) / build_s),
                               "rss_kib": status_kib(), "build_cpu_s": round(own_cpu_s() - cpu, 1)}
        for depth in (1, 4, 8):
            row[f"who_can_us_chain_{depth}"] = round(median_us(h, chains[depth], calls=calls), 1)
        cold_us = median_us(h, chains[8], cold=True, calls=calls)
        row["first_answer_after_a_grant_ms"] = round(cold_us / 1000, 2)
        rows.append(row)
        print(json.dumps(row))
        del h
    print(f"\n{'records':>10} {'auth':>5} {'chain 1 µs':>11} {'chain 4 µs':>11} {'chain 8 µs':>11} "
          f"{'cold ms':>8} {'apply/s':>9}")
    for r in rows:
        print(f"{r['records']:>10,} {r['authority_records']:>5} {r['who_can_us_chain_1']:>11} "
              f"{r['who_can_us_chain_4']:>11} {r['who_can_us_chain_8']:>11} "
              f"{r['first_answer_after_a_grant_ms']:>8} {r['apply_per_s']:>9,}")
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
