"""Issue 13 part 4, "a CLI a newcomer can trust": each command that used to do the wrong thing
without a word now refuses, says what it expected and what to do next. In process with the
replica as shipped (`product_defaults`); stdin, big payloads and `python -m` as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

import cli_process
from convgraph import Replica
from convgraph.cli import commands as cli_commands
from convgraph.cli import home as cli_home
from convgraph.cli.main import cli
from convgraph.errors import MissingKeyError, ProjectionError

pytestmark = pytest.mark.usefixtures("product_defaults")


def cg(home: Path, *args: str, code: int = 0, stdin: str | bytes | None = None) -> Result:
    result = CliRunner().invoke(cli, ["--home", str(home), *args], obj={}, env={"COLUMNS": "300"}, input=stdin)
    assert result.exit_code == code, (result.output, result.exception)
    return result


def said(result: Result) -> str:
    return " ".join(result.stderr.split())  # rich may wrap a long message


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A replica made by `init`, with one turn in its default conversation."""
    cg(tmp_path / "r", "init")
    cg(tmp_path / "r", "say", "hello")
    return tmp_path / "r"


# ------------------------------------------------------------ only init creates a replica

@pytest.mark.parametrize("args", [
    ["log"], ["say", "hi"], ["verify"], ["conversations"], ["new", "t"], ["alias"], ["witness", "list"],
    ["checkpoint"], ["show", "abcdef"], ["findings"], ["export", "x.car"], ["members"],
], ids=" ".join)
def test_a_mistyped_home_makes_nothing_and_says_how_to_make_one(tmp_path: Path, args: list[str]) -> None:
    typo = tmp_path / "typo"
    refused = cg(typo, *args, code=2)
    assert f"no replica: there is no directory {typo}" in said(refused)
    assert f"convgraph init --home {typo}" in said(refused)
    assert not typo.exists()
    typo.mkdir()  # an empty directory is no replica either, and stays empty
    assert f"no replica in {typo}" in said(cg(typo, *args, code=2))
    assert list(typo.iterdir()) == []


def test_verify_on_a_mistyped_home_is_no_success(tmp_path: Path) -> None:
    assert cg(tmp_path / "nope", "verify", "--json", code=2).stdout == ""


