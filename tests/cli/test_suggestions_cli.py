"""Each command convgraph suggests, provoked for real and run as printed (issue 27 §5).

A scenario brings about the situation a suggestion is for, takes the command from what the
CLI printed, and runs it in the same environment (`CONVGRAPH_HOME`, working directory). Only
the reader's placeholders are filled: FILE, NEW (a file the reader has), TITLE, TEXT, BASE
(the base's CID, which the error was about). A command may answer with an error of its own
(exit 1 or 2 on the facts), never with a usage error. The suggestions that need a server, a
witness or a lying peer to provoke are only parsed (tests/core/test_suggestions.py); `SERVED`
names them, so that a new suggestion must be put in one list or the other.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import cli_process
from convgraph import Replica, SigningKey
from convgraph.core import suggestions
from convgraph.core.cid import CID

_F = TypeVar("_F", bound=Callable[..., None])
PROVOKED: dict[str, str] = {}
SERVED = {"FINDINGS_SAVE": "a finding needs a peer caught lying", "CHECKPOINT_COMPACT": "a witness policy",
          "WITNESS_ADD": "serve --witness", "SERVE_SPOOL": "a spool nobody serves, waited out",
          "SERVE_WITNESS": "a server asked to cosign", "SYNC_NEW_KEY": "a server whose key changed",
          "VIEW": "the viewer's 403 page", "INIT_HERE": "the --home help text",
          # a server's 403 hints: test_sync_cli runs the hinted rule against a second server
          "SERVE_ALLOW": "a server's 403", "SERVE_ALLOW_ANY": "a server's 403", "GRANT": "a server's 403",
          "FINDINGS": "status with a finding not yet seen: a peer caught lying"}


def provokes(*names: str) -> Callable[[_F], _F]:
    """Mark a scenario as the one that provokes and runs `names` (import time, so in any order)."""
    def mark(test: _F) -> _F:
        PROVOKED.update(dict.fromkeys(names, test.__name__))
        return test
    return mark


def cg(home: Path, *args: str, cwd: Path | None = None, ok: bool = True,
       stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONVGRAPH_HOME": str(home), "COLUMNS": "200"}
    proc = cli_process.run(args, env=env, cwd=cwd, timeout=60, input=stdin)
    out = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    if ok:
        assert out.returncode == 0, out.stderr
    return out


def printed(text: str) -> list[str]:
    """The `convgraph …` commands `text` shows: in backticks, or alone on an indented line."""
    flat = " ".join(text.split())
    return re.findall(r"`(convgraph [^`]*)`", flat) + re.findall(r"^ +(convgraph .*)$", text, re.M)


def run_printed(home: Path, command: str, suggestion: suggestions.Suggestion, cwd: Path,
                **placeholders: str) -> subprocess.CompletedProcess[str]:
    """Run `command`, which the CLI printed, after checking it is `suggestion` and filling the
    reader's placeholders; in a shell when it is a pipeline."""
    shape = re.escape(suggestion.template)
    for field in suggestion.fields:
        shape = shape.replace(re.escape("{" + field + "}"), r"(?:\S|'[^']*')+")
    assert re.fullmatch(shape, command), (command, suggestion.template)
    for word, value in placeholders.items():
        command = re.sub(rf"\b{word}\b", shlex.quote(value), command)
    assert not re.search(r"\b[A-Z]{3,}\b", command), f"a placeholder left unfilled: {command}"
    env = {**os.environ, "CONVGRAPH_HOME": str(home), "COLUMNS": "200"}
    if any(op in command for op in ("&&", "|", ">")):
        shell = f"convgraph() {{ {shlex.quote(sys.executable)} -m convgraph \"$@\"; }}\n{command}"
        proc = subprocess.run(["bash", "-c", shell], env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=120, check=False)
    else:
        argv = shlex.split(command)
        assert argv[0] == "convgraph"
        raw = cli_process.run(argv[1:], env=env, cwd=cwd, timeout=60)
        proc = subprocess.CompletedProcess(raw.args, raw.returncode, raw.stdout.decode(), raw.stderr.decode())
    for usage in ("Usage:", "No such option", "No such command", "Missing argument", "Traceback"):
        assert usage not in proc.stderr, (command, proc.stderr)
    return proc


