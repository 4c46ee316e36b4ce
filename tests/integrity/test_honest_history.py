"""No false alarms: any interleaving of honest writes, syncs (through a server and between
clients, either side initiating), checkpoints, compactions, restarts and the passing of time
raises no finding on any replica (docs/integrity.md §2.3).

Every replica is a real SQLite replica; syncs run the full state machine in process, each
side signing statements and judging the other's, gossip included. Time is a manual clock
that the script moves on, by less than `ORDER_SLACK_MS` or by more (so the statements of one
signer are ordered, and a rollback or deletion could be proven), and each replica reads it
with a skew of its own, as honest clocks that disagree within the allowances do.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph import ManualClock, Replica
from convgraph.integrity.statement import ORDER_SLACK_MS
from convgraph.sync.local import sync_replicas

CONV = "c"
NAMES = ("server", "a", "b")
SKEW_MS = 20_000  # each replica's clock is off by at most this: within FRESHNESS_MS and the drift allowed

ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(NAMES), st.sampled_from(["user", "assistant"])),
        st.tuples(st.just("sync"), st.sampled_from(NAMES[1:]), st.just("server")),  # to the hub, most often
        st.tuples(st.just("sync"), st.sampled_from(NAMES), st.sampled_from(NAMES)).filter(lambda t: t[1] != t[2]),
        st.tuples(st.just("checkpoint"), st.sampled_from(NAMES), st.just("")),
        st.tuples(st.just("compact"), st.sampled_from(NAMES), st.just("")),
        st.tuples(st.just("restart"), st.sampled_from(NAMES), st.just("")),
        st.tuples(st.just("tick"), st.just(""), st.sampled_from(["300", str(ORDER_SLACK_MS + 1), "30000"])),
    ),
    min_size=8, max_size=30,  # shorter scripts seldom reach a state in which a lie could be proven
)


class Skewed:
    """One replica's view of the shared clock: off by a fixed amount, moving as it moves."""

    def __init__(self, base: ManualClock, skew_ms: int) -> None:
        self.base, self.skew_ms = base, skew_ms

    def __call__(self) -> int:
        return self.base() + self.skew_ms


@settings(max_examples=60 if IN_CI else 40, deadline=None)
@given(script=ops, skews=st.lists(st.integers(-SKEW_MS, SKEW_MS), min_size=len(NAMES), max_size=len(NAMES)))
def test_any_interleaving_of_honest_syncs_compactions_and_restarts_raises_no_finding(
    script: list[tuple[str, str, str]], skews: list[int],
) -> None:
    base = ManualClock()
    clocks = {n: Skewed(base, s) for n, s in zip(NAMES, skews, strict=True)}
    with tempfile.TemporaryDirectory() as tmp:
        homes = {n: Path(tmp) / n for n in NAMES}
        replicas = {n: Replica.open(homes[n], clock=clocks[n]) for n in NAMES}
        try:
            for i, (op, who, arg) in enumerate(script):
                if op == "tick":
                    base.advance(int(arg))
                    continue
                r = replicas[who]
                if op == "write":  # two turns: what a compaction covers is more than its checkpoint adds
                    r.say(CONV, arg, f"turn {i}")
                    r.say(CONV, "assistant" if arg == "user" else "user", f"answer {i}")
                elif op == "sync":
                    report = sync_replicas(r, replicas[arg], [CONV])
                    assert not report.findings, (script[: i + 1], report.findings)
                elif op in ("checkpoint", "compact") and r.store.count(CONV):
                    r.checkpoint(CONV, compact=op == "compact")
                elif op == "restart":
                    r.close()
                    replicas[who] = Replica.open(homes[who], clock=clocks[who])
            base.advance(ORDER_SLACK_MS + 1)  # a last round, later than everything: each judges every other
            for x in NAMES:
                for y in NAMES:
                    if x != y:
                        assert not sync_replicas(replicas[x], replicas[y], [CONV]).findings, (x, y, script)
            for name, r in replicas.items():
                assert r.findings() == [], (name, script)
        finally:
            for r in replicas.values():
                r.close()
