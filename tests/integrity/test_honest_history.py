"""No false alarms: any interleaving of honest writes, syncs (through a server and between
clients), compactions and restarts raises no finding on any replica (docs/integrity.md §2.3).

Every replica is a real SQLite replica; syncs run the full state machine in process, each
side signing statements and judging the other's, gossip included.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph import Replica
from convgraph.sync.local import sync_replicas

CONV = "c"
NAMES = ("server", "a", "b")

ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(NAMES), st.sampled_from(["user", "assistant"])),
        st.tuples(st.just("sync"), st.sampled_from(NAMES[1:]), st.just("server")),
        st.tuples(st.just("sync"), st.just("a"), st.just("b")),
        st.tuples(st.just("compact"), st.sampled_from(NAMES), st.just("")),
        st.tuples(st.just("restart"), st.sampled_from(NAMES), st.just("")),
    ),
    min_size=1, max_size=18,
)


@settings(max_examples=60 if IN_CI else 20, deadline=None)
@given(script=ops)
def test_any_interleaving_of_honest_syncs_compactions_and_restarts_raises_no_finding(
    script: list[tuple[str, str, str]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        homes = {n: Path(tmp) / n for n in NAMES}
        replicas = {n: Replica.open(homes[n]) for n in NAMES}
        try:
            for i, (op, who, arg) in enumerate(script):
                r = replicas[who]
                if op == "write":
                    r.say(CONV, arg, f"turn {i}")
                elif op == "sync":
                    report = sync_replicas(r, replicas[arg], [CONV])
                    assert not report.findings, (script[: i + 1], report.findings)
                elif op == "compact" and r.store.count(CONV):
                    r.checkpoint(CONV, compact=True)
                elif op == "restart":
                    r.close()
                    replicas[who] = Replica.open(homes[who])
            for name, r in replicas.items():
                assert r.findings() == [], (name, script)
        finally:
            for r in replicas.values():
                r.close()
