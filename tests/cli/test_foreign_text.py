"""Foreign text through every command that prints it: no control character reaches the terminal.

Another key writes, in one conversation per case, every text a record can carry with the
case inside: the conversation and branch names, message content, a tool's name, call id
and input, a branch's purpose, a merge's content. This replica pulls it all with
`convgraph sync`; then each command that prints records runs over it (in process, on the
real SQLite replica), and its output must hold no C0 control but newline, no DEL, no C1
control, no bidi control and no line separator, while JSON output still parses to the
exact text written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import cli_process
from convgraph import Replica, ToolCall
from convgraph.cli.main import cli
from convgraph.projections.resume import PROVIDERS
from core.test_safe_text import UNSAFE, unsafe_in
from server.live import LiveServer

ESCAPE_SEQUENCES = {
    "csi-clear": "\x1b[2J",
    "csi-colour": "\x1b[1;31m",
    "osc-title-bel": "\x1b]0;PWNED\x07",
    "osc-title-st": "\x1b]0;PWNED\x1b\\",
    "osc-hyperlink": "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "dcs": "\x1bP1$r0m\x1b\\",
    "reset": "\x1bc",
    "c1-csi": "\x9b2J",
    "c1-osc-st": "\x9d0;PWNED\x9c",
    "issue": "\x1b]0;PWNED\x07\x1b[2J",
}
CASES = {
    **{f"U+{ord(c):04X}": c for c in sorted(UNSAFE)},
    **ESCAPE_SEQUENCES,
    "markup": "[bold red]x[/] :smile:",  # Rich must print it as written, not style it or make an emoji
}


def invoke(home: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def check(output: str) -> None:
    leaked = unsafe_in(output, keep="\n")
    assert leaked == [], f"{[f'U+{ord(c):04X}' for c in leaked]} reached the terminal"


def write_case(foreign: Replica, case: str) -> None:
    conv = f"conv{case}"
    asked = foreign.say(conv, "user", f"u{case}u")
    foreign.say(conv, "assistant", f"a{case}a",
                tool_calls=[ToolCall(f"id{case}", f"tool{case}", {f"k{case}": f"v{case}"})])
    foreign.say(conv, "tool", f"r{case}r", tool_use_id=f"id{case}")
    foreign.branch(conv, f"b{case}", asked.cid, purpose=f"p{case}")
    foreign.say(conv, "user", f"x{case}x", branch=f"b{case}")
    foreign.merge(conv, f"b{case}", content=f"m{case}m")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("foreign")
    with Replica.open(base / "foreign") as foreign:
        for case in CASES.values():
            write_case(foreign, case)
    invoke(base / "home", "init")
    return base / "home"


@pytest.fixture(scope="module")
def synced(home: Path) -> str:
    """What `convgraph sync` printed while pulling every foreign conversation."""
    return invoke(home, "sync", str(home.parent / "foreign"))


def test_sync_prints_the_foreign_conversation_names_safely(synced: str) -> None:
    check(synced)
    assert synced.count(": received 6 (of 6)") == len(CASES)
    assert "conv\\x1b]0;PWNED\\x07\\x1b[2J: received" in synced


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_every_command_neutralises_the_case(home: Path, synced: str, case: str) -> None:
    conv, branch = f"conv{case}", f"b{case}"
    records = json.loads(invoke(home, "log", "--conv", conv, "--json"))["records"]
    assert len(records) == 6 and records[0]["conv"] == conv  # JSON keeps the exact text
    assert {r["payload"].get("content") for r in records} >= {f"u{case}u", f"m{case}m"}
    turns = json.loads(invoke(home, "transcript", "--conv", conv, "--branch", branch, "--format", "json"))
    assert turns["branch"] == branch and turns["turns"][-1]["content"][0]["text"] == f"x{case}x"
    outputs = [
        invoke(home, "log", "--conv", conv),
        invoke(home, "log", "--conv", conv, "--graph"),
        invoke(home, "transcript", "--conv", conv),
        invoke(home, "transcript", "--conv", conv, "--branch", branch),
        *(invoke(home, "transcript", "--conv", conv, "--format", p) for p in PROVIDERS),
        *(invoke(home, "show", r["cid"]) for r in records),
        invoke(home, "show", records[0]["cid"], "--json"),
    ]
    for output in outputs:
        check(output)
    if case in ESCAPE_SEQUENCES.values() or case == CASES["markup"]:  # shown, not dropped or styled
        visible = case.replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace("\x9b", "\\x9b")
        visible = visible.replace("\x9d", "\\x9d").replace("\x9c", "\\x9c")
        graph = outputs[1]
        assert f"u{visible}u" in graph and f"[b{visible}]" in graph and f"m{visible}m" in graph


def test_a_newline_in_a_transcript_cannot_forge_a_turn(home: Path) -> None:
    with Replica.open(home.parent / "forger") as forger:
        real = forger.say("forged", "user", "hello")
        forger.say("forged", "assistant", "ok\n fffffffff0  abcdefgh  user  send me your key\r")
        data = [(r.data, r.cid) for r in forger.records("forged")]
    with Replica.open(home) as mine:
        mine.ingest(data)
    lines = invoke(home, "transcript", "--conv", "forged").splitlines()
    check("\n".join(lines))
    ops = {str(c)[-10:] for _, c in data}
    starts = [line[:10] for line in lines[1:-1]]  # between the header and the count
    assert all(s in ops or not s.strip() for s in starts), lines  # a row starts with a real op, or blank
    assert sum(s.strip() == str(real.cid)[-10:] for s in starts) == 1
    assert "key\\r" in "".join(lines)  # shown, on a continuation line of the real turn


def test_an_error_quoting_a_hostile_server_is_neutralised(tmp_path: Path) -> None:
    words = "".join(CASES.values())

    async def refuse(_: Request) -> JSONResponse:
        return JSONResponse({"detail": f"no {words}", "reason": f"because {words}"}, status_code=403)

    app = Starlette(routes=[Route("/{path:path}", refuse, methods=["GET", "POST"])])
    invoke(tmp_path / "r", "init")
    with LiveServer(app) as live:
        result = CliRunner().invoke(cli, ["--home", str(tmp_path / "r"), "sync", live.url, "--conv", "c"])
    assert result.exit_code == 2 and "403" in result.output, result.output
    check(result.output)
    assert "\\x1b]0;PWNED\\x07" in result.output.replace("\n", "")


def test_the_issue_reproduction_over_a_car_file(tmp_path: Path) -> None:
    """As reported: import a CAR holding `"\\x1b]0;PWNED\\x07\\x1b[2J"`, then `convgraph log`."""
    with Replica.open(tmp_path / "foreign") as foreign:
        foreign.say("default", "user", "\x1b]0;PWNED\x07\x1b[2J")
    env = {**os.environ, "COLUMNS": "200"}

    def convgraph(home: str, *args: str) -> str:
        proc = cli_process.run(["--home", str(tmp_path / home), *args], env=env, timeout=60, check=True)
        return proc.stdout.decode() + proc.stderr.decode()

    convgraph("foreign", "export", str(tmp_path / "x.car"))
    convgraph("mine", "init")
    convgraph("mine", "import", str(tmp_path / "x.car"))
    for args in (["log"], ["log", "--graph"], ["transcript"]):
        shown = convgraph("mine", *args)
        assert "\x1b" not in shown and "\x07" not in shown, shown
        assert "\\x1b]0;PWNED\\x07\\x1b[2J" in shown
