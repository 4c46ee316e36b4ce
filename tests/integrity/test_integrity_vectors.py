"""tests/vectors/integrity.json: statements both ways, refusals, the checkpoints and cosignatures
as described, and each bundle's verdict (every finding kind proved and not).

The verdict of every bundle is also checked through `convgraph verify-evidence` run in a
fresh subprocess, in an empty directory with an empty home: the file alone decides it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cli_process
from convgraph import Replica
from convgraph.core.cid import CID
from convgraph.core.keys import SigningKey
from convgraph.core.record import decode_record
from convgraph.errors import EvidenceError, NoteError, StatementError
from convgraph.integrity.builders import (
    artifact_claim_finding,
    divergent_fork_finding,
    record_equivocation_finding,
    statements_finding,
    unverifiable_checkpoint_finding,
)
from convgraph.integrity.checkpoint_proofs import record_lookup
from convgraph.integrity.checkpoints import Checkpoint, Status, check
from convgraph.integrity.cosignature import cosign_checkpoint, cosignature_of_map
from convgraph.integrity.evidence import decode_bundle, verify_bundle
from convgraph.integrity.findings import (
    ARTIFACT_KINDS,
    DIVERGENT_FORK,
    FINDING_KINDS,
    RECORD_EQUIVOCATION,
    STATEMENT_KINDS,
    UNVERIFIABLE_CHECKPOINT,
)
from convgraph.integrity.note import NoteKey, checkpoint_body, parse_note, verify_cosignature, verify_note
from convgraph.integrity.statement import decode_statement, sign_statement
from vectors.loader import generator

VECTORS = json.loads((Path(__file__).parent.parent / "vectors" / "integrity.json").read_text("utf-8"))
EXIT = {"proves": 0, "does_not_prove": 1, "not_a_bundle": 2}


def test_generator_reproduces_the_committed_file_exactly() -> None:
    gen = generator("generate_integrity.py")
    assert gen.render(gen.build()) == (Path(__file__).parent.parent / "vectors" / "integrity.json").read_text("utf-8")


@pytest.mark.parametrize("v", VECTORS["statements"], ids=lambda v: v["name"])
def test_statement_decodes_to_its_json_form_and_signs_to_its_bytes(v: dict[str, Any]) -> None:
    data = bytes.fromhex(v["hex"])
    s = decode_statement(data)
    want = v["statement"]
    assert (s.conv, s.count, s.time_ms, s.key.hex(), s.sig.hex()) == (
        want["conv"], want["count"], want["time"], want["key"], want["sig"])
    assert [str(c) for c in s.heads] == want["heads"]
    assert [str(c) for c in s.stored] == want.get("stored", [])
    assert str(s.cid) == v["cid"] == str(CID.of_record(data))
    assert s.heads_digest.hex() == v["heads_digest"]
    key = SigningKey(bytes.fromhex(VECTORS["keys"]["server"]))
    again = sign_statement(key, want["conv"], want["count"], [CID.parse(c) for c in want["heads"]], want["time"],
                           stored=[CID.parse(c) for c in want.get("stored", [])])
    assert again.data == data


@pytest.mark.parametrize("v", VECTORS["statement_refusals"], ids=lambda v: v["name"])
def test_statement_refusal(v: dict[str, Any]) -> None:
    with pytest.raises(StatementError) as caught:
        decode_statement(bytes.fromhex(v["hex"]))
    assert caught.value.reason == v["reason"]


@pytest.mark.parametrize("v", VECTORS["bundles"], ids=lambda v: v["name"])
def test_bundle_verdict(v: dict[str, Any]) -> None:
    data = bytes.fromhex(v["hex"])
    if v["result"] == "not_a_bundle":
        with pytest.raises(EvidenceError):
            verify_bundle(data)
        return
    proof = verify_bundle(data)
    assert proof.ok is (v["result"] == "proves"), proof.reason
    assert proof.kind == v["kind"]
    assert v["id"] == str(CID.of_record(data))


def test_every_finding_kind_has_a_proving_vector_and_one_that_does_not_prove() -> None:
    for result in ("proves", "does_not_prove"):
        assert {v["kind"] for v in VECTORS["bundles"] if v["result"] == result} == set(FINDING_KINDS), result


RECORDS = {v["name"]: decode_record(bytes.fromhex(v["hex"])) for v in VECTORS["records"]}
FALSE_CHECK = {"cp_count": "count", "cp_heads": "heads", "cp_snapshot": "snapshot", "cp_heads_count": "heads"}


@pytest.mark.parametrize("v", VECTORS["records"], ids=lambda v: v["name"])
def test_record_decodes_to_its_cid(v: dict[str, Any]) -> None:
    assert str(RECORDS[v["name"]].cid) == v["cid"]


@pytest.mark.parametrize("name", [n for n in RECORDS if n.startswith("cp_")])
def test_checkpoint_is_true_or_fails_the_check_its_description_says(name: str) -> None:
    held = {r.cid: r for r in RECORDS.values()}
    result = check(Checkpoint.of(RECORDS[name]), record_lookup(held), lambda c: held[c].data if c in held else None)
    if name in FALSE_CHECK:
        assert (result.status, result.check) == (Status.FALSE, FALSE_CHECK[name])
    else:
        assert result.status is Status.VERIFIED


@pytest.mark.parametrize("v", VECTORS["cosignatures"], ids=lambda v: v["name"])
def test_cosignature_signs_the_note_body_of_its_checkpoint(v: dict[str, Any]) -> None:
    record = RECORDS[v["checkpoint"]]
    assert checkpoint_body(record).text == v["body"]
    made = cosign_checkpoint(SigningKey(bytes.fromhex(VECTORS["keys"]["witness"])), record, v["time"])
    assert (made.name, made.key.hex(), made.sig.hex(), made.line().line) == (
        v["witness_name"], v["key"], v["sig"], v["line"])
    assert verify_cosignature(bytes.fromhex(v["key"]), v["body"], v["time"], bytes.fromhex(v["sig"]))


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # a fresh interpreter, an empty working directory and home: nothing but the file
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(cwd), "CONVGRAPH_HOME": str(cwd / "home"),
           "COLUMNS": "200"}
    return cli_process.run(args, text=True, env=env, cwd=cwd, timeout=60)


def test_verify_evidence_cli_gives_every_vector_its_exit_code(tmp_path: Path) -> None:
    for v in VECTORS["bundles"]:
        file = tmp_path / f"{v['name']}.cbor"
        file.write_bytes(bytes.fromhex(v["hex"]))
        proc = _cli(tmp_path, "verify-evidence", str(file), "--json")
        assert proc.returncode == EXIT[v["result"]], (v["name"], proc.stdout, proc.stderr)
        report = json.loads(proc.stdout)
        assert report["proves"] is (v["result"] == "proves")
        assert report["bundle"] is (v["result"] != "not_a_bundle")
        if report["bundle"]:
            assert report["id"] == v["id"] and report["kind"] == v["kind"]
    assert not (tmp_path / "home").exists()  # it opened no replica


def test_verify_evidence_cli_text(tmp_path: Path) -> None:
    by_name = {v["name"]: v for v in VECTORS["bundles"]}
    for name, code, words in (("deletion", 0, "PROVES deletion"), ("rollback_within_slack", 1, "DOES NOT PROVE"),
                              ("wrong_type", 2, "not a bundle")):
        file = tmp_path / "bundle"
        file.write_bytes(bytes.fromhex(by_name[name]["hex"]))
        proc = _cli(tmp_path, "verify-evidence", str(file))
        assert proc.returncode == code
        assert words in proc.stdout + proc.stderr


@pytest.mark.parametrize("v", VECTORS["artifacts"], ids=lambda v: v["name"])
def test_artifact_block_cid_is_computed_from_the_spec_alone(v: dict[str, Any]) -> None:
    # apart from convgraph's CID class: hashlib, base32 and docs/format.md §3
    data = bytes.fromhex(v["hex"])
    codec = 0x71 if v["name"] == "manifest" else 0x55
    raw = bytes([0x01, codec, 0x12, 0x20]) + hashlib.sha256(data).digest()
    assert v["cid"] == "b" + base64.b32encode(raw).decode().lower().rstrip("=")


# ---------------------------------------------------------------- canonical form and ingestible records

HELD = {CID.parse(r["cid"]): bytes.fromhex(r["hex"]) for r in VECTORS["records"]}
BLOCKS = {CID.parse(a["cid"]): bytes.fromhex(a["hex"]) for a in VECTORS["artifacts"]}


def _rebuilt(data: bytes) -> bytes | None:
    """The bundle the replica's builder makes for the claim of bundle `data`, from its statements
    or claimed records and the vector file's records and artifact blocks alone."""
    b = decode_bundle(data)
    statements = [decode_statement(s) for s in b.statements]
    if b.kind in STATEMENT_KINDS:
        earlier, later = statements[b.claim["earlier"]], statements[b.claim["later"]]
        found = statements_finding(b.kind, earlier, later, HELD.get, 0)
    elif b.kind == RECORD_EQUIVOCATION:
        found = record_equivocation_finding(b.records[0], b.records[1], 0)
    elif b.kind == DIVERGENT_FORK:
        cosigned = [cosignature_of_map(m) for m in b.cosignatures]
        found = divergent_fork_finding(b.claim["a"], b.claim["b"], b.conv, HELD.get, 0, cosignatures=cosigned)
    elif b.kind == UNVERIFIABLE_CHECKPOINT:
        found = unverifiable_checkpoint_finding(b.claim["checkpoint"], b.conv, HELD.get, 0)
    else:
        assert b.kind in ARTIFACT_KINDS
        found = artifact_claim_finding(HELD[b.claim["record"]], BLOCKS.get, 0)
    return None if found is None else found.bundle


