"""`convgraph serve --witness`, `witness add/policy`, `checkpoint --compact`, `checkpoint export
--note` and `verify-evidence` of a checkpoint finding, as real subprocesses over real SQLite
replicas and a real HTTP witness on 127.0.0.1.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from checkpoint_world import CONV, checkpoint_at, say
from cli.test_sync_cli import free_port, run, serve  # noqa: F401 - `serve` is a fixture
from convgraph import Config, Replica
from convgraph.core.keys import parse_actor
from convgraph.integrity import note
from convgraph.integrity.evidence import decode_bundle, encode_bundle


def _headers_only(home: Path) -> int:
    return int(json.loads(run(home, "verify", "--json").stdout)["headers_only"])


def test_checkpoint_compact_waits_for_k_witnesses_and_exports_a_note_they_signed(
    tmp_path: Path, serve: object,  # noqa: F811 - the fixture imported above
) -> None:
    client = tmp_path / "client"
    me = json.loads(run(client, "init", "--json").stdout)["actor"]
    url = serve("--witness", "--allow", f"{me}=*")  # type: ignore[operator]
    server = httpx.get(url + "/v1/health", timeout=60).json()["actor"]  # a loaded machine may be slow
    name, key = note.witness_key_name(parse_actor(server)), parse_actor(server).hex()
    for i in range(3):
        run(client, "say", f"turn {i}")
    run(client, "witness", "add", name, key, url)
    run(client, "witness", "add", "down", "11" * 32, f"http://127.0.0.1:{free_port()}")
    run(client, "witness", "policy", "2")
    listed = json.loads(run(client, "witness", "list", "--json").stdout)
    assert (listed["k"], [w["name"] for w in listed["witnesses"]]) == (2, [name, "down"])

    refused = run(client, "checkpoint", "--compact", "--timeout", "10", ok=False)
    assert refused.returncode == 1
    assert "unwitnessed" in refused.stderr and "every record is kept" in refused.stderr
    assert _headers_only(client) == 0

    run(client, "witness", "policy", "1")
    done = json.loads(run(client, "checkpoint", "--compact", "--timeout", "10", "--json").stdout)
    assert (done["compacted"], done["witnessed_by"]) == (True, [name])
    assert _headers_only(client) > 0

    status = json.loads(run(client, "checkpoint", "status", done["cid"], "--json").stdout)
    assert (status["status"], status["witnessed"]) == ("partly_verified", True)

    text = run(client, "checkpoint", "export", done["cid"], "--note").stdout
    known = [note.NoteKey(note.actor_key_name(parse_actor(me)), parse_actor(me)),
             note.NoteKey(name, parse_actor(server), note.COSIGNATURE_V1)]
    verified = note.verify_note(note.parse_note(text), known)
    assert sorted(v.key.name for v in verified) == sorted(k.name for k in known)
    assert note.parse_body(note.parse_note(text).body).count == done["count"]


def test_a_false_checkpoint_finding_is_proven_in_a_fresh_process_and_a_tampered_one_is_not(
    tmp_path: Path,
) -> None:
    author = Replica.in_memory(config=Config(legacy_writes=True))
    say(author, 3)
    bad = checkpoint_at(author, author.heads(CONV), count=1)
    with Replica.open(tmp_path / "b") as b:
        b.ingest([r.data for r in author.records(CONV)])
    run(tmp_path / "b", "findings", "--save", str(tmp_path / "proofs"))
    [path] = list((tmp_path / "proofs").iterdir())
    proof = json.loads(run(tmp_path, "verify-evidence", str(path), "--json").stdout)
    assert proof["proves"] is True and proof["kind"] == "unverifiable_checkpoint"
    assert str(bad.cid) in proof["reason"]

    bundle = decode_bundle(path.read_bytes())
    tampered = tmp_path / "tampered.cgev"
    tampered.write_bytes(encode_bundle(bundle.kind, bundle.conv, [], bundle.records,
                                       {**bundle.claim, "check": "heads"}))
    assert run(tmp_path, "verify-evidence", str(tampered), ok=False).returncode == 1
    tampered.write_bytes(path.read_bytes()[:-3])
    assert run(tmp_path, "verify-evidence", str(tampered), ok=False).returncode == 2
