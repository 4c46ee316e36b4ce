"""Shell completion for bash, zsh and fish (Click's, README "Shell completion"): each shell's
script comes out, and completing `convgraph lo` offers `log`, through Click's protocol and,
for bash, through the script itself in a real bash."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# the console script as installed: Click names the program, and so the variable, from argv[0]
_DRIVER = 'import sys; sys.argv[0] = "convgraph"; from convgraph.cli.entry import main; main()'
README = Path(__file__).parents[2] / "README.md"


def _complete(env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, "-c", _DRIVER], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env}, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(("shell", "marker"), [
    ("bash", "complete -o nosort -F _convgraph_completion convgraph"),
    ("zsh", "#compdef convgraph"),
    ("fish", "complete --no-files --command convgraph"),
])
def test_each_shell_gets_its_script(shell: str, marker: str) -> None:
    script = _complete({"_CONVGRAPH_COMPLETE": f"{shell}_source"})
    assert marker in script and "_CONVGRAPH_COMPLETE" in script
    assert f"_CONVGRAPH_COMPLETE={shell}_source convgraph" in README.read_text()


def test_bash_protocol_offers_log() -> None:
    out = _complete({"_CONVGRAPH_COMPLETE": "bash_complete", "COMP_WORDS": "convgraph lo", "COMP_CWORD": "1"})
    assert out.split() == ["plain,log"]


def test_zsh_protocol_offers_log_with_its_summary() -> None:
    out = _complete({"_CONVGRAPH_COMPLETE": "zsh_complete", "COMP_WORDS": "convgraph lo", "COMP_CWORD": "1"})
    kind, name, summary = out.splitlines()
    assert (kind, name) == ("plain", "log") and summary.startswith("The conversation's records")


def test_fish_protocol_offers_log_and_lazy_commands_with_their_summaries() -> None:
    out = _complete({"_CONVGRAPH_COMPLETE": "fish_complete", "COMP_WORDS": "convgraph lo", "COMP_CWORD": "lo"})
    (line,) = out.splitlines()
    assert line.startswith("plain,log\tThe conversation's records")
    # a command registered lazily: offered with its summary (cli/commands.py), module not imported
    out = _complete({"_CONVGRAPH_COMPLETE": "fish_complete", "COMP_WORDS": "convgraph sy", "COMP_CWORD": "sy"})
    assert out.splitlines() == ["plain,sync\tReconcile with TARGET: a server URL,...",
                                "plain,system\tSet the conversation's system prompt to..."]


def test_options_of_a_command_complete_too() -> None:
    out = _complete({"_CONVGRAPH_COMPLETE": "bash_complete", "COMP_WORDS": "convgraph log --la",
                     "COMP_CWORD": "2"})
    assert out.split() == ["plain,--last"]
    out = _complete({"_CONVGRAPH_COMPLETE": "bash_complete", "COMP_WORDS": "convgraph --no-p", "COMP_CWORD": "1"})
    assert out.split() == ["plain,--no-pager"]


def test_the_bash_script_completes_in_bash(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash is not None  # the machines run bash: .ci/run is a bash script
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    command = bin_dir / "convgraph"
    command.write_text(f"#!/bin/sh\nexec {sys.executable} -c '{_DRIVER}' \"$@\"\n")
    command.chmod(0o755)
    script = _complete({"_CONVGRAPH_COMPLETE": "bash_source"})
    (tmp_path / "complete.bash").write_text(script)
    run = ('source complete.bash; COMP_WORDS=(convgraph lo); COMP_CWORD=1; '
           '_convgraph_completion convgraph; printf "%s\\n" "${COMPREPLY[@]}"')
    proc = subprocess.run([bash, "-c", run], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["log"]
