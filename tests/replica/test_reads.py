"""Reading a conversation as it stands, compacted or not (`replica_reads`): the snapshot's
entries then the held records, once each; a compaction or an adoption starts the reader
over; `entries` and `first` reach compacted records."""

from __future__ import annotations

from pathlib import Path

import pytest

from convgraph import Replica
from convgraph.projections.state import Entry, entry_of
from convgraph.replica.adoption import compaction_of
from convgraph.replica.reads import Mark

pytestmark = pytest.mark.usefixtures("product_defaults")


def _fold(replica: Replica, conv: str, mark: Mark | None, folded: list[Entry]) -> tuple[Mark, bool]:
    got = replica.arrived(conv, mark)
    if got.again:
        folded.clear()
    folded.extend(got.entries)
    return got.mark, got.again


def _written(replica: Replica, conv: str, n: int, tag: str) -> list[Entry]:
    return [entry_of(replica.say(conv, "user", f"{tag} {i}")) for i in range(n)]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_reader_folds_each_record_once_across_a_compaction(tmp_path: Path, store: str) -> None:
    replica = Replica.in_memory() if store == "memory" else Replica.open(tmp_path / "r")
    conv = replica.create("reads")
    folded: list[Entry] = []
    mark, again = _fold(replica, conv, None, folded)
    assert again and [e.kind for e in folded] == ["genesis"]
    assert replica.arrived(conv).from_snapshot == 0
    genesis = folded[0]
    before = _written(replica, conv, 3, "before")
    mark, again = _fold(replica, conv, mark, folded)
    assert not again and folded == [genesis, *before]

    plain = entry_of(replica.checkpoint(conv))  # a checkpoint alone moves no snapshot
    mark, again = _fold(replica, conv, mark, folded)
    assert not again and folded[-1] == plain

    compacting = entry_of(replica.checkpoint(conv, compact=True))
    assert replica.store.get(before[0].cid) is None
    mark, again = _fold(replica, conv, mark, folded)
    assert again and folded == [genesis, *before, plain, compacting]  # snapshot, then what is held
    assert replica.arrived(conv).from_snapshot == 5
    after = _written(replica, conv, 2, "after")
    mark, again = _fold(replica, conv, mark, folded)
    assert not again and folded == [genesis, *before, plain, compacting, *after]

    fresh: list[Entry] = []
    _fold(replica, conv, None, fresh)
    assert fresh == folded
    assert replica.entries(conv, [before[1].cid, after[0].cid]) == {before[1].cid: before[1], after[0].cid: after[0]}
    assert replica.entries(conv, [plain.cid, compacting.cid, genesis.cid]).keys() == {
        plain.cid, compacting.cid, genesis.cid}
    elsewhere = Replica.in_memory()
    assert replica.entries(conv, [entry_of(elsewhere.say(elsewhere.create("x"), "user", "x")).cid]) == {}
    assert replica.first(conv) == genesis
    assert [e.cid for e in fresh] == list(replica.state(conv).entries)  # as the replica's own fold


def test_an_adoption_starts_a_reader_over(tmp_path: Path) -> None:
    a, b = Replica.open(tmp_path / "a"), Replica.open(tmp_path / "b")
    conv = a.create("adopted")
    early = _written(a, conv, 2, "early")
    b.ingest([d for _, d in a.store.records(conv)])
    folded: list[Entry] = []
    mark, _ = _fold(b, conv, None, folded)
    assert [e.cid for e in folded][1:] == [e.cid for e in early]

    c = Replica.open(tmp_path / "c")  # adopts, holding nothing before
    late = _written(a, conv, 2, "late")
    a.checkpoint(conv, compact=True)
    found = compaction_of(a.store, conv)
    assert found is not None
    for other in (b, c):
        other.adopt(found.record, found.snapshot, found.cover)
    mark, again = _fold(b, conv, mark, folded)
    assert again and [e.cid for e in folded][-3:-1] == [e.cid for e in late]  # b held none of them
    assert b.first(conv) == c.first(conv) == a.first(conv)
    assert b.entries(conv, [late[0].cid]) == c.entries(conv, [late[0].cid]) == {late[0].cid: late[0]}
    whole: list[Entry] = []
    _fold(c, conv, None, whole)
    assert whole == folded
