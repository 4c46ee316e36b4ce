"""The `convgraph` command, run as a real child process (`cli_process`) against a real SQLite replica."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

import cli_process


def run(home: Path, *args: str, ok: bool = True, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONVGRAPH_HOME": str(home), "COLUMNS": "200"}
    proc = cli_process.run(args, text=True, env=env, timeout=60, input=input_text)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def init(*homes: Path) -> None:
    """Make a replica in each of `homes`: only `convgraph init` creates one."""
    for home in homes:
        run(home, "init")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cli") / "replica"
    run(home, "init")
    return home


def test_init_json(home: Path) -> None:
    info = json.loads(run(home, "init", "--json").stdout)
    assert len(info["actor"]) == 52 and len(info["fingerprint"]) == 12


def test_append_log_show(home: Path) -> None:
    conv = run(home, "new", "a test", "--alias", "t").stdout.strip()
    first = run(home, "append", "user_message", '{"content": "hello graph"}', "--conv", "t").stdout.strip()
    second = json.loads(run(home, "append", "agent_message", '{"content": "hi back"}', "--conv", "t",
                            "--ref", first, "--json").stdout)
    assert second["parents"] == [{"/": first}] and second["refs"] == [{"/": first}]
    assert second["conv"] == conv
    log = json.loads(run(home, "log", "--conv", "t", "--json").stdout)
    assert log["conv"] == conv and [r["kind"] for r in log["records"]] == ["genesis", "user_message",
                                                                          "agent_message"]
    assert [r["cid"] for r in log["records"]][1:] == [first, second["cid"]]
    assert log["heads"] == [second["cid"]] and log == json.loads(run(home, "log", "--conv", conv, "--json").stdout)
    table = run(home, "log", "--conv", "t").stdout
    assert "hello graph" in table and "3 records, 1 head(s)" in table
    graph = run(home, "log", "--conv", "t", "--graph").stdout.splitlines()
    assert graph[0].startswith("*") and "hi back" in graph[0] and "hello graph" in graph[1]
    assert "genesis  a test" in graph[2]
    shown = run(home, "show", first).stdout
    assert "hello graph" in shown and "user_message" in shown
    assert json.loads(run(home, "show", first, "--json").stdout)["cid"] == first


def test_bad_input_is_a_clear_error(home: Path) -> None:
    bad_kind = run(home, "append", "gossip", "{}", ok=False)
    assert bad_kind.returncode == 2 and "gossip" in bad_kind.stderr
    bad_json = run(home, "append", "user_message", "{nope", ok=False)
    assert bad_json.returncode == 2 and "not JSON" in bad_json.stderr
    schema = run(home, "append", "user_message", '{"colour": "red"}', ok=False)
    assert schema.returncode == 2 and "undeclared field" in schema.stderr
    missing = run(home, "show", "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua", ok=False)
    assert missing.returncode == 2 and "no record" in missing.stderr
    garbage = run(home, "show", "not-a-cid", ok=False)
    assert garbage.returncode == 2 and "Traceback" not in garbage.stderr


def test_verify_ok_then_fails_after_tampering(tmp_path: Path) -> None:
    home = tmp_path / "r"
    init(home)
    cid = run(home, "append", "user_message", '{"content": "keep me"}').stdout.strip()  # and its genesis
    assert json.loads(run(home, "verify", "--json").stdout) == {
        "checked": 2, "ok": True, "failures": [], "headers_only": 0, "blocks_checked": 0,
        "missing_artifacts": {}, "findings": [], "equivocations": [],
    }
    db = sqlite3.connect(home / "replica.sqlite")
    db.execute("UPDATE records SET data = replace(data, CAST('keep' AS BLOB), CAST('kept' AS BLOB))")
    db.commit()
    db.close()
    proc = run(home, "verify", ok=False)
    assert proc.returncode == 1 and cid in proc.stderr and "1 failed" in proc.stdout


def test_verify_lists_missing_artifacts_and_fails_on_a_rotten_block(tmp_path: Path) -> None:
    home = tmp_path / "r"
    init(home)
    held = run(home, "put", "-", "--json", input_text="held bytes").stdout
    held_cid = json.loads(held)["cid"]
    absent = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"  # held by nobody
    conv = run(home, "new", "code", "--json").stdout
    name = json.loads(conv)["conv"]
    payload = json.dumps({"path": "a.txt", "tree": {}, "blob": {"/": absent}})
    run(home, "append", "code_snapshot", payload, "--conv", name, "--ref", held_cid)
    report = json.loads(run(home, "verify", "--json").stdout)
    assert report["ok"] and report["blocks_checked"] == 1
    assert report["missing_artifacts"] == {name: [absent]}
    assert f"1 artifact(s) its records name are not held here (first {absent})" in run(home, "verify").stdout
    db = sqlite3.connect(home / "replica.sqlite")
    db.execute("UPDATE blocks SET data = CAST('rotten' AS BLOB)")
    db.commit()
    db.close()
    proc = run(home, "verify", ok=False)
    assert proc.returncode == 1 and held_cid in proc.stderr


def test_demo_runs_and_agrees(tmp_path: Path) -> None:
    out = run(tmp_path / "unused", "demo", "--dir", str(tmp_path / "demo")).stdout
    assert "Same history on both replicas: yes" in out
    assert "rejected: signature" in out
    assert out.count("in sync") == 6 and "STILL DIFFERENT" not in out
    assert "excluded (revoked_concurrently)" in out  # the lost tablet's write
    assert "lacks `write`" in out and "it is rejected: authority" in out  # the stranger
    assert 'The laptop starts a conversation, "trip planning": cg1' in out  # a rooted one
    assert "genesis  trip planning" in out and "grant " in out and "read, write" in out
    assert f"Two replicas in {tmp_path / 'demo'} (kept)" in out
    laptop = json.loads(run(tmp_path / "demo" / "laptop", "log", "--conv", "trip", "--json").stdout)
    for name in ("phone", "tablet", "stranger"):  # the demo's alias, in every replica it kept
        held = json.loads(run(tmp_path / "demo" / name, "log", "--conv", "trip", "--json").stdout)
        assert held["conv"] == laptop["conv"]
    assert f"--home {tmp_path / 'demo' / 'laptop'} log --conv trip" in out.splitlines()[-1]


def test_demo_says_its_temporary_directory_goes_and_how_to_keep_it(tmp_path: Path) -> None:
    lines = run(tmp_path / "unused", "demo").stdout.splitlines()
    assert "(a temporary directory, deleted when the demo ends; --dir DIR keeps them)" in lines[0]
    temporary = Path(lines[0].split(" in ", 1)[1].split(" (", 1)[0])
    assert not temporary.exists()
    assert "convgraph demo --dir DIR" in lines[-1] and "log --conv trip" in lines[-1]


def test_verify_reports_a_wrong_turn_index_row_and_repair_rebuilds_it(tmp_path: Path) -> None:
    home = tmp_path / "r"
    init(home)
    cid = run(home, "append", "user_message", '{"content": "hi"}').stdout.strip()
    db = sqlite3.connect(home / "replica.sqlite")
    db.execute("UPDATE turn_line SET kind = 'agent_message'")  # a cache that lies about the turn
    db.commit()
    db.close()
    proc = run(home, "verify", ok=False)
    assert proc.returncode == 1 and f"{cid} turn_index" in proc.stderr and "1 failed" in proc.stdout
    fixed = run(home, "verify", "--repair")
    assert "rebuilt the turn index of" in fixed.stdout and "0 failed" in fixed.stdout
    assert json.loads(run(home, "verify", "--json", "--repair").stdout)["repaired"] == []