@pytest.mark.parametrize("v", [v for v in VECTORS["bundles"] if v["result"] == "proves"
                               and not v["name"].startswith("noncanonical_")], ids=lambda v: v["name"])
def test_every_proving_bundle_is_the_one_the_builder_makes(v: dict[str, Any]) -> None:
    """docs/integrity.md §10: a proving bundle is in the canonical form (but for the two that pin
    §6.3's extra items), so rebuilding it from its items gives the same bytes, and the same id."""
    assert _rebuilt(bytes.fromhex(v["hex"])) == bytes.fromhex(v["hex"])


@settings(max_examples=25, deadline=None)
@given(order=st.permutations(sorted(VECTORS["records"], key=lambda r: r["name"])))
def test_every_vector_record_ingests_in_any_order(order: list[dict[str, Any]]) -> None:
    """The records obey docs/format.md §11.2 (each names its author's previous record): a replica
    takes every one, whatever the order, and finds the one equivocation the vectors hold."""
    replica = Replica.in_memory(SigningKey(bytes([99]) * 32))
    for r in order:  # one at a time: a child before its parent waits in quarantine
        replica.ingest([bytes.fromhex(r["hex"])])
    assert replica.store.count("c") == len(VECTORS["records"])
    names = {r["cid"]: r["name"] for r in VECTORS["records"]}
    pairs = {frozenset((names[str(a)], names[str(b)])) for a, b in replica.store.equivocations("c")}
    assert pairs == {frozenset({"b2", "f"})}


@pytest.mark.parametrize("v", VECTORS["notes"], ids=lambda v: v["name"])
def test_each_signed_note_is_verified_as_the_vector_says(v: dict[str, Any]) -> None:
    known = [NoteKey(k["name"], bytes.fromhex(k["key"]), k["type"]) for k in v["known"]]
    if v["result"] == "verified":
        verified = verify_note(parse_note(v["text"]), known)
        assert [x.key.name for x in verified] == v["verified"]
        return
    with pytest.raises(NoteError) as caught:
        verify_note(parse_note(v["text"]), known)
    assert caught.value.reason == v["result"]
