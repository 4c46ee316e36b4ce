"""`convgraph export` / `convgraph import`, run as real child processes (`cli_process`) against SQLite replicas."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import cli_process
from convgraph import Draft, ManualClock, Replica
from convgraph.core.cid import CID
from convgraph.core.codec import encode
from convgraph.errors import StoreError
from convgraph.projections import state as state_
from convgraph.projections.transcript import transcript_bytes
from convgraph.sync import carfile
from convgraph.sync.car import write_car
from convgraph.sync.varint import uvarint


def run(home: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONVGRAPH_HOME": str(home), "COLUMNS": "200"}
    proc = cli_process.run(args, text=True, env=env, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def init(home: Path) -> Path:
    """`home`, with a replica made there by `convgraph init` (the only command that makes one)."""
    run(home, "init")
    return home


def run_json(home: Path, *args: str, ok: bool = True) -> tuple[int, dict[str, Any]]:
    proc = run(home, *args, "--json", ok=ok)
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A replica with three conversations: two authors (two heads) in x, a branch in y."""
    home = tmp_path_factory.mktemp("car") / "a"
    clock = ManualClock()
    other = Replica.in_memory(clock=clock)
    with Replica.open(home, clock=clock) as r:
        r.write_many("x", [Draft("user_message", {"content": f"x{i}"}) for i in range(6)])
        other.ingest([d for _, d in r.store.records("x")])
        clock.advance(10)
        r.ingest([other.say("x", "assistant", "a concurrent reply").data])
        r.write("x", "user_message", {"content": "and mine"})  # joins both heads
        r.ingest([other.say("x", "assistant", "another concurrent reply").data])
        first = r.say("y", "user", "hello")
        r.say("y", "assistant", "hi")
        r.branch("y", "alt", first.cid)
        r.say("y", "user", "on the branch", branch="alt")
        r.write_many("z", [Draft("user_message", {"content": f"z{i}"}) for i in range(3)])
        assert len(r.heads("x")) == 2
    return home


def held(home: Path) -> dict[str, list[tuple[CID, bytes]]]:
    with Replica.open(home) as r:
        return {c: r.store.records(c) for c in r.conversations()}


def heads(home: Path, *convs: str) -> list[str]:
    with Replica.open(home) as r:
        return [str(c) for c in sorted({h for c in convs for h in r.heads(c)})]


def test_export_then_import_into_a_fresh_replica_gives_identical_records(source: Path, tmp_path: Path) -> None:
    file = tmp_path / "all.car"
    before = held(source)
    total = sum(len(v) for v in before.values())
    _, exported = run_json(source, "export", str(file))
    assert exported == {
        "file": str(file), "records": total, "roots": heads(source, "x", "y", "z"),
        "bytes": file.stat().st_size, "compacted": 0, "checkpoints": 0, "artifact_blocks": 0,
    }
    assert len(exported["roots"]) == 4
    fresh = init(tmp_path / "b")
    _, report = run_json(fresh, "import", str(file))
    assert report["accepted"] == report["blocks"] == total
    assert report["rejected"] == [] and report["rejected_total"] == 0 and report["error"] is None
    assert report["roots_held"] and report["missing_roots"] == [] and report["roots"] == exported["roots"]
    assert held(fresh) == before
    for conv in before:
        assert heads(fresh, conv) == heads(source, conv)
    again = run(fresh, "import", str(file)).stdout
    assert f"duplicates   {total}" in again and "accepted     0" in again and "roots: 4/4 held (all)" in again
    assert json.loads(run(fresh, "verify", "--json").stdout)["ok"]


def test_export_human_output_and_chosen_conversations(source: Path, tmp_path: Path) -> None:
    file = tmp_path / "xz.car"
    out = run(source, "export", str(file), "--conv", "z", "--conv", "x", "--conv", "x").stdout
    before = held(source)
    n = len(before["x"]) + len(before["z"])
    assert f"wrote {n} records, 3 root(s)" in out
    fresh = init(tmp_path / "b")
    _, report = run_json(fresh, "import", str(file))
    assert report["accepted"] == n and report["roots"] == heads(source, "x", "z")
    after = held(fresh)
    assert sorted(after) == ["x", "z"] and after["x"] == before["x"] and after["z"] == before["z"]