def test_init_takes_home_after_the_command_and_from_the_environment(tmp_path: Path) -> None:
    made = json.loads(CliRunner().invoke(cli, ["init", "--home", str(tmp_path / "x"), "--json"]).stdout)
    assert made["home"] == str(tmp_path / "x") and made["created"] is True
    assert (tmp_path / "x" / "actor.key").exists()
    again = json.loads(CliRunner().invoke(cli, ["init", "--json"], env={"CONVGRAPH_HOME": str(tmp_path / "x")}).stdout)
    assert again["actor"] == made["actor"] and again["created"] is False
    # the nearer --home wins over the group's and over CONVGRAPH_HOME
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "elsewhere"), "conversations", "--home",
                                      str(tmp_path / "x"), "--json"], env={"CONVGRAPH_HOME": "/nonexistent"})
    assert result.exit_code == 0 and json.loads(result.stdout) == {"conversations": []}
    assert not (tmp_path / "elsewhere").exists()


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found: list[tuple[tuple[str, ...], click.Command]] = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            if command.invoke_without_command:
                found.append(((*path, name), command))
            found += _commands(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


def test_every_command_that_prints_takes_json_and_every_replica_command_takes_home() -> None:
    cli_commands.load_all(cli)  # the lazy ones too, whatever other tests loaded before
    commands = _commands(cli)
    assert len(commands) > 30
    no_json = [" ".join(p) for p, c in commands if not any("--json" in param.opts for param in c.params)]
    assert no_json == [], f"commands without --json: {no_json}"
    no_home = [" ".join(p) for p, c in commands if p[0] not in cli_home.WITHOUT_HOME
               and not any("--home" in param.opts for param in c.params)]
    assert no_home == [], f"commands without --home: {no_home}"


# ------------------------------------------------------------ a lost key or database

def test_a_deleted_key_is_an_error_that_says_how_to_recover_and_is_never_replaced(home: Path) -> None:
    (home / "actor.key").unlink()
    for args in (["say", "x"], ["init"], ["new", "t"], ["grant", "a" * 52, "write"]):
        refused = cg(home, *args, code=2)
        assert "actor.key is missing" in said(refused) and "restore actor.key from a backup" in said(refused)
        assert f"convgraph init --home {home} --new-key" in said(refused)
        assert not (home / "actor.key").exists()
    with pytest.raises(MissingKeyError, match=r"actor\.key is missing"):
        Replica.open(home)  # the library refuses too
    with Replica.open(home, create=False, need_key=False) as reader:  # unless asked only to read
        [conv] = reader.conversations()
        assert [t.text for t in reader.transcript(conv)] == ["hello"]
        with pytest.raises(MissingKeyError, match=r"actor\.key is missing"):
            reader.say(conv, "user", "x")
        with pytest.raises(MissingKeyError):
            _ = reader.actor
    assert len(json.loads(cg(home, "log", "--json").stdout)["records"]) == 2  # nothing was written
    renewed = json.loads(cg(home, "init", "--new-key", "--json").stdout)
    assert renewed["created"] is False and (home / "actor.key").exists()
    assert "may not" not in cg(home, "log").stdout  # the records are all still there
    assert "note:" not in said(cg(home, "log"))  # the key is back: nothing to say
    assert "2 records" in cg(home, "log").stdout
    assert "only replaces a key that is lost" in said(cg(home, "init", "--new-key", code=2))


def _read_only_calls(home: Path, tmp_path: Path) -> dict[str, list[str]]:
    """One call of each `READ_ONLY` command, against `home` (a put file and a checkpoint made)."""
    (tmp_path / "f.txt").write_text("bytes to keep")
    artifact = cg(home, "put", str(tmp_path / "f.txt")).stdout.strip()
    checkpoint = cg(home, "checkpoint").stdout.split()[0]
    me = json.loads(cg(home, "init", "--json").stdout)["actor"]
    turn = json.loads(cg(home, "log", "--json").stdout)["records"][-1]["cid"]
    return {"alias": ["alias"], "cat": ["cat", artifact], "checkpoint status": ["checkpoint", "status", checkpoint],
            "conversations": ["conversations"], "export": ["export", str(tmp_path / "out.car")],
            "findings": ["findings"], "log": ["log"], "members": ["members"], "show": ["show", turn],
            "transcript": ["transcript"], "verify": ["verify"], "why": ["why", me, "write"],
            "witness list": ["witness", "list"]}


def test_the_reading_commands_run_without_the_key_and_say_once_that_writes_need_it(
        home: Path, tmp_path: Path) -> None:
    calls = _read_only_calls(home, tmp_path)
    assert set(calls) == cli_home.READ_ONLY  # every command the list names is run here
    answers = {name: cg(home, *args).stdout for name, args in calls.items()}  # with the key
    (home / "actor.key").unlink()
    for name, args in calls.items():
        result = cg(home, *args)
        assert said(result).count(f"note: {home / 'actor.key'} is missing: reading only") == 1, name
        assert "a write needs the key" in said(result), name
        assert result.stdout == answers[name], name
    refused = cg(home, "say", "x", code=2)  # a write still stops, with the error it always gave
    assert "actor.key is missing, so nothing can be signed" in said(refused) and "note:" not in said(refused)
    assert not (home / "actor.key").exists()


@pytest.mark.parametrize("content", [b"", b"this is no database, only some words " * 4],
                         ids=["empty", "not-sqlite"])
def test_an_empty_or_foreign_database_is_an_error_and_is_left_as_it_is(home: Path, content: bytes) -> None:
    db = home / "replica.sqlite"
    for extra in home.glob("replica.sqlite-*"):
        extra.unlink()
    db.write_bytes(content)
    for args in (["log"], ["say", "x"], ["init"]):
        refused = cg(home, *args, code=2)
        assert f"{db}" in said(refused) and "restore it from a backup" in said(refused)
        assert f"convgraph init --home {home}" in said(refused)
        assert db.read_bytes() == content


# ------------------------------------------------------------ options that were dropped

@pytest.mark.parametrize("args", [
    ["--role", "user", "--tool-use-id", "c1"],
    ["--role", "assistant", "--tool-use-id", "c1"],
    ["--role", "user", "--error"],
    ["--role", "user", "--tool-call", '{"id": "c1", "name": "calc", "input": {}}'],
    ["--role", "tool", "--tool-use-id", "c1", "--tool-call", '{"id": "c1", "name": "calc"}'],
], ids=lambda a: " ".join(a[:3]))
def test_a_tool_option_with_the_wrong_role_is_refused_not_dropped(home: Path, args: list[str]) -> None:
    refused = cg(home, "say", "text", *args, code=2)
    assert "only a" in said(refused) and "say it with role" in said(refused)
    assert "1 turns" in cg(home, "transcript").stdout  # nothing was written


def test_the_library_refuses_them_too() -> None:
    replica = Replica.in_memory()
    conv = replica.create()
    with pytest.raises(ProjectionError, match="only a tool turn has a tool_use_id"):
        replica.say(conv, "user", "x", tool_use_id="c1")


# ------------------------------------------------------------ conversations that must exist

@pytest.mark.parametrize("args", [
    ["checkpoint", "--conv", "nosuch"], ["merge", "b", "--conv", "nosuch"],
    ["branch", "b", "--at", "abcdef", "--conv", "nosuch"], ["log", "--conv", "nosuch"],
    ["transcript", "--conv", "nosuch"], ["transcript", "--conv", "nosuch", "--format", "openai"],
    ["say", "hi", "--conv", "nosuch"], ["members", "--conv", "nosuch"],
], ids=lambda a: " ".join(a[:2]))
def test_a_conversation_that_does_not_exist_is_named_with_those_that_do(home: Path, args: list[str]) -> None:
    before = json.loads(cg(home, "conversations", "--json").stdout)
    refused = cg(home, *args, code=2)
    [held] = [c["conv"] for c in before["conversations"]]
    assert "no conversation 'nosuch'" in said(refused) and f"{held} (default)" in said(refused)
    assert "convgraph conversations" in said(refused)
    assert json.loads(cg(home, "conversations", "--json").stdout) == before  # nothing created


def test_checkpoint_and_merge_on_a_fresh_replica_create_nothing(tmp_path: Path) -> None:
    cg(tmp_path, "init")
    for args in (["checkpoint"], ["merge", "b"]):
        assert "the replica holds" not in said(cg(tmp_path, *args, code=2))
    assert json.loads(cg(tmp_path, "conversations", "--json").stdout) == {"conversations": []}


def test_branch_at_a_record_this_replica_does_not_hold_is_refused(home: Path, tmp_path: Path) -> None:
    ghost = "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua"
    assert "holds no record" in said(cg(home, "branch", "b", "--at", ghost, code=2))
    other = json.loads(cg(home, "new", "other", "--json").stdout)["conv"]
    there = json.loads(cg(home, "say", "elsewhere", "--conv", other, "--json").stdout)["cid"]
    refused = cg(home, "branch", "b", "--at", there, code=2)
    assert f"belongs to conversation {other}" in said(refused) and f"--conv {other}" in said(refused)


def test_conversations_lists_counts_and_last_activity(home: Path) -> None:
    [listed] = json.loads(cg(home, "conversations", "--json").stdout)["conversations"]
    [turn] = json.loads(cg(home, "transcript", "--json").stdout)["turns"]
    assert listed["records"] == 2 and listed["last_hlc"] == turn["hlc"]
    assert "Z" in listed["last_activity"]  # to the millisecond; the table shows it to the minute
    assert listed["last_activity"][:16] in cg(home, "conversations").stdout


# ------------------------------------------------------------ short CIDs

def test_the_short_ids_log_prints_are_accepted_wherever_a_cid_is(home: Path) -> None:
    question = json.loads(cg(home, "say", "plan a trip", "--json").stdout)["cid"]
    short = question[-10:]
    assert short in cg(home, "log").stdout
    assert json.loads(cg(home, "show", short, "--json").stdout)["cid"] == question
    assert json.loads(cg(home, "show", question[:14], "--json").stdout)["cid"] == question  # git-style
    cg(home, "branch", "alt", "--at", short)
    alt = json.loads(cg(home, "say", "Porto", "--branch", "alt", "--json").stdout)["cid"]
    cg(home, "merge", "alt", "--accept", alt[-8:], "--summary", "Porto it is")
    merged = json.loads(cg(home, "log", "--json").stdout)["records"][-1]
    assert merged["payload"]["accepted"] == [{"/": alt}]
    checkpoint = json.loads(cg(home, "checkpoint", "--json").stdout)["cid"]
    assert json.loads(cg(home, "checkpoint", "status", checkpoint[-10:], "--json").stdout)["cid"] == checkpoint


def test_an_ambiguous_short_cid_lists_the_candidates(home: Path) -> None:
    records = [r["cid"] for r in json.loads(cg(home, "log", "--json").stdout)["records"]]
    refused = cg(home, "show", "bafyrei", code=2)
    assert "matches 2 records" in said(refused) and all(c in said(refused) for c in records)
    assert "give more characters" in said(refused)
    assert "at least 4 of its characters" in said(cg(home, "show", "ab", code=2))
    assert "no record held here" in said(cg(home, "show", "zzzzzz", code=2))


# ------------------------------------------------------------ payloads from stdin or a file

def test_content_and_payloads_come_from_stdin_or_a_file(home: Path, tmp_path: Path) -> None:
    cg(home, "say", "-", stdin="from stdin\n")
    (tmp_path / "turn.txt").write_text("from a file")
    cg(home, "say", "@" + str(tmp_path / "turn.txt"))
    cg(home, "say", "@@alice, hi")  # @@ is a literal @
    cg(home, "append", "user_message", "-", stdin='{"content": "a payload from stdin"}')
    (tmp_path / "summary.txt").write_text("merged from a file")
    cg(home, "branch", "b", "--at", json.loads(cg(home, "log", "--json").stdout)["heads"][0])
    cg(home, "merge", "b", "--summary", "@" + str(tmp_path / "summary.txt"))
    texts = [t["content"][0]["text"] for t in json.loads(cg(home, "transcript", "--json").stdout)["turns"]]
    assert texts == ["hello", "from stdin\n", "from a file", "@alice, hi", "a payload from stdin",
                     "merged from a file"]
    missing = cg(home, "say", "@" + str(tmp_path / "nofile"), code=2)
    assert "cannot read" in missing.stderr and "write @@ for a literal @" in " ".join(missing.stderr.split())


def test_a_20_mb_payload_on_stdin_or_in_a_file_reaches_the_record_limit(home: Path, tmp_path: Path) -> None:
    """20 MB passes where an argument cannot ("Argument list too long"); the record format
    holds 1 MiB, so the answer is that limit, with what to do instead."""
    big = "x" * (20 << 20)
    (tmp_path / "big.txt").write_text(big)
    env = {**os.environ, "CONVGRAPH_HOME": str(home), "COLUMNS": "300"}
    for args, stdin in ((["say", "-"], big), (["say", "@" + str(tmp_path / "big.txt")], None)):
        proc = cli_process.run(args, module="convgraph", input=stdin, text=True, env=env, timeout=120)
        assert proc.returncode == 2 and "record too large" in proc.stderr, proc.stderr
        assert "hint: a record holds at most 1048576 bytes" in " ".join(proc.stderr.split())
    fits = "y" * 900_000
    proc = cli_process.run(["say", "-"], module="convgraph", input=fits, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    turns = json.loads(cg(home, "transcript", "--json").stdout)["turns"]
    assert turns[-1]["content"][0]["text"] == fits


# ------------------------------------------------------------ output

def test_transcript_json_is_the_json_format(home: Path) -> None:
    assert cg(home, "transcript", "--json").stdout == cg(home, "transcript", "--format", "json").stdout


def test_show_of_a_compacted_record_names_its_checkpoint_once(home: Path) -> None:
    [turn] = [r["cid"] for r in json.loads(cg(home, "log", "--json").stdout)["records"][1:]]
    checkpoint = json.loads(cg(home, "checkpoint", "--compact", "--json").stdout)["cid"]
    shown = cg(home, "show", turn)
    assert shown.exit_code == 0 and shown.stdout.count(turn) == 1, shown.stdout
    assert f"compacted behind checkpoint {checkpoint}" in " ".join(shown.stdout.split())
    body = json.loads(cg(home, "show", turn, "--json").stdout)
    assert body["compacted"] is True and body["checkpoint"] == checkpoint and body["cid"] == turn


def test_python_dash_m_convgraph_runs_the_command_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "convgraph", "init", "--home", str(tmp_path / "m"), "--json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and json.loads(proc.stdout)["created"] is True, proc.stderr


def test_star_is_no_conversation_name(home: Path) -> None:
    refused = cg(home, "log", "--conv", "*", code=2)
    assert "'*' is not a conversation name" in said(refused)
    assert "cannot be an alias" in said(cg(home, "new", "--alias", "*", code=2))
