"""Long listings: streamed in fixed columns, times in UTC, and paged only on a real terminal
(a pseudo-terminal here), the way git pages."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import cli_process
from convgraph import Replica
from convgraph.cli import listing
from convgraph.cli.main import cli
from convgraph.core.hlc import Hlc

PAGER = """import os, sys
with open(sys.argv[1], "w") as f:
    f.write("LESS=" + os.environ.get("LESS", "<unset>") + "\\n" + sys.stdin.read())
"""


def test_times_are_utc_to_the_millisecond_with_the_counter_when_there_is_one() -> None:
    assert listing.utc(Hlc(0, 0)) == "1970-01-01 00:00:00.000Z"
    assert listing.utc(Hlc(1_764_800_000_123, 0)) == "2025-12-03 22:13:20.123Z"
    assert listing.utc(Hlc(1_764_800_000_007, 3)) == "2025-12-03 22:13:20.007Z+3"  # --json's form


def test_a_person_reads_the_counter_as_a_counter_not_a_time_zone() -> None:
    assert listing.when(Hlc(1_764_800_000_123, 0)) == "2025-12-03 22:13:20.123Z"
    assert listing.when(Hlc(1_764_800_000_007, 3)) == "2025-12-03 22:13:20.007Z c3"
    helped = CliRunner().invoke(cli, ["log", "--help"], obj={}).output
    assert "c2" in helped and "counter" in helped and "time zone" in helped


def test_log_prints_a_shared_millisecond_with_its_counter(tmp_path: Path) -> None:
    with Replica.open(tmp_path / "r", clock=lambda: 1_764_800_000_007) as replica:
        conv = replica.create("stopped clock")
        replica.say(conv, "user", "same millisecond")
    out = CliRunner().invoke(cli, ["--home", str(tmp_path / "r"), "log", "--conv", conv], obj={}).output
    assert "2025-12-03 22:13:20.007Z c1" in out and "Z+" not in out, out
    shown = json.loads(CliRunner().invoke(cli, ["--home", str(tmp_path / "r"), "log", "--conv", conv, "--json"],
                                          obj={}).output)
    assert [r["hlc"] for r in shown["records"]] == [[1_764_800_000_007, 0], [1_764_800_000_007, 1]]


def test_rows_are_columns_and_a_cells_further_lines_start_blank() -> None:
    lines = list(listing.rows([("a", "bb", "x\ny\tz"), ("abcdef", "c", "")], (4, 2)))
    assert lines == ["a     bb  x", " " * 10 + "y       z", "abcdef  c"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with Replica.open(tmp_path / "r") as replica:
        conv = replica.create("listing")
        for i in range(25):
            replica.say(conv, "user" if i % 2 == 0 else "assistant", f"line {i}")
    CliRunner().invoke(cli, ["--home", str(tmp_path / "r"), "alias", "default", conv], obj={})
    return tmp_path / "r"


def test_log_streams_every_record_in_order_and_json_is_the_same_value(home: Path) -> None:
    with Replica.open(home) as replica:
        [conv] = replica.conversations()
        records = replica.records(conv)
        assert [r.cid for r in replica.iter_records(conv, page=4)] == [r.cid for r in records]
    result = CliRunner().invoke(cli, ["--home", str(home), "log"], obj={})
    lines = result.output.splitlines()
    assert lines[0].split() == ["cid", "author", "seq", "time", "(UTC)", "kind", "content"]
    assert [line[:10] for line in lines[1:-1]] == [str(r.cid)[-10:] for r in records]
    assert listing.when(records[3].hlc) in lines[4] and lines[-1] == "26 records, 1 head(s)"
    shown = json.loads(CliRunner().invoke(cli, ["--home", str(home), "log", "--json"], obj={}).output)
    assert [r["cid"] for r in shown["records"]] == [str(r.cid) for r in records]
    assert shown["records"][5]["hlc"] == [records[5].hlc.wall_ms, records[5].hlc.counter]  # raw stays
    last = json.loads(CliRunner().invoke(cli, ["--home", str(home), "log", "--json", "--last", "3"], obj={}).output)
    assert [r["cid"] for r in last["records"]] == [str(r.cid) for r in records[-3:]]
    empty = json.loads(CliRunner().invoke(cli, ["--home", str(home), "log", "--json", "--last", "0"], obj={}).output)
    assert empty["records"] == [] and empty["heads"] == shown["heads"]


def _on_a_terminal(home: Path, tmp_path: Path, *args: str, env: dict[str, str]) -> tuple[str, str]:
    """Run the CLI as a process whose stdin and stdout are a pseudo-terminal; returns what
    reached the terminal and what the pager got (empty when it did not run)."""
    script, got = tmp_path / "pager.py", tmp_path / "paged.txt"
    script.write_text(PAGER)
    got.unlink(missing_ok=True)
    main, child = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k not in ("LESS", "PAGER", listing.PAGER_ENV)}
    environment.update({"COLUMNS": "200", "TERM": "xterm"}, **env)
    environment = {k: v.replace("{pager}", f"{sys.executable} {script} {got}") for k, v in environment.items()}
    proc = subprocess.Popen([sys.executable, "-m", "convgraph.cli", "--home", str(home), *args],
                            stdin=child, stdout=child, stderr=subprocess.PIPE, env=environment)
    os.close(child)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child side closed: everything was read
            break
        if not chunk:
            break
        shown += chunk
    _, errors = proc.communicate(timeout=60)  # also closes its stderr pipe
    os.close(main)
    assert proc.returncode == 0, errors
    return shown.decode(), got.read_text() if got.exists() else ""


def test_on_a_terminal_a_long_listing_goes_to_the_pager_with_less_frx(home: Path, tmp_path: Path) -> None:
    shown, paged = _on_a_terminal(home, tmp_path, "log", env={listing.PAGER_ENV: "{pager}"})
    assert paged.startswith("LESS=FRX\n") and "26 records, 1 head(s)" in paged and "line 7" in paged
    assert "line 7" not in shown
    _, paged = _on_a_terminal(home, tmp_path, "transcript", env={"PAGER": "{pager}", "LESS": "R"})
    assert paged.startswith("LESS=R\n") and "25 turns" in paged  # the reader's own LESS is kept


@pytest.mark.parametrize(("args", "env"), [
    (["--no-pager", "log"], {listing.PAGER_ENV: "{pager}"}),
    (["log"], {listing.PAGER_ENV: "cat", "PAGER": "{pager}"}),
    (["transcript"], {listing.PAGER_ENV: "", "PAGER": "{pager}"}),
])
def test_no_pager_prints_straight_through(home: Path, tmp_path: Path, args: list[str], env: dict[str, str]) -> None:
    shown, paged = _on_a_terminal(home, tmp_path, *args, env=env)
    assert paged == "" and "line 7" in shown


def test_not_a_terminal_is_never_paged(home: Path, tmp_path: Path) -> None:
    script, got = tmp_path / "pager.py", tmp_path / "paged.txt"
    script.write_text(PAGER)
    env = {**os.environ, listing.PAGER_ENV: f"{sys.executable} {script} {got}"}
    proc = cli_process.run(["--home", str(home), "log"], env=env, timeout=60, check=True, stdin=subprocess.DEVNULL)
    assert "26 records" in proc.stdout.decode() and not got.exists()