@provokes("INIT", "INIT_NEW_KEY")
def test_a_missing_replica_and_a_lost_key_name_an_init_that_works(tmp_path: Path) -> None:
    home = tmp_path / "no replica here"
    [command] = printed(cg(home, "log", ok=False).stderr)
    assert run_printed(home, command, suggestions.INIT, tmp_path).returncode == 0
    assert (home / "actor.key").exists()
    cg(home, "say", "hi")
    (home / "actor.key").unlink()
    [command] = printed(cg(home, "say", "again", ok=False).stderr)
    assert run_printed(home, command, suggestions.INIT_NEW_KEY, tmp_path).returncode == 0
    cg(home, "new", "as a new author")  # the new key owns none of the old conversations


@provokes("NEW", "CONVERSATIONS")
def test_an_unknown_conversation_names_commands_that_list_and_start_one(tmp_path: Path) -> None:
    home = tmp_path / "r"
    cg(home, "init")
    [new] = printed(cg(home, "conversations").stdout)
    assert run_printed(home, new, suggestions.NEW, tmp_path, TITLE="plans").returncode == 0
    listing, new = printed(cg(home, "log", "--conv", "nope", ok=False).stderr)
    assert "plans" in run_printed(home, listing, suggestions.CONVERSATIONS, tmp_path).stdout
    assert run_printed(home, new, suggestions.NEW, tmp_path, TITLE="more plans").returncode == 0


@provokes("LOG", "LOG_CONV")
def test_a_record_not_held_names_a_log_that_lists_them(tmp_path: Path) -> None:
    home = tmp_path / "r"
    cg(home, "init")
    said = cg(home, "say", "hello").stdout.strip()
    [command] = printed(cg(home, "show", "aaaaaaaaaa", ok=False).stderr)
    assert said[-10:] in run_printed(home, command, suggestions.LOG, tmp_path).stdout
    absent = str(CID.of_record(b"never written"))
    [command] = printed(cg(home, "branch", "alt", "--at", absent, ok=False).stderr)
    assert said[-10:] in run_printed(home, command, suggestions.LOG_CONV, tmp_path).stdout


@provokes("MIGRATE")
def test_a_legacy_conversation_names_a_migrate_that_works(tmp_path: Path) -> None:
    home = tmp_path / "r"
    cg(home, "init")
    with Replica.open(home) as r:  # the tests' replicas may write legacy ones, as older versions did
        r.say("default", "user", "from an older version")
        r.say("old chat", "user", "also old")
    [command] = printed(cg(home, "say", "hi").stderr)  # roots a new `default`, and says so
    assert run_printed(home, command, suggestions.MIGRATE, tmp_path).returncode == 0
    [command] = printed(cg(home, "say", "--conv", "old chat", "more", ok=False).stderr)
    assert command == "convgraph migrate 'old chat'"
    assert run_printed(home, command, suggestions.MIGRATE, tmp_path).returncode == 0


@provokes("WHY", "GRANT_DEVICE")
def test_a_refused_write_names_a_why_and_a_device_its_grant(tmp_path: Path) -> None:
    owner, phone = tmp_path / "owner", tmp_path / "phone"
    cg(owner, "init")
    cg(phone, "init")
    conv = json.loads(cg(owner, "new", "team", "--alias", "team", "--json").stdout)["conv"]
    cg(phone, "sync", str(owner), "--conv", conv)
    [command] = printed(cg(phone, "say", "--conv", conv, "let me in", ok=False).stderr)
    assert f"--conv {conv}" in command
    asked = run_printed(phone, command, suggestions.WHY, tmp_path)
    assert asked.returncode == 0 and "may not write" in asked.stdout
    [command] = printed(cg(phone, "device", "add", "--conv", conv).stdout)
    assert run_printed(owner, command, suggestions.GRANT_DEVICE, tmp_path).returncode == 0
    cg(phone, "sync", str(owner), "--conv", conv)
    cg(phone, "say", "--conv", conv, "in now")


@provokes("SAY_ATTACH")
def test_a_record_too_large_names_say_attach(tmp_path: Path) -> None:
    home = tmp_path / "r"
    cg(home, "init")
    big = tmp_path / "big.txt"
    big.write_text("x" * (1 << 21))
    refused = cg(home, "say", f"@{big}", ok=False)
    [command] = printed(refused.stderr)
    assert run_printed(home, command, suggestions.SAY_ATTACH, tmp_path, FILE=str(big),
                       TEXT="the log, attached").returncode == 0


