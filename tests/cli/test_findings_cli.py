"""`convgraph verify` reports findings and exits 1 on a record equivocation; `convgraph
findings` lists them, as JSON too, and saves bundles that prove themselves."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from test_cli import run

from convgraph import Config, Replica, SigningKey
from convgraph.core.hlc import Hlc
from convgraph.core.record import Record, sign_record
from convgraph.integrity.evidence import verify_bundle

AUTHOR = SigningKey(bytes(range(32)))


def _rec(seq: int, *parents: Record, text: str) -> Record:
    return sign_record(AUTHOR, conv="c", seq=seq, hlc=Hlc(1000 + seq, 0), parents=[p.cid for p in parents],
                       kind="user_message", payload={"content": text})


def test_verify_and_findings_report_a_record_equivocation(tmp_path: Path) -> None:
    home = tmp_path / "r"
    first = _rec(1, text="one")
    yes, no = _rec(2, first, text="I said yes"), _rec(2, first, text="I said no")
    with Replica.open(home, config=Config(legacy_writes=True)) as replica:
        replica.ingest([first.data, yes.data])
    assert json.loads(run(home, "verify", "--json").stdout)["findings"] == []
    with Replica.open(home) as replica:
        replica.ingest([no.data])
    proc = run(home, "verify", ok=False)
    assert proc.returncode == 1 and "EQUIVOCATION" in proc.stderr and "record_equivocation" in proc.stdout
    report = json.loads(run(home, "verify", "--json", ok=False).stdout)
    assert report["ok"] is False and report["failures"] == []
    assert report["equivocations"] == [sorted([str(yes.cid), str(no.cid)])]
    listed = json.loads(run(home, "findings", "--json").stdout)["findings"]
    assert [f["kind"] for f in listed] == ["record_equivocation"] and listed[0]["conv"] == "c"
    assert sorted(listed[0]["cites"]) == sorted([str(yes.cid), str(no.cid)])
    assert verify_bundle(base64.b64decode(listed[0]["bundle"])).ok
    assert json.loads(run(home, "findings", "--conv", "elsewhere", "--json").stdout) == {"findings": []}
    saved = tmp_path / "proofs"
    text = run(home, "findings", "--save", str(saved)).stdout
    assert "1 finding(s)" in text and text.count("record_equivocation") == 1  # the kind said once
    assert f"{listed[0]['id'][-12:]}  actor " in text  # then what the proof says, without the kind
    (bundle,) = saved.iterdir()
    assert bundle.name == f"{listed[0]['id']}.cgev" and verify_bundle(bundle.read_bytes()).ok
