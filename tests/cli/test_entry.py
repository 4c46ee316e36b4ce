"""The console script's entry (cli/entry.py): Ctrl-C, during start-up or in a command, exits 130
with no traceback; everything else exits as click's standalone mode would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from convgraph.cli import entry, home


def test_ctrl_c_during_start_up_exits_130_without_a_traceback() -> None:
    # the hook stops where the heavy imports begin and says so: the signal lands there, every time
    env = {**os.environ, entry.PAUSE_ENV: "1"}
    proc = subprocess.Popen([sys.executable, "-m", "convgraph", "--help"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    assert proc.stderr is not None
    try:
        assert proc.stderr.readline() == entry.READY
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == entry.INTERRUPTED
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and err.strip() == ""
    assert out == ""  # it stopped before the help


def test_without_the_hook_nothing_is_printed_first() -> None:
    proc = subprocess.run([sys.executable, "-m", "convgraph", "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0 and entry.READY not in proc.stderr and "Commands:" in proc.stdout


def _main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["convgraph", *args])
    with pytest.raises(SystemExit) as stop:
        entry.main()
    code = stop.value.code
    assert isinstance(code, int)
    return code


def test_ctrl_c_inside_a_command_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(monkeypatch, "--home", str(tmp_path / "h"), "init") == 0

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(home, "opened", interrupted)  # as if Ctrl-C came while the replica opened
    capsys.readouterr()
    assert _main(monkeypatch, "--home", str(tmp_path / "h"), "log") == entry.INTERRUPTED
    captured = capsys.readouterr()
    assert "Aborted" not in captured.err and "Traceback" not in captured.err and captured.out == ""


def test_other_exits_are_click_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(monkeypatch, "--help") == 0
    assert "Commands:" in capsys.readouterr().out
    assert _main(monkeypatch, "log", "--no-such-option") == 2
    assert "No such option" in capsys.readouterr().err
    # a ConvgraphError: one line, exit 2 (no replica in this home)
    assert _main(monkeypatch, "--home", str(tmp_path / "none"), "log") == 2
    assert "convgraph init" in capsys.readouterr().err
    # verify exits 1 through sys.exit inside the command: passed through as it is
    assert _main(monkeypatch, "--home", str(tmp_path / "v"), "init") == 0
    assert _main(monkeypatch, "--home", str(tmp_path / "v"), "verify") == 0


def test_the_console_script_and_python_m_use_the_entry() -> None:
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert 'convgraph = "convgraph.cli.entry:main"' in pyproject
    package = Path(entry.__file__).parent.parent
    for main in (package / "__main__.py", package / "cli" / "__main__.py"):
        assert "from convgraph.cli.entry import main" in main.read_text()
