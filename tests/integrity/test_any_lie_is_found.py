"""Any single lie is found: after any honest history, a server that is restored from its own
earlier copy (rollback, deletion) or that shows a second client a copy of itself (split view)
is caught within one sync after the honest parties next talk, with a finding whose bundle
proves it (docs/integrity.md §4, §5).

Replicas are real SQLite replicas on one manual clock, moved on 2 s (past the order slack)
after every step, so statements are ordered by time without sleeping.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph import ManualClock, Replica
from convgraph.integrity.evidence import verify_bundle
from convgraph.sync.local import sync_replicas

CONV = "c"
STEP_MS = 2_000

honest = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(["server", "a", "b"])),
        st.tuples(st.just("sync"), st.sampled_from(["a", "b"])),
    ),
    max_size=8,
)


class World:
    """A server and two clients; `copy_server` and `restore_server` are the liar's tools."""

    def __init__(self, root: Path) -> None:
        self.root, self.clock = root, ManualClock()
        self.homes = {n: root / n for n in ("server", "a", "b")}
        self.r = {n: Replica.open(h, clock=self.clock) for n, h in self.homes.items()}
        self.n = 0

    def tick(self) -> None:
        self.clock.advance(STEP_MS)

    def write(self, who: str) -> None:
        self.n += 1
        self.r[who].say(CONV, "user", f"turn {self.n}")
        self.tick()

    def sync(self, who: str, with_: str = "server") -> list[str]:
        report = sync_replicas(self.r[who], self.r[with_], [CONV])
        self.tick()
        return [f.kind for f in report.findings]

    def copy_server(self, name: str) -> Path:
        self.r["server"].close()
        where = self.root / name
        shutil.copytree(self.homes["server"], where)
        self.r["server"] = Replica.open(self.homes["server"], clock=self.clock)
        return where

    def restore_server(self, copy: Path) -> None:
        self.r["server"].close()
        shutil.rmtree(self.homes["server"])
        shutil.copytree(copy, self.homes["server"])
        self.r["server"] = Replica.open(self.homes["server"], clock=self.clock)

    def close(self) -> None:
        for r in self.r.values():
            r.close()


def _proved(world: World, who: str, kinds: set[str]) -> bool:
    found = [f for f in world.r[who].findings(CONV) if f.kind in kinds]
    return bool(found) and all(verify_bundle(f.bundle).ok for f in found)


@settings(max_examples=25 if IN_CI else 8, deadline=None)
@given(prefix=honest, lie=st.sampled_from(["restored_copy", "split_view"]), first=st.sampled_from(["a", "b"]))
def test_any_single_lie_after_any_honest_history_is_found(
    prefix: list[tuple[str, str]], lie: str, first: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        w = World(Path(tmp))
        try:
            for op, who in prefix:
                w.write(who) if op == "write" else w.sync(who)
            w.write("a")  # both clients have talked to the server before the lie
            w.sync("a")
            w.sync("b")
            copy = w.copy_server("copy")
            w.write("a")  # what the lie will hide: a's new turn, receipted to a, stated to b
            w.sync("a")
            w.sync("b")
            if lie == "restored_copy":
                w.restore_server(copy)
                # the first client to talk to it catches it (and pushes back what it lost, so
                # the second may find nothing missing): b saw the turn only in the server's
                # statements, a rollback; a holds the receipt, a deletion
                w.sync(first)
                assert _proved(w, first, {"rollback"} if first == "b" else {"deletion"}), prefix
            else:
                liar = Replica.open(copy, clock=w.clock)  # the same key, an older state
                try:
                    w.write("a")
                    w.sync("a")
                    sync_replicas(w.r["b"], liar, [CONV])  # b is shown the copy, later than a's state
                    w.tick()
                    w.sync("b", with_="a")  # the honest clients meet
                finally:
                    liar.close()
                kinds = {"server_equivocation", "rollback"}
                assert _proved(w, "a", kinds) or _proved(w, "b", kinds), prefix
        finally:
            w.close()
