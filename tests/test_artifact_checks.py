"""The shell that keeps false artifact claims as findings (docs/integrity.md §6.4), on the memory,
SQLite and PostgreSQL stores: a forged patch and a snapshot naming a wrong hash become findings
once (and only when the blocks are held), an honest patch never does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import pg
from convgraph import ManualClock, Replica, SigningKey, SqliteStore
from convgraph.artifact_checks import check_conversation, check_records
from convgraph.artifacts import blocks
from convgraph.artifacts.claims import artifact_cid
from convgraph.artifacts.diff import make_unified_diff
from convgraph.integrity.evidence import verify_bundle
from convgraph.store.postgres import PostgresStore

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
