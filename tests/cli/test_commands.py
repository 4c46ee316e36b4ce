"""The lazily registered commands (cli/commands.py): help lists them without importing them, a
command imports only its own module, and each runs as if registered at start-up."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from convgraph.cli import commands
from convgraph.cli.main import cli

# what a fresh `convgraph` process has imported when it exits (printed after its own output)
_MODULES = """
import atexit, json, sys
atexit.register(lambda: print("MODULES " + json.dumps(sorted(sys.modules))))
sys.argv = ["convgraph", *sys.argv[1:]]
from convgraph.cli.entry import main
main()
"""


def _fresh(*args: str, home: Path | None = None) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    env = {**os.environ, "COLUMNS": "200", **({"CONVGRAPH_HOME": str(home)} if home else {})}
    proc = subprocess.run([sys.executable, "-c", _MODULES, *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    out, _, modules = proc.stdout.rpartition("MODULES ")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, proc.stderr), set(json.loads(modules))


def _registered(module: str) -> dict[str, click.Command]:
    group = click.Group()
    importlib.import_module(f"convgraph.cli.{module}").register(group)
    return group.commands


def test_the_table_names_every_command_of_its_module() -> None:
    for module in {m for m, _ in commands.LAZY.values()}:
        assert set(_registered(module)) == {n for n, (m, _) in commands.LAZY.items() if m == module}, module
    assert not set(commands.LAZY) & {"init", "append", "log", "show", "verify", "demo"}  # main.py's own


@pytest.mark.parametrize("limit", [20, 45, 60, 80, 200])
def test_a_summary_is_what_the_command_itself_says(limit: int) -> None:
    for name, (module, text) in commands.LAZY.items():
        real = _registered(module)[name]
        stand_in = click.Command(name, help=text)
        assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit), (
            f"update the summary of {name!r} in cli/commands.py to its help's first sentence")


def test_help_lists_every_command_loaded_or_not() -> None:
    own = {n: c for n, c in cli.commands.items() if n not in commands.LAZY}  # others may be loaded by now
    lazy = CliRunner().invoke(commands.LazyGroup("convgraph", commands=own), ["--help"], terminal_width=100).output
    group = click.Group("convgraph", commands=own)
    commands.load_all(group)
    eager = CliRunner().invoke(group, ["--help"], terminal_width=100).output
    assert lazy.split("Commands:")[1] == eager.split("Commands:")[1]
    assert "sync " in lazy and "transcript " in lazy and "log " in lazy


def test_help_imports_no_command_module_and_no_replica() -> None:
    proc, modules = _fresh("--help")
    assert proc.returncode == 0 and "transcript" in proc.stdout and "verify-evidence" in proc.stdout
    assert not {f"convgraph.cli.{m}" for m, _ in commands.LAZY.values()} & modules
    assert "convgraph.replica.facade" not in modules and "convgraph.store.sqlite" not in modules


def test_log_imports_no_other_command(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert _fresh("init", home=home)[0].returncode == 0
    proc, modules = _fresh("say", "hello", home=home)
    assert proc.returncode == 0 and "convgraph.cli.conversation" in modules
    proc, modules = _fresh("log", "--last", "1", home=home)
    assert proc.returncode == 0 and "hello" in proc.stdout
    assert not {f"convgraph.cli.{m}" for m, _ in commands.LAZY.values()} & modules
    assert "convgraph.sync.http" not in modules and "httpx" not in modules
    proc, modules = _fresh("transcript", "--last", "1", home=home)
    assert proc.returncode == 0 and "hello" in proc.stdout
    assert {f"convgraph.cli.{m}" for m, _ in commands.LAZY.values()} & modules == {"convgraph.cli.conversation"}


def test_a_lazy_command_takes_home_and_reports_usage_errors(tmp_path: Path) -> None:
    home = tmp_path / "h"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", "--home", str(home)]).exit_code == 0
    # --home after the command name: given only by `commands.load`'s `add_everywhere`
    made = runner.invoke(cli, ["new", "lazy", "--alias", "z", "--home", str(home)])
    assert made.exit_code == 0, made.output
    listed = runner.invoke(cli, ["conversations", "--home", str(home)])
    assert listed.exit_code == 0 and "lazy" in listed.output
    wrong = runner.invoke(cli, ["--home", str(home), "members", "--no-such-option"])
    assert wrong.exit_code == 2 and "No such option" in wrong.output
    unknown = runner.invoke(cli, ["--home", str(home), "no-such-command"])
    assert unknown.exit_code == 2 and "No such command" in unknown.output
