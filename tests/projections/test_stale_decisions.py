"""Stale decisions (docs/authority.md §8.7): a decision whose subject was followed by an
unreviewed patch before it is answered `stale`, naming the newer patch; on real replicas
(memory stores), in every delivery order.
"""

from __future__ import annotations

import itertools
from typing import Any

from convgraph import ManualClock, Replica, SigningKey
from convgraph.artifacts.claims import artifact_cid
from convgraph.artifacts.diff import make_unified_diff
from convgraph.core.cid import CID
from convgraph.core.rooted import conv_id
from convgraph.projections.authority_json import authority_json

T0 = 1_700_000_000_000
NONCE = bytes(range(16))
V1, V2, V3 = b"x = 1\n", b"x = 2\n", b"x = 3\n"


class World:
    def __init__(self) -> None:
        self.clock = ManualClock(T0)
        self.owner = Replica.in_memory(SigningKey(bytes([90]) * 32), clock=self.clock)
        self.reviewer = Replica.in_memory(SigningKey(bytes([91]) * 32), clock=self.clock)
        self.conv = conv_id(self.owner.actor, NONCE)
        self.owner.write(self.conv, "genesis", {"nonce": NONCE})
        self.owner.write(self.conv, "grant", {"grantee": self.reviewer.actor,
                                              "rights": ["read", "review", "write"]})
        self.sync()

    def sync(self) -> None:
        for a, b in ((self.owner, self.reviewer), (self.reviewer, self.owner)):
            b.ingest([r.data for r in a.iter_records()])

    def write(self, kind: str, payload: dict[str, Any], by: Replica | None = None, *, sync: bool = True) -> CID:
        self.clock.advance(10)
        cid = (by or self.owner).write(self.conv, kind, payload).cid
        if sync:
            self.sync()
        return cid

    def patch(self, old: bytes, new: bytes, path: str | None = "x.py", base: CID | None = None,
              by: Replica | None = None, *, sync: bool = True) -> CID:
        payload = {"base": base or artifact_cid(old), "diff": make_unified_diff(old, new, "x.py"),
                   "result": artifact_cid(new), "path": path}
        return self.write("patch", {k: v for k, v in payload.items() if v is not None}, by, sync=sync)

    def review(self, target: CID) -> CID:
        return self.write("review_comment", {"target": target, "body": "ok", "verdict": "approve"}, self.reviewer)

    def ask(self, subject: CID) -> CID:
        return self.write("decision_request", {"question": "merge?", "subject": subject, "reviews": 1})

    def decide(self, request: CID) -> CID:
        return self.write("decision", {"request": request, "choice": "merge"})

    def stale(self) -> list[tuple[CID, tuple[CID, ...]]]:
        return [(f.cid, f.newer) for f in self.owner.authority(self.conv).findings() if f.kind == "stale"]


def test_a_new_patch_on_the_reviewed_result_before_the_decision_makes_it_stale() -> None:
    w = World()
    p1 = w.patch(V1, V2)
    q = w.ask(p1)
    w.review(p1)
    p2 = w.patch(V2, V3, path=None)  # base = p1's result: the chain, whatever its path
    d = w.decide(q)
    assert w.stale() == [(d, (p2,))]
    auth = w.owner.authority(w.conv)
    assert d not in auth.hidden()  # stale is shown, not dropped: the decision still stands
    (f,) = [f for f in authority_json(auth)["findings"] if f["kind"] == "stale"]
    assert f["newer"] == [str(p2)] and f["evidence"] == [str(q), str(p1), str(p2)]
    assert str(p2) in f["detail"]


def test_a_reviewed_successor_a_later_patch_or_another_file_is_not_stale() -> None:
    w = World()
    p1 = w.patch(V1, V2)
    q = w.ask(p1)
    w.review(p1)
    p2 = w.patch(V2, V3)
    w.review(p2)  # the newer patch was reviewed too
    w.patch(b"y = 1\n", b"y = 2\n", path="y.py")  # another file
    d = w.decide(q)
    w.patch(V3, b"x = 4\n")  # after the decision
    assert w.stale() == []
    assert [f.kind for f in w.owner.authority(w.conv).findings() if f.cid == d] == []


def test_same_path_counts_only_with_the_subject_in_its_past() -> None:
    w = World()
    p0 = w.patch(V1, V3)  # an older patch of the same path: before the subject, not newer
    p1 = w.patch(V1, V2)
    q = w.ask(p1)
    w.review(p1)
    p2 = w.patch(V2 + b"# again\n", V3, base=artifact_cid(b"other\n"))  # same path, p1 in its past
    d = w.decide(q)
    assert w.stale() == [(d, (p2,))]
    assert p0 not in w.stale()[0][1]


def test_a_concurrent_patch_of_the_same_path_is_not_newer() -> None:
    w = World()
    p1 = w.patch(V1, V2, sync=False)
    w.patch(V1, V3, by=w.reviewer, sync=False)  # the same file, written without seeing p1
    w.sync()
    q = w.ask(p1)
    w.review(p1)
    w.decide(q)
    assert w.stale() == []


def test_a_snapshot_subject_followed_by_a_patch_of_its_blob() -> None:
    w = World()
    snap = w.write("code_snapshot", {"path": "x.py", "content": V1.decode(), "blob": artifact_cid(V1)})
    q = w.ask(snap)
    w.review(snap)
    p = w.patch(V1, V2, path=None)
    d = w.decide(q)
    assert w.stale() == [(d, (p,))]


def test_the_answer_is_the_same_in_every_delivery_order() -> None:
    w = World()
    p1 = w.patch(V1, V2)
    q = w.ask(p1)
    w.review(p1)
    p2 = w.patch(V2, V3)
    d = w.decide(q)
    records = list(w.owner.iter_records())
    head, tail = records[:2], records[2:]  # genesis and grant first: authority needs them
    for order in itertools.islice(itertools.permutations(tail), 0, 720, 97):
        fresh = Replica.in_memory(SigningKey(bytes([92]) * 32), clock=ManualClock(T0 + 10**6))
        report = fresh.ingest([r.data for r in (*head, *order)])
        assert not report.rejected
        found = [(f.cid, f.newer) for f in fresh.authority(w.conv).findings() if f.kind == "stale"]
        assert found == [(d, (p2,))]
