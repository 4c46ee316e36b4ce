"""`convgraph serve` checks every argument before it announces anything: a client waiting for the
JSON line never sees one from a server that then exits (issue: `--witness-name 'a+b'`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.test_sync_cli import run
from servers import ServeProcess

ACTOR = "a" * 52


@pytest.mark.parametrize("args", [
    ["--witness", "--witness-name", "a+b"],
    ["--witness", "--witness-name", "has space"],
    ["--witness-name", "fine"],                      # names a witness that is not served
    ["--schema", "elsewhere"],                       # a schema without --db
    ["--allow", "x=y"],                              # not an actor id
    ["--allow", f"{ACTOR}"],                         # no =CONV
    ["--header-timeout", "0"],
    ["--port", "70000"],
], ids=" ".join)
def test_a_bad_argument_fails_before_the_announcement(tmp_path: Path, args: list[str]) -> None:
    run(tmp_path, "init")
    failed = run(tmp_path, "serve", "--port", "0", *args, "--json", ok=False)
    assert failed.returncode == 2, failed.stderr
    assert failed.stdout == ""  # no JSON line: nothing was announced


@pytest.mark.parametrize("args", [
    ["--witness"], ["--witness-name", "w"], ["--allow", f"{ACTOR}=*"], ["--port", "9"], ["--host", "0.0.0.0"],
    ["--db", "postgresql://127.0.0.1/test"], ["--schema", "s"], ["--header-timeout", "2"],
], ids=" ".join)
def test_an_option_a_spool_would_ignore_is_refused_before_the_announcement(tmp_path: Path, args: list[str]) -> None:
    run(tmp_path, "init")
    failed = run(tmp_path, "serve", "--spool", str(tmp_path / "spool"), *args, "--json", ok=False)
    assert failed.returncode == 2 and "not --spool" in failed.stderr, failed.stderr
    assert failed.stdout == "" and not (tmp_path / "spool").exists()


def test_an_access_file_a_spool_would_ignore_is_refused(tmp_path: Path) -> None:
    run(tmp_path, "init")
    access = tmp_path / "access.json"
    access.write_text("{}")
    failed = run(tmp_path, "serve", "--spool", str(tmp_path / "spool"), "--access", str(access), "--json", ok=False)
    assert failed.returncode == 2 and "--access" in failed.stderr and failed.stdout == ""


def test_what_an_operator_must_know_is_printed_before_the_announcement(tmp_path: Path) -> None:
    """Whoever reads up to the announcement (a script, the README's reader) has the witness's
    `witness add` line and the open-server warning already: both come before `serving … on URL`."""
    with ServeProcess(tmp_path / "server", "--witness") as served:
        pass
    log = served.log  # whole once it has stopped: stderr is read by a thread of its own
    assert "`convgraph witness add " in log and "no key may create conversations" in log, log
    serving = log.index("serving ")
    assert log.index("`convgraph witness add ") < serving and log.index("no key may create") < serving, log