@provokes("REDIFF")
def test_a_diff_that_is_no_patch_names_a_pipeline_that_makes_one(tmp_path: Path) -> None:
    home = tmp_path / "r"
    cg(home, "init")
    (tmp_path / "calc.py").write_bytes(b"a = 1\nb = 3\n")
    base = cg(home, "put", "-", stdin=b"a = 1\nb = 2\n").stdout.strip()
    cg(home, "say", "the base is in")
    before = len(json.loads(cg(home, "log", "--json").stdout)["records"])
    [command] = printed(cg(home, "patch", "--base", base, str(tmp_path / "calc.py"), ok=False).stderr)
    made = run_printed(home, command, suggestions.REDIFF, tmp_path, BASE=base, NEW="calc.py")
    assert made.returncode == 0, made.stderr
    records = json.loads(cg(home, "log", "--json").stdout)["records"]
    assert len(records) == before + 1 and records[-1]["kind"] == "patch"


@provokes("CHECKPOINT_STATUS", "CHECKPOINT")
def test_a_compacted_record_names_its_checkpoint_status(tmp_path: Path) -> None:
    home = tmp_path / "r"
    cg(home, "init")
    first = cg(home, "say", "one").stdout.strip()
    cg(home, "say", "two")
    checkpoint = cg(home, "checkpoint", "--compact").stdout.split()[0]
    [command] = printed(cg(home, "show", first).stdout)
    assert command.endswith(checkpoint)
    assert run_printed(home, command, suggestions.CHECKPOINT_STATUS, tmp_path).returncode == 0
    later = cg(home, "say", "three").stdout.strip()
    [command] = printed(cg(home, "checkpoint", "export", later, ok=False).stderr)
    assert run_printed(home, command, suggestions.CHECKPOINT, tmp_path).returncode == 0


def test_every_suggestion_is_provoked_here_or_needs_a_server() -> None:
    assert not set(SERVED) & set(PROVOKED)
    assert set(SERVED) | set(PROVOKED) == set(suggestions.ALL), sorted(
        set(suggestions.ALL) ^ (set(SERVED) | set(PROVOKED)))


@provokes("DEVICE_ADD")
def test_an_unknown_short_actor_names_the_command_that_prints_a_whole_id(tmp_path: Path) -> None:
    home = tmp_path / "r"
    cg(home, "init")
    cg(home, "say", "hello")
    [command] = printed(cg(home, "why", "zzzz", "write", ok=False).stderr)
    assert "device add" in command
    assert run_printed(home, command, suggestions.DEVICE_ADD, tmp_path).returncode == 0


@provokes("TRANSCRIPT")
def test_a_whole_langgraph_thread_names_a_transcript_of_its_conversation(tmp_path: Path) -> None:
    from importers.import_sources import forked_thread  # LangGraph only when this test runs

    home = tmp_path / "r"
    cg(home, "init")
    db = tmp_path / "lg.sqlite"
    forked_thread(db, "t1")
    [command] = printed(cg(home, "import-from", "langgraph", str(db), "--thread", "t1", "--as-thread").stderr)
    shown = run_printed(home, command, suggestions.TRANSCRIPT, tmp_path)
    assert shown.returncode == 0 and "the answer is 3" in shown.stdout  # the main line; the fork is a branch


@provokes("DEMO_KEEP", "LOG_HOME")
def test_the_demo_names_how_to_keep_its_replicas_and_read_them_again(tmp_path: Path) -> None:
    keep, log = printed(cg(tmp_path / "unused", "demo").stdout)[-2:]
    assert run_printed(tmp_path, keep, suggestions.DEMO_KEEP, tmp_path, DIR=str(tmp_path / "kept")).returncode == 0
    shown = run_printed(tmp_path, log, suggestions.LOG_HOME, tmp_path, DIR=str(tmp_path / "kept"))
    assert shown.returncode == 0 and "user_message" in shown.stdout


@provokes("WITNESS_ADD_ANY", "SYNC")
def test_status_of_a_new_replica_names_commands_that_fill_its_empty_sections(tmp_path: Path) -> None:
    home, other = tmp_path / "r", tmp_path / "other"
    cg(home, "init")
    cg(other, "init")
    cg(other, "say", "hello")
    witness, sync = printed(cg(home, "status").stdout)[-2:]
    done = run_printed(home, witness, suggestions.WITNESS_ADD_ANY, tmp_path, NAME="example.org/w1",
                       KEYHEX=SigningKey.generate().public.hex(), URL="http://127.0.0.1:9")
    assert done.returncode == 0, done.stderr
    assert run_printed(home, sync, suggestions.SYNC, tmp_path, TARGET=str(other)).returncode == 0
    [conv] = json.loads(cg(other, "conversations", "--json").stdout)["conversations"]
    assert "hello" in cg(home, "transcript", "--conv", conv["conv"]).stdout