def test_export_of_an_unknown_conversation_fails_and_writes_nothing(source: Path, tmp_path: Path) -> None:
    proc = run(source, "export", str(tmp_path / "none.car"), "--conv", "nope", ok=False)
    assert proc.returncode == 2 and "no conversation 'nope'" in proc.stderr
    proc = run(source, "export", str(tmp_path / "missing" / "dir.car"), ok=False)
    assert proc.returncode == 2 and "cannot write" in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_failed_export_leaves_no_half_file(source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "keep.car"
    target.write_bytes(b"the previous export")

    def broken(out: io.BufferedWriter, *_: object, **__: object) -> int:
        out.write(b"half a file")
        raise StoreError("the store went away mid-export")

    monkeypatch.setattr(carfile, "write_car", broken)
    with Replica.open(source) as r, pytest.raises(StoreError):
        carfile.export_car(r, target)
    assert target.read_bytes() == b"the previous export"
    assert list(tmp_path.iterdir()) == [target]


def test_a_tampered_block_is_rejected_and_every_other_block_still_read(source: Path, tmp_path: Path) -> None:
    file = tmp_path / "t.car"
    run(source, "export", str(file))
    data = bytearray(file.read_bytes())
    by_conv = held(source)
    order = [pair for recs in by_conv.values() for pair in recs]  # the file's block order
    victim = 7
    cid, body = order[victim]
    victim_conv = next(conv for conv, recs in by_conv.items() if (cid, body) in recs)
    at = data.find(body)
    assert at > 0
    data[at + len(body) // 2] ^= 0x01
    file.write_bytes(bytes(data))
    fresh = init(tmp_path / "b")
    code, report = run_json(fresh, "import", str(file), ok=False)
    assert code == 1 and report["error"] is None  # a rejected record, not a broken file
    assert report["blocks"] == len(order)
    assert [(r["cid"], r["rule"]) for r in report["rejected"]] == [(str(cid), "cid")]
    assert "does not hash" in report["rejected"][0]["error"]
    with Replica.open(fresh) as r:
        assert all(r.store.has(c) for c, _ in order[:victim])
        assert not r.store.has(cid)
        others = [c for conv, recs in by_conv.items() if conv != victim_conv for c, _ in recs]
        assert all(r.store.has(c) for c in others)
        assert any(r.store.has(c) for c, _ in order[victim + 1 :])  # blocks after the tampered one landed
    proc = run(init(tmp_path / "c"), "import", str(file), ok=False)
    assert proc.returncode == 1 and str(cid) in proc.stderr and "Traceback" not in proc.stderr


def test_records_that_break_a_rule_are_rejected_by_cid_and_rule(source: Path, tmp_path: Path) -> None:
    good_cid, good = held(source)["z"][0]
    alien = encode({"hello": "not a record"})
    unsigned = encode({"conv": "z", "kind": "user_message"})
    blocks = [(CID.of_record(alien), alien), (good_cid, good), (CID.of_record(unsigned), unsigned)]
    file = tmp_path / "mixed.car"
    with file.open("wb") as fh:
        write_car(fh, [good_cid], blocks)
    code, report = run_json(init(tmp_path / "b"), "import", str(file), ok=False)
    assert code == 1 and report["accepted"] == 1 and report["roots_held"]
    assert [(r["cid"], r["rule"]) for r in report["rejected"]] == [
        (str(CID.of_record(alien)), "schema"), (str(CID.of_record(unsigned)), "schema"),
    ]
    proc = run(init(tmp_path / "c"), "import", str(file), ok=False)
    assert proc.returncode == 1 and "REJECT" in proc.stderr and str(CID.of_record(alien)) in proc.stderr


def test_a_file_that_is_no_car_exits_2_without_a_traceback(tmp_path: Path) -> None:
    junk = tmp_path / "junk.car"
    junk.write_bytes(b"PK\x03\x04 this is a zip file")
    code, report = run_json(init(tmp_path / "b"), "import", str(junk), ok=False)
    assert code == 2 and report["blocks"] == 0 and "byte" in report["error"]
    carv2 = tmp_path / "v2.car"
    carv2.write_bytes(bytes.fromhex("0aa16776657273696f6e02") + bytes(40))
    proc = run(init(tmp_path / "b"), "import", str(carv2), ok=False)
    assert proc.returncode == 2 and "CARv2 is not supported" in proc.stderr and "Traceback" not in proc.stderr


def test_import_tells_a_file_that_is_no_car_from_a_car_cut_short(tmp_path: Path) -> None:
    r = Replica.in_memory(clock=ManualClock())
    r.write_many("x", [Draft("user_message", {"content": f"x{i}"}) for i in range(3)])
    whole = io.BytesIO()
    write_car(whole, r.heads("x"), r.store.records("x"))
    cases = {"empty.car": (b"", "not a CAR file: it is empty"),
             "notes.txt": (b"# notes\nthis is a text file, not a CAR\n", "not a CAR file: byte 1 is 0x20"),
             "a.zip": (b"PK\x03\x04 this is a zip file", "not a CAR file: byte 1 is 0x4b"),
             "cut.car": (whole.getvalue()[:20], "truncated CAR: header needs")}
    home = init(tmp_path / "h")
    for name, (data, said) in cases.items():
        (tmp_path / name).write_bytes(data)
        proc = run(home, "import", str(tmp_path / name), ok=False)
        assert proc.returncode == 2 and f"error: {said}" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        assert ("truncated" in proc.stderr) == (name == "cut.car")
        with Replica.open(home) as replica:  # the API says the same
            assert said in str(carfile.import_car(replica, tmp_path / name).error)
            assert replica.conversations() == []


def _section(raw_cid: bytes, data: bytes) -> bytes:
    return uvarint(len(raw_cid) + len(data)) + raw_cid + data


def _car_with_foreign_blocks(roots: list[CID], records: list[tuple[CID, bytes]], artifact: bytes) -> bytes:
    """A valid CARv1: the records with a raw block, a CIDv0 block and an identity-hash block
    halfway through, as IPFS tools write them."""
    raw = bytes(CID.of_raw(artifact))
    v0 = b"\x12\x20" + hashlib.sha256(b"\x0a\x00").digest()
    identity = b"\x01\x55\x00\x04" + b"tiny"
    header = encode({"roots": roots, "version": 1})
    half = len(records) // 2
    body = [_section(bytes(c), d) for c, d in records]
    foreign = [_section(raw, artifact), _section(v0, b"\x0a\x00"), _section(identity, b"tiny")]
    return uvarint(len(header)) + header + b"".join([*body[:half], *foreign, *body[half:]])


def test_blocks_that_are_no_records_are_skipped_and_reported_and_the_rest_imported(tmp_path: Path) -> None:
    with Replica.open(tmp_path / "a", clock=ManualClock()) as r:
        r.write_many("c", [Draft("user_message", {"content": f"{i}"}) for i in range(13)])
        blob = b"the bytes of an artifact"
        r.write("c", "code_snapshot", {"path": "a.py", "blob": CID.of_raw(blob)}, refs=[CID.of_raw(blob)])
        records, roots = r.store.records("c"), r.heads("c")
    file = tmp_path / "mixed.car"
    file.write_bytes(_car_with_foreign_blocks(roots, records, b"named by no record"))
    code, report = run_json(init(tmp_path / "b"), "import", str(file), ok=False)
    assert code == 1 and report["error"] is None and report["blocks"] == 17
    assert report["accepted"] == 14 and report["roots_held"] and report["rejected_total"] == 0
    assert report["skipped_total"] == 3 and report["artifacts"] == 0
    # raw blocks are judged at the end of the file (a record after them may name them)
    assert [k["reason"].split(":")[0] for k in report["skipped"]] == ["CIDv0", "identity hash", "codec 0x55"]
    assert report["problems"] == ["3 block(s) that are no records, named by no record's refs"]
    proc = run(init(tmp_path / "c"), "import", str(file), ok=False)
    assert proc.returncode == 1 and "SKIP" in proc.stderr and "problems: 3 block(s)" in proc.stdout
    file.write_bytes(_car_with_foreign_blocks(roots, records, blob))  # now the raw block is an artifact
    code, report = run_json(init(tmp_path / "d"), "import", str(file), ok=False)
    assert code == 1 and report["accepted"] == 14 and report["artifacts"] == 1
    assert report["problems"] == ["2 block(s) that are no records, named by no record's refs"]


def test_a_missing_root_or_a_record_left_waiting_is_a_problem(tmp_path: Path) -> None:
    clock = ManualClock()
    with Replica.open(tmp_path / "a", clock=clock) as r:
        made = r.write_many("c", [Draft("user_message", {"content": f"{i}"}) for i in range(4)])
    gap = tmp_path / "gap.car"
    with gap.open("wb") as fh:  # the second record is not in the file: the last two wait for it
        write_car(fh, [made[-1].cid], [(m.cid, m.data) for m in made if m is not made[1]])
    code, report = run_json(init(tmp_path / "b"), "import", str(gap), ok=False)
    assert code == 1 and report["accepted"] == 1 and report["quarantined"] == 2 and not report["roots_held"]
    assert report["problems"] == ["2 record(s) left in quarantine, waiting for parents", "1 root(s) missing"]
    proc = run(init(tmp_path / "b"), "import", str(gap), ok=False)  # still waiting on a second try
    assert proc.returncode == 1 and "quarantined  2" in proc.stdout and "missing root" in proc.stdout
    in_an_hour = ManualClock(int(time.time() * 1000) + 3_600_000)  # the CLI reads the real clock
    future = Replica.in_memory(clock=in_an_hour).say("c", "user", "from the future")
    ahead = tmp_path / "ahead.car"
    with ahead.open("wb") as fh:
        write_car(fh, [future.cid], [(future.cid, future.data)])
    code, report = run_json(init(tmp_path / "c"), "import", str(ahead), ok=False)
    assert code == 1 and report["held"] == 1 and report["problems"] == [
        "1 record(s) held, timestamped ahead of this machine's clock", "1 root(s) missing"]


def compacted_source(home: Path) -> dict[str, Any]:
    """30 records compacted behind a checkpoint, then a late reply naming a compacted one as
    parent, a branch and more turns: what each view of the conversation gives."""
    clock = ManualClock()
    other = Replica.in_memory(clock=clock)
    with Replica.open(home, clock=clock) as r:
        r.write_many("c", [Draft("user_message", {"content": f"turn {i}"}) for i in range(28)])
        other.ingest([d for _, d in r.store.records("c")])
        first = r.say("c", "user", "a fork point")
        r.say("c", "assistant", "before the checkpoint")
        late = other.say("c", "assistant", "written before, arriving after the checkpoint")
        r.checkpoint("c", compact=True)
        r.ingest([late.data])
        r.branch("c", "alt", first.cid)
        r.say("c", "user", "on the branch", branch="alt")
        r.say("c", "user", "after the checkpoint")
        assert r.store.count("c") - len(r.store.records("c")) == 30
        return {"main": transcript_bytes(r.transcript("c")), "alt": transcript_bytes(r.transcript("c", branch="alt")),
                "heads": r.heads("c"), "state": state_.snapshot(r.state("c")), "count": r.store.count("c")}


def test_a_compacted_conversation_rebuilds_from_its_own_car(tmp_path: Path) -> None:
    views = compacted_source(tmp_path / "a")
    file = tmp_path / "c.car"
    _, exported = run_json(tmp_path / "a", "export", str(file))
    assert exported["compacted"] == 30 and exported["checkpoints"] == 1
    code, report = run_json(init(tmp_path / "b"), "import", str(file))
    assert code == 0 and report["ok"] and report["problems"] == [], report
    assert report["quarantined"] == report["held"] == report["rejected_total"] == report["skipped_total"] == 0
    assert report["roots_held"] and report["accepted"] == exported["records"]
    assert [a["covers"] for a in report["adopted"]] == [30]
    with Replica.open(tmp_path / "b") as r:
        assert transcript_bytes(r.transcript("c")) == views["main"]
        assert transcript_bytes(r.transcript("c", branch="alt")) == views["alt"]
        assert r.heads("c") == views["heads"] and r.store.count("c") == views["count"]
        assert state_.snapshot(r.state("c")) == views["state"]
        verified = r.verify()
        assert verified.ok and verified.headers_only == 30
    again = tmp_path / "again.car"
    run(tmp_path / "b", "export", str(again))
    assert again.read_bytes() == file.read_bytes()  # the adopted replica hands on the same file
    code, report = run_json(init(tmp_path / "b"), "import", str(file))
    assert code == 0 and report["duplicates"] == exported["records"] and report["adopted"] == []
    out = run(init(tmp_path / "c"), "import", str(file)).stdout
    assert "adopted checkpoint" in out and "30 compacted record(s)" in out and "ok: every block imported" in out


def test_a_big_import_shows_progress_on_a_terminal(tmp_path: Path) -> None:
    home = tmp_path / "a"
    with Replica.open(home) as r:
        r.write_many("big", [Draft("user_message", {"content": f"{i} " + "x" * 200_000}) for i in range(25)])
        carfile.export_car(r, tmp_path / "big.car")
    assert (tmp_path / "big.car").stat().st_size > 4 << 20
    master, slave = pty.openpty()
    seen = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        env = {**os.environ, "CONVGRAPH_HOME": str(init(tmp_path / "b")), "TERM": "xterm"}
        proc = subprocess.run([sys.executable, "-m", "convgraph.cli", "import", str(tmp_path / "big.car")],
                              stdout=subprocess.PIPE, stderr=slave, text=True, env=env, timeout=60, check=False)
    finally:
        os.close(slave)
        reader.join(5)
        os.close(master)
    assert proc.returncode == 0 and "accepted     25" in proc.stdout
    assert b"importing" in seen
    assert "importing" not in run(init(tmp_path / "c"), "import", str(tmp_path / "big.car")).stderr  # not a TTY
