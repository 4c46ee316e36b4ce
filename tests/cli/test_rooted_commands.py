"""The rooted-conversation commands (`new`, `migrate`, `conversations`, `alias`), the default
conversation, and legacy conversations read-only: in process with the replica as shipped
(`product_defaults`), and once as a real subprocess."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from test_cli import run

import cli_process
from convgraph import AmbiguousConversationError, Config, Replica, decode_record, is_rooted
from convgraph.cli import aliases
from convgraph.cli.main import cli

pytestmark = pytest.mark.usefixtures("product_defaults")


def cg(home: Path, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["--home", str(home), *args], obj={}, env={"COLUMNS": "200"})
    assert result.exit_code == code, (result.output, result.exception)
    return result


def legacy(home: Path, conv: str, *texts: str) -> None:
    """Turns a version-1 writer put in legacy conversation `conv` (written in process)."""
    with Replica.open(home, config=Config(legacy_writes=True)) as replica:
        for text in texts:
            replica.say(conv, "user", text)


def texts(home: Path, *conv: str) -> list[str]:
    turns = json.loads(cg(home, "transcript", "--format", "json", *conv).stdout)["turns"]
    return [t["content"][0]["text"] for t in turns]


def listed(home: Path) -> dict[str, dict[str, object]]:
    """Each conversation as `conversations --json` lists it, less its last activity (a time)."""
    shown = json.loads(cg(home, "conversations", "--json").stdout)["conversations"]
    return {c["conv"]: {k: v for k, v in c.items() if k not in ("last_activity", "last_hlc")} for c in shown}


def test_new_roots_a_conversation_and_the_alias_names_it(tmp_path: Path) -> None:
    cg(tmp_path, "init")
    made = json.loads(cg(tmp_path, "new", "design review", "--alias", "review", "--json").stdout)
    conv = made["conv"]
    assert is_rooted(conv) and made == {"conv": conv, "title": "design review", "alias": "review"}
    cg(tmp_path, "say", "first point", "--conv", "review")
    assert texts(tmp_path, "--conv", "review") == texts(tmp_path, "--conv", conv) == ["first point"]
    assert listed(tmp_path)[conv] == {"conv": conv, "aliases": ["review"], "legacy": False, "records": 2,
                                      "title": "design review", "owner": listed(tmp_path)[conv]["owner"]}
    bare = cg(tmp_path, "new").stdout.strip()  # no title, no alias
    assert is_rooted(bare) and "title" not in listed(tmp_path)[bare]
    moved = cg(tmp_path, "new", "--alias", "review")
    assert f"alias 'review' named {conv} before" in moved.stderr
    assert aliases.load(tmp_path)["review"] == moved.stdout.strip()


def test_new_refuses_an_alias_that_cannot_be_one_before_writing(tmp_path: Path) -> None:
    made = cg(tmp_path, "new", "--alias", "cg1" + "a" * 32, code=2)
    assert "form of a conversation id" in made.stderr
    assert not (tmp_path / "replica.sqlite").exists()


def test_the_first_write_without_conv_roots_the_default_conversation(tmp_path: Path) -> None:
    cg(tmp_path, "init")
    first = cg(tmp_path, "say", "hello")
    conv = aliases.load(tmp_path)["default"]
    assert f"created conversation {conv}, alias 'default'" in first.stderr and "migrate" not in first.stderr
    second = cg(tmp_path, "say", "again")
    assert second.stderr == "" and aliases.load(tmp_path) == {"default": conv}
    assert texts(tmp_path) == texts(tmp_path, "--conv", "default") == ["hello", "again"]
    assert list(listed(tmp_path)) == [conv]


def test_a_failed_first_write_leaves_no_default_conversation(tmp_path: Path) -> None:
    cg(tmp_path, "init")
    failed = cg(tmp_path, "append", "user_message", '{"colour": "red"}', code=2)
    assert "undeclared field" in failed.stderr and "created" not in failed.stderr
    assert aliases.load(tmp_path) == {} and listed(tmp_path) == {}


def test_a_default_alias_lost_after_its_genesis_names_the_same_conversation_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(path: Path, body: bytes) -> None:  # the genesis is durable, the alias file is not
        raise OSError("killed")

    cg(tmp_path, "init")
    with monkeypatch.context() as patched:
        patched.setattr(aliases, "_replace", crash)
        CliRunner().invoke(cli, ["--home", str(tmp_path), "say", "hello"], obj={})
    assert aliases.load(tmp_path) == {}
    [conv] = listed(tmp_path)
    with Replica.open(tmp_path / "stranger") as stranger:  # a foreign "default" is not ours to take
        foreign = stranger.create("default")
        with Replica.open(tmp_path) as replica:
            replica.ingest([data for _, data in stranger.store.iter_all()])
    again = cg(tmp_path, "say", "again")
    assert f"alias 'default' names {conv} again" in again.stderr and "created" not in again.stderr
    assert aliases.load(tmp_path) == {"default": conv}
    assert texts(tmp_path) == ["hello", "again"] and set(listed(tmp_path)) == {conv, foreign}


def test_an_older_replica_keeps_reading_its_legacy_default(tmp_path: Path) -> None:
    legacy(tmp_path, "default", "written before rooted ids")
    assert texts(tmp_path) == ["written before rooted ids"]  # no alias yet: the legacy name
    made = cg(tmp_path, "say", "new words")
    assert "`convgraph migrate default` copies it" in made.stderr
    assert texts(tmp_path) == ["new words"]
    assert listed(tmp_path)["default"]["legacy"] is True and listed(tmp_path)["default"]["shadowed"] is True


@pytest.mark.parametrize("args", [
    ["say", "x", "--conv", "demo"],
    ["append", "user_message", '{"content": "x"}', "--conv", "demo"],
    ["checkpoint", "--conv", "demo"],
    ["merge", "alt", "--conv", "demo"],
])
def test_a_legacy_conversation_is_read_only_with_a_hint(tmp_path: Path, args: list[str]) -> None:
    legacy(tmp_path, "demo", "old words")
    refused = cg(tmp_path, *args, code=2)
    assert "'demo' is a legacy conversation" in refused.stderr
    assert "convgraph migrate demo" in " ".join(refused.stderr.split())
    assert texts(tmp_path, "--conv", "demo") == ["old words"]  # reads work
    assert "1 records" in cg(tmp_path, "log", "--conv", "demo").stdout
    assert list(listed(tmp_path)) == ["demo"] and aliases.load(tmp_path) == {}


def test_the_refusal_as_shipped_exits_2_without_a_traceback(tmp_path: Path) -> None:
    legacy(tmp_path, "demo", "old words")
    proc = run(tmp_path, "say", "x", "--conv", "demo", ok=False)
    message = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert message.startswith("error: 'demo' is a legacy conversation") and "convgraph migrate demo" in message


def test_migrate_copies_points_the_alias_and_a_second_run_copies_nothing(tmp_path: Path) -> None:
    legacy(tmp_path, "demo", "one", "two")
    first = cg(tmp_path, "migrate", "demo")
    conv = first.stdout.strip()
    assert is_rooted(conv) and aliases.load(tmp_path) == {"demo": conv}
    assert "2 turn(s) copied now, 0 before" in " ".join(first.stderr.split())
    assert texts(tmp_path, "--conv", "demo") == ["one", "two"]
    cg(tmp_path, "say", "three", "--conv", "demo")  # the alias names the rooted copy: writable
    again = json.loads(cg(tmp_path, "migrate", "demo", "--json").stdout)
    assert again == {"conv": conv, "from": "demo", "alias": "demo", "created": False, "copied": 0, "already": 2}
    assert texts(tmp_path, "--conv", conv) == ["one", "two", "three"]
    shown = listed(tmp_path)
    assert shown[conv]["migrated_from"] == "demo" and shown[conv]["records"] == 4
    assert shown["demo"] == {"conv": "demo", "aliases": [], "legacy": True, "records": 2, "shadowed": True}
    table = " ".join(cg(tmp_path, "conversations").stdout.split())  # a narrow terminal wraps cells
    assert "migrated from" in table and "legacy" in table and "alias" in table


def test_migrate_under_another_alias_and_the_refusals(tmp_path: Path) -> None:
    legacy(tmp_path, "team chat", "hi")
    conv = cg(tmp_path, "migrate", "team chat", "--alias", "team").stdout.strip()
    assert aliases.load(tmp_path) == {"team": conv}
    assert texts(tmp_path, "--conv", "team chat") == ["hi"]  # the legacy name still reads the original
    assert "holds no conversation 'nothing'" in cg(tmp_path, "migrate", "nothing", code=2).stderr
    assert "rooted conversation already" in cg(tmp_path, "migrate", conv, "--alias", "x", code=2).stderr
    assert "form of a conversation id" in cg(tmp_path, "migrate", "team chat", "--alias", conv, code=2).stderr


def test_the_alias_command_lists_points_and_forgets(tmp_path: Path) -> None:
    legacy(tmp_path, "demo", "old")
    conv = cg(tmp_path, "migrate", "demo").stdout.strip()
    assert json.loads(cg(tmp_path, "alias", "--json").stdout) == {"demo": conv}
    cg(tmp_path, "alias", "d", "demo")  # an alias may name what another alias names
    assert f"d  {conv}" in cg(tmp_path, "alias").stdout
    assert "not one" in cg(tmp_path, "alias", "x", "legacy-name", code=2).stderr
    cg(tmp_path, "alias", "demo", "--remove")
    assert texts(tmp_path, "--conv", "demo") == ["old"]  # the legacy name reaches the original again
    assert "no alias 'demo'" in cg(tmp_path, "alias", "demo", "--remove", code=2).stderr
    assert cg(tmp_path, "alias", "demo", code=2).exit_code == 2  # neither CONV nor --remove
    assert aliases.load(tmp_path) == {"d": conv}


def test_conversations_reads_the_genesis_row_and_the_snapshot_once_compacted(tmp_path: Path) -> None:
    cg(tmp_path, "init")
    conv = json.loads(cg(tmp_path, "new", "kept title", "--json").stdout)["conv"]
    cg(tmp_path, "say", "a point", "--conv", conv)
    assert listed(tmp_path)[conv]["title"] == "kept title"  # from the genesis's own row
    with Replica.open(tmp_path) as replica:
        replica.checkpoint(conv, compact=True)  # the genesis keeps only its header and snapshot entry
        first = replica.store.first(conv)
        assert first is not None and decode_record(first[1]).kind == "checkpoint"
    assert listed(tmp_path)[conv]["title"] == "kept title"  # from the fold of the snapshot


def test_conversations_fits_80_columns_with_every_id_short_and_the_title_readable(tmp_path: Path) -> None:
    home = tmp_path / "r"
    run(home, "init")
    convs = [run(home, "new", "a title long enough to need cutting on a narrow screen" * i).stdout.strip()
             for i in (1, 2)]
    env = {**os.environ, "CONVGRAPH_HOME": str(home), "COLUMNS": "80"}
    table = cli_process.run(["conversations"], text=True, env=env, timeout=60).stdout
    assert all(len(line) <= 80 for line in table.splitlines()), table
    assert all(any(aliases.short(conv) in line for line in table.splitlines()) for conv in convs), table
    assert "a title long enough" in table  # the title keeps room at 80 columns
    listed = json.loads(cli_process.run(["conversations", "--json"], text=True, env=env, timeout=60).stdout)
    assert {c["conv"] for c in listed["conversations"]} == set(convs)
    assert all(c["last_activity"].endswith("Z") for c in listed["conversations"])  # --json: to the ms


def test_conversations_prints_short_ids_that_conv_takes_back(tmp_path: Path) -> None:
    cg(tmp_path, "init")
    conv = cg(tmp_path, "new", "design review").stdout.strip()
    table = cg(tmp_path, "conversations").stdout
    assert aliases.short(conv) in table and conv not in table  # whole ids: --json
    assert json.loads(cg(tmp_path, "conversations", "--json").stdout)["conversations"][0]["conv"] == conv
    cg(tmp_path, "say", "--conv", aliases.short(conv), "hello")
    assert texts(tmp_path, "--conv", conv[:aliases.SHORT_MIN]) == ["hello"]
    assert cg(tmp_path, "log", "--conv", conv[:aliases.SHORT_MIN - 1], code=2).exit_code == 2  # too short: a name


def test_a_short_conversation_id_two_ids_start_with_is_refused_listing_both() -> None:
    held = ["cg1aaaaaaaa" + "b" * 24, "cg1aaaaaaaa" + "c" * 24, "legacy"]
    with pytest.raises(AmbiguousConversationError) as refused:
        aliases.resolve({}, "cg1aaaaa", lambda: held)
    assert refused.value.candidates == tuple(held[:2])
    assert aliases.resolve({}, "cg1aaaaaaaab", lambda: held) == held[0]
    assert aliases.resolve({"cg1aaaaa": held[1]}, "cg1aaaaa", lambda: held) == held[1]  # an alias first
    assert aliases.resolve({}, "cg1zzzzz", lambda: held) == "cg1zzzzz"  # held by none: a name, as before
    assert aliases.resolve({}, "legacy", lambda: []) == "legacy"
