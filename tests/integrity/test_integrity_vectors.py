"""tests/vectors/integrity.json: statements both ways, refusals, and each bundle's verdict.

The verdict of every bundle is also checked through `convgraph verify-evidence` run in a
fresh subprocess, in an empty directory with an empty home: the file alone decides it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from convgraph.core.cid import CID
from convgraph.core.keys import SigningKey
from convgraph.errors import EvidenceError, StatementError
from convgraph.integrity.evidence import verify_bundle
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


def test_every_kind_with_a_statement_claim_has_a_proving_vector() -> None:
    proving = {v["kind"] for v in VECTORS["bundles"] if v["result"] == "proves"}
    assert proving == {"rollback", "deletion", "withholding", "server_equivocation", "record_equivocation"}


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # a fresh interpreter, an empty working directory and home: nothing but the file
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(cwd), "CONVGRAPH_HOME": str(cwd / "home"),
           "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "convgraph.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60, check=False)


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
