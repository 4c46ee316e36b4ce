"""`false_patch` and `false_snapshot` findings (docs/integrity.md §6.4): each lie is caught, its
bundle proves it from its own bytes (through `convgraph verify-evidence` too), an honest record
is no finding, and no tampered bundle proves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cli_process
from convgraph import ManualClock, Replica, SqliteStore
from convgraph.artifacts import blocks
from convgraph.artifacts.claims import artifact_cid
from convgraph.artifacts.diff import make_unified_diff
from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import Record, sign_record
from convgraph.errors import EvidenceError
from convgraph.integrity.builders import artifact_claim_finding
from convgraph.integrity.evidence import decode_bundle, encode_bundle, verify_bundle
from convgraph.integrity.findings import FALSE_PATCH, FALSE_SNAPSHOT, Finding

KEY = SigningKey(bytes([5]) * 32)
OLD = b"".join(b"line %d\n" % i for i in range(40_000))  # over one block: a manifest and two chunks
NEW = OLD.replace(b"line 20000\n", b"changed\n")


def signed(kind: str, payload: dict[str, Any]) -> Record:
    return sign_record(KEY, conv="c", seq=1, hlc=Hlc(1_700_000_000_000, 0), parents=[], kind=kind, payload=payload)


@pytest.fixture
def held() -> dict[CID, bytes]:
    return dict(blocks.split(OLD)[1])


def forged_patch(result: bytes) -> Record:
    return signed("patch", {"base": artifact_cid(OLD), "diff": make_unified_diff(OLD, NEW, "f"),
                            "result": artifact_cid(result), "path": "f"})


def proven(finding: Finding | None, kind: str) -> Finding:
    assert finding is not None
    assert finding.kind == kind
    assert verify_bundle(finding.bundle).ok
    return finding


def test_a_forged_patch_result_is_caught_and_its_bundle_carries_the_whole_base(held: dict[CID, bytes]) -> None:
    r = forged_patch(NEW + b"# and a backdoor\n")
    finding = proven(artifact_claim_finding(r.data, held.get, 7), FALSE_PATCH)
    bundle = decode_bundle(finding.bundle)
    assert set(bundle.blocks) == set(held.values())  # the manifest and both chunks
    assert bundle.records == (r.data,) and finding.cites == (r.cid,)
    assert bundle.claim == {"record": r.cid, "check": "result"}
    assert "result" in finding.summary


def test_an_honest_patch_and_a_pending_one_are_no_finding(held: dict[CID, bytes]) -> None:
    assert artifact_claim_finding(forged_patch(NEW).data, held.get, 0) is None
    assert artifact_claim_finding(forged_patch(b"lie").data, {}.get, 0) is None  # base not held yet


def test_a_snapshot_naming_a_wrong_hash_is_caught_from_the_record_alone() -> None:
    wrong = signed("code_snapshot", {"content": "print(1)\n", "blob": CID.of_raw(b"print(2)\n"), "path": "a.py"})
    finding = proven(artifact_claim_finding(wrong.data, {}.get, 0), FALSE_SNAPSHOT)
    assert decode_bundle(finding.bundle).blocks == ()
    right = signed("code_snapshot", {"content": "print(1)\n", "blob": CID.of_raw(b"print(1)\n"), "path": "a.py"})
    assert artifact_claim_finding(right.data, {}.get, 0) is None


def test_one_lie_found_twice_is_one_finding(held: dict[CID, bytes]) -> None:
    r = forged_patch(b"x")
    shuffled = dict(reversed(list(held.items())))
    assert artifact_claim_finding(r.data, held.get, 1).id == artifact_claim_finding(r.data, shuffled.get, 2).id  # type: ignore[union-attr]


def _still_proves(data: bytes) -> bool:
    try:
        return verify_bundle(data).ok
    except EvidenceError:
        return False


def test_a_changed_block_or_any_flipped_bit_does_not_prove() -> None:
    base = b"a\nb\n"
    r = signed("patch", {"base": CID.of_raw(base), "diff": make_unified_diff(base, b"a\nc\n", "f"),
                         "result": CID.of_raw(b"a\nd\n")})
    finding = proven(artifact_claim_finding(r.data, {CID.of_raw(base): base}.get, 0), FALSE_PATCH)
    m = codec.decode(finding.bundle)
    assert not _still_proves(codec.encode({**m, "blocks": [b"a\nB\n"]}))
    data = finding.bundle
    for i in range(len(data)):
        for mask in (0x01, 0x80):
            assert not _still_proves(data[:i] + bytes([data[i] ^ mask]) + data[i + 1:]), (i, mask)


def test_verify_evidence_proves_it_from_the_file_alone(tmp_path: Path, held: dict[CID, bytes]) -> None:
    finding = proven(artifact_claim_finding(forged_patch(b"x").data, held.get, 0), FALSE_PATCH)
    file = tmp_path / "bundle.cbor"
    file.write_bytes(finding.bundle)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "CONVGRAPH_HOME": str(tmp_path / "home")}
    proc = cli_process.run(["verify-evidence", str(file), "--json"], text=True, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["kind"], report["id"], report["blocks"]) == (FALSE_PATCH, str(finding.id), 3)
    file.write_bytes(finding.bundle.replace(b"line 39999", b"line 39998"))
    assert cli_process.run(["verify-evidence", str(file)], env=env, cwd=tmp_path, timeout=60).returncode == 1


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_on_a_replica_the_store_is_the_block_getter(tmp_path: Path, kind: str) -> None:
    """The wiring the replica does: `store.get_block` as the getter, records as written."""
    key = SigningKey(bytes([6]) * 32)
    clock = ManualClock(1_700_000_000_000)
    replica = (Replica.in_memory(key, clock=clock) if kind == "memory"
               else Replica(SqliteStore(tmp_path / "r.sqlite"), key, clock=clock))
    conv = replica.create("review")
    base = replica.put(OLD)
    honest = replica.write(conv, "patch", {"base": base, "diff": make_unified_diff(OLD, NEW, "f"),
                                           "result": replica.put(NEW), "path": "f"})
    forged = replica.write(conv, "patch", {"base": base, "diff": make_unified_diff(OLD, NEW, "f"),
                                           "result": replica.put(NEW + b"evil\n"), "path": "f"})
    assert artifact_claim_finding(honest.data, replica.store.get_block, 0) is None
    finding = proven(artifact_claim_finding(forged.data, replica.store.get_block, 0), FALSE_PATCH)
    assert finding.cites == (forged.cid,)


_TEXT = st.lists(st.sampled_from([b"a\n", b"b\n", b"c\r\n", b"d"]), max_size=12).map(b"".join)


@given(_TEXT, _TEXT, st.lists(st.binary(max_size=8) | _TEXT, max_size=4),
       st.sampled_from(["base", "apply", "result"]), st.booleans())
def test_no_choice_of_blocks_or_check_makes_an_honest_patch_prove(
        old: bytes, new: bytes, extra: list[bytes], check: str, with_base: bool) -> None:
    r = signed("patch", {"base": artifact_cid(old), "diff": make_unified_diff(old, new, "f"),
                         "result": artifact_cid(new)})
    chosen = ([old] if with_base else []) + extra
    blocks_ = sorted(set(chosen))
    bundle = encode_bundle(FALSE_PATCH, "c", [], [r.data], {"record": r.cid, "check": check}, blocks=blocks_)
    assert not verify_bundle(bundle).ok
