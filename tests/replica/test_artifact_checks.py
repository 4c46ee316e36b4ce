"""The shell that keeps false artifact claims as findings (docs/integrity.md §6.4), on the memory,
SQLite and PostgreSQL stores: a forged patch and a snapshot naming a wrong hash become findings
once (and only when the blocks are held), an honest patch never does; after blocks arrive, only
the records naming them (or a manifest holding them) are read again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import pg
from convgraph import ManualClock, Replica, SigningKey, SqliteStore
from convgraph.artifacts import blocks
from convgraph.artifacts.claims import artifact_cid
from convgraph.artifacts.diff import make_unified_diff
from convgraph.core.cid import CID
from convgraph.core.record import Record
from convgraph.integrity.evidence import verify_bundle
from convgraph.replica.artifact_checks import check_conversation, check_records
from convgraph.store.postgres import PostgresStore
from counting_store import CountingStore

OLD = b"def f():\n    return 1\n"
NEW = b"def f():\n    return 2\n"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def replica(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replica]:
    key, clock = SigningKey(bytes([8]) * 32), ManualClock(1_700_000_000_000)
    if request.param == "memory":
        r = Replica.in_memory(key, clock=clock)
    elif request.param == "sqlite":
        r = Replica(SqliteStore(tmp_path / "r.sqlite"), key, clock=clock)
    else:
        r = Replica(PostgresStore(pg.dsn(), schema=pg.fresh_schema(pg.dsn())), key, clock=clock)
    yield r
    r.close()


def test_false_claims_become_findings_once_and_only_when_shown(replica: Replica) -> None:
    conv = replica.create("review")
    diff = make_unified_diff(OLD, NEW, "f.py")
    honest = replica.write(conv, "patch", {"base": artifact_cid(OLD), "diff": diff, "result": artifact_cid(NEW)})
    forged = replica.write(conv, "patch", {"base": artifact_cid(OLD), "diff": diff,
                                           "result": artifact_cid(NEW + b"import os\n")})
    wrong = replica.write(conv, "code_snapshot", {"content": OLD.decode(), "blob": artifact_cid(NEW)})
    # the snapshot shows its lie by itself, found as it was written; the patches wait for their base
    assert [f.kind for f in replica.findings(conv)] == ["false_snapshot"]
    assert check_records(replica.store, [honest, forged, wrong], 1) == []  # stored already
    old = replica.put(OLD)
    found = check_conversation(replica.store, conv, [old], 2)
    assert [(f.kind, f.cites) for f in found] == [("false_patch", (forged.cid,))]
    assert all(verify_bundle(f.bundle).ok for f in found)
    assert check_conversation(replica.store, conv, [old], 3) == []  # one piece of evidence, one finding
    assert sorted(f.kind for f in replica.findings(conv)) == ["false_patch", "false_snapshot"]


def test_a_manifest_base_is_read_through_the_store(replica: Replica) -> None:
    conv = replica.create("big")
    old = b"".join(b"line %d\n" % i for i in range(40_000))
    assert len(old) > blocks.CHUNK_SIZE
    new = old.replace(b"line 7\n", b"seven\n")
    base = replica.put(old)
    lie = replica.write(conv, "patch", {"base": base, "diff": make_unified_diff(old, new, "f"),
                                        "result": artifact_cid(old)})
    (f,) = replica.findings(conv)  # found as it was written: its base was held
    assert f.kind == "false_patch" and "result" in f.summary and f.cites == (lie.cid,)


def test_an_ingested_false_patch_is_found_when_its_blocks_are_held(replica: Replica) -> None:
    author = Replica.in_memory(SigningKey(bytes([9]) * 32), clock=ManualClock(1_700_000_000_000))
    conv = author.create("elsewhere")
    lie = author.write(conv, "patch", {"base": artifact_cid(OLD), "diff": make_unified_diff(OLD, NEW, "f"),
                                       "result": artifact_cid(OLD)})
    replica.put(OLD)
    report = replica.ingest([r.data for r in author.iter_records(conv)])
    assert lie.cid in report.accepted
    (f,) = replica.findings(conv)
    assert (f.kind, f.cites) == ("false_patch", (lie.cid,))


def _conversation_with(replica: Replica, unrelated: int) -> tuple[str, bytes, Record]:
    """A conversation whose forged patch waits for its base, beside `unrelated` patches and
    snapshots on other artifacts (none held)."""
    conv = replica.create(f"with {unrelated}")
    old = OLD + b"# %d\n" % unrelated
    new = old.replace(b"1", b"2")
    for i in range(unrelated):
        other = b"other %d\n" % i
        replica.write(conv, "patch", {"base": artifact_cid(other), "diff": make_unified_diff(other, OLD, "o"),
                                      "result": artifact_cid(OLD + b"x")})
        replica.write(conv, "code_snapshot", {"blob": artifact_cid(other + b"y")})
    forged = replica.write(conv, "patch", {"base": artifact_cid(old), "diff": make_unified_diff(old, new, "f"),
                                           "result": artifact_cid(new + b"import os\n")})
    return conv, old, forged


def test_a_check_after_blocks_arrive_reads_only_the_records_naming_them(replica: Replica) -> None:
    costs = []
    for unrelated in (1, 15):
        conv, old, forged = _conversation_with(replica, unrelated)
        assert replica.findings(conv) == []
        arrived = replica.put(old)
        counting = CountingStore(replica.store)
        found = check_conversation(counting.store, conv, [arrived], 2)
        assert [(f.kind, f.cites) for f in found] == [("false_patch", (forged.cid,))]
        assert "records_after" not in counting.calls and "records" not in counting.calls
        assert [args[0] for name, args in counting.args if name == "get_many"] == [[forged.cid]]
        costs.append(dict(counting.calls))
    assert costs[0] == costs[1]


def test_a_chunk_arriving_re_checks_the_claims_on_its_manifest(replica: Replica) -> None:
    conv = replica.create("late chunk")
    old = b"".join(b"line %d\n" % i for i in range(40_000))
    new = old.replace(b"line 7\n", b"seven\n")
    root, pieces = blocks.split(old)
    late = pieces[-1]
    replica.store.put_blocks([p for p in pieces if p != late])  # the manifest and all but one chunk
    lie = replica.write(conv, "patch", {"base": root, "diff": make_unified_diff(old, new, "f"),
                                        "result": artifact_cid(old)})
    assert replica.findings(conv) == []  # its base is not held whole: pending
    replica.store.put_blocks([late])
    assert check_conversation(replica.store, conv, [CID.of_raw(b"unrelated")], 2) == []
    (f,) = check_conversation(replica.store, conv, [late[0]], 3)
    assert (f.kind, f.cites) == ("false_patch", (lie.cid,))
