"""The artifact and code-review commands against a real SQLite replica, each run as a process
(`put`, `cat`, `say --attach`, `snapshot`, `patch`, `review`, `ask`, `decide`), their errors
included; and the README's snapshot → patch → review → decision walk, run as written."""

from __future__ import annotations

import base64
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cli_process
from convgraph import Replica
from convgraph.artifacts.blocks import CHUNK_SIZE
from convgraph.artifacts.diff import make_unified_diff
from convgraph.cli.main import cli
from convgraph.core.cid import CID
from convgraph.core.keys import parse_actor
from convgraph.replica import Config

ROOT = Path(__file__).resolve().parents[2]


def cg(home: Path, *args: str, cwd: Path | None = None, stdin: bytes | None = None,
       ok: bool = True) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "CONVGRAPH_HOME": str(home), "COLUMNS": "200"}
    proc = cli_process.run(args, input=stdin, env=env, cwd=cwd, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr.decode()
    return proc


def js(home: Path, *args: str, **kw: Any) -> Any:
    return json.loads(cg(home, *args, "--json", **kw).stdout)


def failed(proc: subprocess.CompletedProcess[bytes]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    return " ".join(proc.stderr.decode().split())


@pytest.fixture
def home(tmp_path: Path) -> Path:
    cg(tmp_path / "r", "init")
    return tmp_path / "r"


def test_put_and_cat_round_trip_files_and_stdin(home: Path, tmp_path: Path) -> None:
    for size in (0, 1, CHUNK_SIZE, CHUNK_SIZE + 1):
        data = os.urandom(size)
        (tmp_path / "f").write_bytes(data)
        cid = cg(home, "put", str(tmp_path / "f")).stdout.decode().strip()
        assert cg(home, "cat", cid).stdout == data
        assert js(home, "put", "-", stdin=data) == {"cid": cid, "size": size}
        assert js(home, "cat", cid) == {"cid": cid, "size": size, "base64": base64.b64encode(data).decode()}
        if size <= CHUNK_SIZE:  # one raw block: the CID `ipfs add --cid-version 1` gives
            assert cid == str(CID.of_raw(data))


def test_cat_takes_a_short_cid_of_an_artifact_a_record_names(home: Path, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"attached\n")
    refs = js(home, "say", "see file", "--attach", str(tmp_path / "a.txt"))["refs"]
    assert refs == [str(CID.of_raw(b"attached\n"))]
    assert cg(home, "cat", refs[0][-10:]).stdout == b"attached\n"
    assert cg(home, "cat", refs[0][:14]).stdout == b"attached\n"
    shown = js(home, "show", js(home, "log")["records"][-1]["cid"])
    assert shown["refs"] == [{"/": refs[0]}]
    (tmp_path / "b.txt").write_bytes(b"another\n")
    cg(home, "say", "two now", "--attach", str(tmp_path / "b.txt"), "--attach", str(tmp_path / "a.txt"))
    assert "'bafkrei' matches 2" in failed(cg(home, "cat", "bafkrei", ok=False))


def test_cat_and_put_errors_exit_2_saying_what(home: Path, tmp_path: Path) -> None:
    absent = str(CID.of_raw(b"never stored"))
    assert f"not held (artifact {absent})" in failed(cg(home, "cat", absent, ok=False))
    assert "no record held here" in failed(cg(home, "cat", "zzzzzzzz", ok=False))
    assert "not a CID" in failed(cg(home, "cat", "x!", ok=False))
    assert "cannot read" in failed(cg(home, "put", str(tmp_path / "nope"), ok=False))
    assert "does not exist" in failed(cg(home, "say", "x", "--attach", str(tmp_path / "nope"), ok=False))


def test_too_large_is_refused_with_a_hint(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened = Replica.open.__func__  # type: ignore[attr-defined]

    def small(cls: type[Replica], path: Path, **kw: Any) -> Replica:  # a replica configured with a tiny limit
        return opened(cls, path, config=Config(max_artifact_bytes=8), **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(Replica, "open", classmethod(small))
    (tmp_path / "big").write_bytes(b"123456789")
    result = CliRunner().invoke(cli, ["--home", str(home), "put", str(tmp_path / "big")])
    assert result.exit_code == 2
    assert "max_artifact_bytes" in result.stderr and "error:" in result.stderr
    result = CliRunner().invoke(cli, ["--home", str(home), "say", "x", "--attach", str(tmp_path / "big")])
    assert result.exit_code == 2
    with Replica.open(home) as r:
        assert r.conversations() == []  # the turn and its conversation were never written


def test_snapshot_prints_its_tree_and_what_it_skipped(home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "src" / ".git").mkdir(parents=True)
    (work / "src" / "app.py").write_bytes(b"print('hi')\n")
    (work / "src" / ".git" / "HEAD").write_bytes(b"ref")
    (work / "src" / "link.py").symlink_to(work / "src" / "app.py")
    made = js(home, "snapshot", "src", cwd=work)
    assert made["tree"] == {"src/app.py": str(CID.of_raw(b"print('hi')\n"))}
    assert made["skipped"] == [{"path": "src/link.py", "reason": f"symlink to {work / 'src' / 'app.py'}: not followed"}]
    plain = cg(home, "snapshot", "app.py", "link.py", "--root", str(work / "src"))
    assert plain.stdout.decode().strip().startswith("bafyrei")
    assert "skipped link.py: symlink" in plain.stderr.decode()
    assert "does not exist" in failed(cg(home, "snapshot", "missing.py", cwd=work, ok=False))
    assert "outside the snapshot's root" in failed(cg(home, "snapshot", "..", cwd=work, ok=False))


def test_patch_from_a_file_or_stdin_and_its_errors(home: Path, tmp_path: Path) -> None:
    old, new = b"a = 1\nb = 2\n", b"a = 1\nb = 3\n"
    (tmp_path / "old.py").write_bytes(old)
    base = cg(home, "put", str(tmp_path / "old.py")).stdout.decode().strip()
    (tmp_path / "fix.diff").write_text(make_unified_diff(old, new, "calc.py"))
    made = js(home, "patch", "--base", base, str(tmp_path / "fix.diff"))
    assert made["base"] == base and made["result"] == str(CID.of_raw(new))
    assert cg(home, "cat", made["result"]).stdout == new
    record = js(home, "show", made["cid"])
    assert record["kind"] == "patch" and record["payload"]["path"] == "calc.py"
    again = js(home, "patch", "--base", base[-10:], "-", "--path", "x.py",
               stdin=(tmp_path / "fix.diff").read_bytes())
    assert again["result"] == made["result"]
    count = len(js(home, "log")["records"])
    stale = make_unified_diff(b"a = 0\nb = 2\n", new, "calc.py").encode()
    said = failed(cg(home, "patch", "--base", base, "-", stdin=stale, ok=False))
    assert "hunk 1" in said and "hint: make the diff against the base itself" in said
    assert "not held" in failed(cg(home, "patch", "--base", str(CID.of_raw(b"gone")), "-", stdin=stale, ok=False))
    assert "not UTF-8" in failed(cg(home, "patch", "--base", base, "-", stdin=b"\xff\xfe", ok=False))
    assert len(js(home, "log")["records"]) == count  # nothing signed for any of them


def test_patch_refuses_input_that_is_not_a_diff_and_signs_nothing(home: Path, tmp_path: Path) -> None:
    old, new = b"a = 1\nb = 2\n", b"a = 1\nb = 3\n"
    (tmp_path / "calc.py").write_bytes(new)  # the new source file, given instead of a diff
    (tmp_path / "headers.diff").write_text("--- a/calc.py\n+++ b/calc.py\n")
    base = cg(home, "put", "-", stdin=old).stdout.decode().strip()
    js(home, "say", "before")  # the conversation exists, so a refusal leaves its records as they are
    count = len(js(home, "log")["records"])
    cases = [([str(tmp_path / "calc.py")], None, "not a unified diff"),
             (["-"], b"", "the diff is empty"),
             (["-"], b"\x01\x02 garbage \x7f\n", "not a unified diff"),
             (["-"], b"\xff\xfe\x00", "not UTF-8"),
             ([str(tmp_path / "headers.diff")], None, "headers but no hunk")]
    for args, stdin, said in cases:
        proc = cg(home, "patch", "--base", base, *args, stdin=stdin, ok=False)
        text = failed(proc)
        assert text.startswith("error: ") and said in text, text
        assert "Traceback" not in text and proc.stdout == b""
    assert len(js(home, "log")["records"]) == count  # nothing signed for any of them
    (tmp_path / "fix.diff").write_text(make_unified_diff(old, new, "calc.py"))
    assert js(home, "patch", "--base", base, str(tmp_path / "fix.diff"))["result"] == str(CID.of_raw(new))


def test_review_ask_decide_and_their_errors(home: Path, tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x\n")
    snap = js(home, "snapshot", "f", cwd=tmp_path)["cid"]
    review = js(home, "review", snap[-10:], "--verdict", "request_changes", "--body", "needs a test")
    assert review["target"] == snap
    turn = js(home, "say", "hello")["cid"]
    assert "a user_message: expected a code_snapshot or patch" in failed(
        cg(home, "review", turn, "--body", "no", ok=False))
    assert "'lgtm' is not one of 'approve'" in failed(cg(home, "review", snap, "--verdict", "lgtm", "--body", "x", ok=False))
    ask = js(home, "ask", "ship it?", "--subject", snap, "--option", "ship", "--option", "wait", "--reviews", "1")
    shown = js(home, "show", ask["cid"])["payload"]
    assert shown == {"question": "ship it?", "subject": {"/": snap}, "options": ["ship", "wait"], "reviews": 1}
    said = failed(cg(home, "decide", ask["cid"], "maybe", ok=False))
    assert "'maybe' is not one of the request's options: 'ship', 'wait'" in said
    assert "expected a decision_request" in failed(cg(home, "decide", snap, "ship", ok=False))
    decision = js(home, "decide", ask["cid"][-10:], "wait", "--rationale", "tests first")
    assert decision["request"] == ask["cid"]
    me = js(home, "init")["actor"]
    named = js(home, "ask", "again?", "--subject", snap, "--reviewer", me)
    key = base64.b64encode(parse_actor(me)).decode().rstrip("=")
    assert js(home, "show", named["cid"])["payload"]["reviewers"] == [{"/": {"bytes": key}}]
    assert "52-character actor id" in failed(cg(home, "ask", "x", "--reviewer", "nobody", ok=False))
    kinds = [r["kind"] for r in js(home, "log")["records"]]
    assert kinds[-6:] == ["code_snapshot", "review_comment", "user_message", "decision_request", "decision",
                          "decision_request"]


def _readme_walk() -> str:
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme[readme.index("\n### Code under review: snapshot, patch, review, decision\n"):]
    section = section[: re.search(r"\n##+ ", section[1:]).start() + 1]  # type: ignore[union-attr]
    found = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert found, "README.md's code review section has no sh block"
    return found.group(1)


def test_readme_code_review_walk_runs_as_written(tmp_path: Path) -> None:
    """The README's snapshot → patch → review → decision walk, run by bash -e as written, in an
    empty directory with `convgraph` on PATH; then what it left is read back."""
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("CONVGRAPH_HOME", None)
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", _readme_walk()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Replica.open(tmp_path / ".convgraph") as r:
        [conv] = r.conversations()
        records = r.records(conv)
        kinds = [x.kind for x in records]
        assert kinds[-5:] == ["patch", "review_comment", "decision_request", "decision", "user_message"]
        snap = next(x for x in records if x.kind == "code_snapshot")
        patch, review, request, decision, said = records[-5:]
        assert said.refs == (CID.of_raw((tmp_path / "fix.diff").read_bytes()),)
        assert patch.payload["base"] in snap.payload["tree"].values()
        assert review.payload["target"] == patch.cid and request.payload["subject"] == patch.cid
        assert decision.payload["request"] == request.cid
        assert r.get_artifact(patch.payload["result"]) == (tmp_path / "new" / "calc.py").read_bytes()
        assert r.authority(conv).findings() == ()  # the review the request asked for came first


def test_cat_stops_at_a_rotten_block_after_the_good_ones(home: Path) -> None:
    """A chunk changed on disk is never written out: `cat` streams the chunks before it, then
    exits 2 naming the block; the viewer's and get_artifact's checks are the same."""
    data = os.urandom(CHUNK_SIZE * 2 + 5)
    cid = cg(home, "put", "-", stdin=data).stdout.decode().strip()
    second = CID.of_raw(data[CHUNK_SIZE: 2 * CHUNK_SIZE])
    with sqlite3.connect(home / "replica.sqlite") as db:
        db.execute("UPDATE blocks SET data = ? WHERE cid = ?", (b"\0" * CHUNK_SIZE, bytes(second)))
    rotten = cg(home, "cat", cid, ok=False)
    assert rotten.stdout == data[:CHUNK_SIZE]
    assert str(second) in failed(rotten)
    assert str(second) in failed(cg(home, "cat", cid, "--json", ok=False))


def test_a_decision_on_code_that_changed_after_its_review_is_shown_stale(home: Path, tmp_path: Path) -> None:
    v1, v2, v3 = b"n = 1\n", b"n = 2\n", b"n = 3\n"
    (tmp_path / "v1.py").write_bytes(v1)
    base = cg(home, "put", str(tmp_path / "v1.py")).stdout.decode().strip()
    first = js(home, "patch", "--base", base, "-", stdin=make_unified_diff(v1, v2, "n.py").encode())
    js(home, "review", first["cid"], "--verdict", "approve", "--body", "fine")
    ask = js(home, "ask", "merge?", "--subject", first["cid"], "--option", "merge", "--reviews", "1")
    # a newer patch on top of the reviewed one lands before the decision, and nobody reviews it
    second = js(home, "patch", "--base", first["result"], "-", stdin=make_unified_diff(v2, v3, "n.py").encode())
    made = cg(home, "decide", ask["cid"], "merge")
    assert "STALE" in made.stderr.decode() and second["cid"] in made.stderr.decode()
    decision = made.stdout.decode().strip()
    shown = js(home, "show", decision)
    assert [(a["kind"], a["newer"]) for a in shown["authority"]] == [("stale", [second["cid"]])]
    assert "unreviewed newer patch" in cg(home, "show", decision).stderr.decode()
    assert "authority" not in js(home, "show", ask["cid"])  # only the decision is stale
