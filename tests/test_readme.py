"""Every ```sh block of README.md runs as written, one test per block, in a temp dir with a fresh
`HOME` and the project's `convgraph` first on `PATH`.

Each line runs on its own (`bash -e -o pipefail`; the shell variables it sets carry to the next
line) and must exit 0, or the status its `# exit N` comment names, with no traceback; a
`# prints:` comment's next lines must appear in what it printed (`…` stands for anything). Its
placeholders are filled the way a reader fills them, from what an earlier command printed:
`<phone key>` from `device add`, `cg1…` from `new`, `bafyrei…` from the command that printed
that record, `NAME KEYHEX URL` from the witness's own announcement. Where a block picks up from
an earlier section (a replica with a `team` conversation, a server that lost a turn, files to
import), a `given` step sets that up first, through the same reader. `convgraph serve` and
`convgraph view` run until interrupted: they start in the background, the line waits for their
announcement, and they are stopped with the block. Port 8750 becomes a free port, the shared
`/mnt/share/spool` a temp dir, `postgresql://host/db` the test database (a fresh schema).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import pg

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^(`{3,})(\w*)\s*$")
EXPECTED_EXIT = re.compile(r"#\s*exit (\d+)\b")
COMMENT = re.compile(r"\s+#\s.*$")
LONG_RUNNING = re.compile(r"^convgraph (?:--home \S+ )?(?:serve|view(?!.*--server))\b")
ANNOUNCED = re.compile(r"serving .* on (http://\S+) as |answering sync messages in |http://127\.0\.0\.1:\d+/view/")
EXEMPT = {
    "scripts/demo": "CI runs scripts/test itself (.ci/run), and tests/cli runs the demo command",
    "scripts/test": "it is the suite this test is part of (CI runs it: .ci/run)",
    "scripts/mutate": "mutation testing takes hours, not CI (tests/MUTATION.md)",
    "source .venv/bin/activate": "this test puts the project's own convgraph first on PATH instead",
}
"""Lines not run, each with its reason; none of them is a `convgraph` command."""
DEADLINE_S = 60  # for a server's announcement, on a loaded machine


@dataclass(frozen=True)
class Block:
    heading: str
    line: int  # of the opening fence, 1-based
    code: str

    def lines(self) -> list[tuple[str, list[str]]]:
        """Each command line, with the comment-only lines that follow it."""
        found: list[tuple[str, list[str]]] = []
        for raw in self.code.splitlines():
            text = raw.strip()
            if text.startswith("#") and found:
                found[-1][1].append(text)
            elif text:
                found.append((text, []))
        return found


def sh_blocks() -> list[Block]:
    found: list[Block] = []
    heading, fence, lang, start, body = "", "", "", 0, list[str]()
    for number, text in enumerate((ROOT / "README.md").read_text("utf-8").splitlines(), 1):
        opening = FENCE.match(text)
        if fence:
            if opening and opening[1] == fence and not opening[2]:
                if lang == "sh":
                    found.append(Block(heading, start, "\n".join(body) + "\n"))
                fence = ""
            else:
                body.append(text)
        elif opening:
            fence, lang, start, body = opening[1], opening[2], number, []
        elif text.startswith("#"):
            heading = text.lstrip("#").strip()
    assert not fence, "README.md: unclosed code fence"
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Step:
    line: str
    out: str
    err: str


@dataclass
class Reader:
    """Runs lines the way a reader at a terminal does, remembering what each printed."""

    work: Path
    env: dict[str, str]
    pg_dsn: Callable[[], str]
    port: int = field(default_factory=_free_port)  # the README's 8750
    history: list[Step] = field(default_factory=list)
    running: list[subprocess.Popen[bytes]] = field(default_factory=list)
    listening: set[int] = field(default_factory=set)  # ports of the servers running

    def fill(self, line: str) -> str:
        """`line`'s command with its placeholders filled from what earlier commands printed (its
        comment, which may name placeholders too, is left out)."""
        line = COMMENT.sub("", line)
        line = line.replace("8750", str(self.port)).replace("/mnt/share/spool", str(self.work.parent / "spool"))
        (self.work.parent / "spool").mkdir(exist_ok=True)  # the shared folder, there before anyone uses it
        if "postgresql://host/db" in line:
            dsn = self.pg_dsn()
            line = line.replace("postgresql://host/db", f"{dsn} --schema {pg.fresh_schema(dsn)}")
        for placeholder, find in FILLS:
            while placeholder in line:
                line = line.replace(placeholder, find(self), 1)
        return line

    def run(self, line: str, expect: int = 0, prints: list[str] | None = None) -> Step:
        line = self.fill(line)
        if LONG_RUNNING.match(line):
            return self.start(line)
        state = self.work.parent / "state.sh"
        state.touch()
        assigned = re.findall(r"^(\w+)=", line)
        script = f"source {state}\n{line}\n" + "".join(f"declare -p {v} >> {state}\n" for v in assigned)
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=self.work, env=self.env,
                              capture_output=True, text=True, timeout=120, check=False)
        step = Step(line, done.stdout, done.stderr)
        self.history.append(step)
        assert done.returncode == expect and "Traceback" not in done.stderr, (
            f"{line}\nexit {done.returncode}, expected {expect}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        for said in prints or ():
            pattern = ".*?".join(re.escape(part) for part in said.split("…"))
            assert re.search(pattern, done.stdout + done.stderr), f"{line}: does not print {said!r}\n{done.stdout}"
        return step

    def start(self, line: str) -> Step:
        """Start a command that runs until interrupted; return once it has announced itself."""
        if " serve" in line and "--spool" not in line and "--port" not in line:
            # the first server takes the README's port; another one (the same server on PostgreSQL) its own
            port = _free_port() if self.port in self.listening else self.port
            self.listening.add(port)
            line += f" --port {port}"
        log = self.work.parent / f"background-{len(self.running)}.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=self.work, env=self.env,
                                    stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        self.running.append(proc)
        deadline = time.monotonic() + DEADLINE_S
        while not ANNOUNCED.search(text := log.read_text("utf-8", "replace")):
            assert proc.poll() is None, f"{line}: exited {proc.returncode} before announcing itself\n{text}"
            assert time.monotonic() < deadline, f"{line}: no announcement within {DEADLINE_S} s\n{text}"
            time.sleep(0.05)
        step = Step(line, text, text)
        self.history.append(step)
        return step

    def stop(self) -> None:
        for proc in self.running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.running.clear()
        self.listening.clear()


def _last(pattern: str, *, of: str = "") -> Callable[[Reader], str]:
    """The last match of `pattern`'s group in what the last command matching `of` to print one printed."""
    def find(reader: Reader) -> str:
        for step in reversed(reader.history):
            if re.search(of, step.line) and (found := re.findall(pattern, step.out + step.err)):
                return str(found[-1])
        printed = [s.out + s.err for s in reader.history if re.search(of, s.line)]
        raise AssertionError(f"nothing printed {pattern!r} for a reader to copy: {printed}")
    return find


def _witness(reader: Reader) -> str:
    """What the witness's `serve --witness` said to run, its URL in place of URL."""
    said = _last(r"witness \S+: `convgraph witness add (\S+ [0-9a-f]{64}) URL`", of="--witness")(reader)
    url = _last(r"serving .* on (http://\S+) as ", of="--witness")(reader)
    return f"{said} {url}"


def _bundle(reader: Reader) -> str:
    """The bundle file of the finding `findings` listed: its id's end, completed as a shell's Tab does."""
    tail = _last(r"(?m)^\w+\s+cg1[a-z2-7]+ ([a-z2-7]{12}) ", of="findings --save")(reader)
    [path] = (reader.work / "proofs").glob(f"bafyrei*{tail}.cgev")
    return str(path.relative_to(reader.work))


CID = r"bafyrei[a-z2-7]{52}"
FILLS: list[tuple[str, Callable[[Reader], str]]] = [
    ("<phone key>", _last(r"this device: ([a-z2-7]{52})", of="--home phone device add")),
    ("<actor>", _last(r"(?m)^actor\s+([a-z2-7]{52})$", of=r"^convgraph init$")),  # this replica's key
    ("cg1…", _last(r"\b(cg1[a-z2-7]{20,})\b", of=r"convgraph (?:--home \S+ )?new ")),
    ("6jiieb2yqi", lambda r: _last(f"({CID})", of="convgraph append")(r)[-10:]),  # as `log` prints it
    ("--at bafyrei…", lambda r: "--at " + _last(f"({CID})", of="convgraph say")(r)),
    ("export bafyrei…", lambda r: "export " + _last(f"(?m)^({CID})", of="convgraph checkpoint --compact")(r)),
    ("proofs/bafyrei….cgev", _bundle),
    ("NAME KEYHEX URL", _witness),
]


# ------------------------------------------------------------------ what earlier sections left


def _given_team(r: Reader) -> None:
    """A replica here with a `team` conversation, and another beside it (`../phone`)."""
    r.run("convgraph init")
    r.run('convgraph new "team plan" --alias team')
    r.run('convgraph say --conv team "Kick-off at 10."')
    r.run("convgraph init --home ../phone")


def _given_a_witness(r: Reader) -> None:
    r.run("convgraph init")
    r.run("convgraph init --home witness")
    r.run("convgraph serve --home witness --witness --port 0")


def _given_a_server_restored_from_backup(r: Reader) -> None:
    """The laptop's turn receipted by the server, then lost: the server restored from before it."""
    r.run("convgraph init --home laptop")
    r.run('convgraph --home laptop new "team plan" --alias team')
    r.run('convgraph --home laptop say --conv team "Kick-off at 10."')
    r.run("convgraph init --home srv")
    laptop = _last(r"(?m)^actor\s+([a-z2-7]{52})$", of="init --home laptop")(r)
    serve = f"convgraph serve --home srv --allow {laptop}=*"
    r.run(serve)
    r.run("convgraph --home laptop sync http://127.0.0.1:8750 --conv team")
    r.stop()
    shutil.copytree(r.work / "srv", r.work / "backup")
    r.run(serve)
    r.run('convgraph --home laptop say --conv team "The turn the backup lacks."')
    r.run("convgraph --home laptop sync http://127.0.0.1:8750 --conv team")
    r.stop()
    shutil.rmtree(r.work / "srv")
    shutil.move(r.work / "backup", r.work / "srv")
    r.run(serve)


def _given_a_server(r: Reader) -> None:
    r.run("convgraph init")
    r.run('convgraph say "something to view"')
    r.run("convgraph init --home srv")
    r.run("convgraph serve --home srv --allow '*=*'")


def _given_histories(r: Reader) -> None:
    """A LangGraph SqliteSaver thread, an Agents SDK session and a saved log, made by their owners."""
    from importers.import_sources import agents_session, langgraph_thread

    r.run("convgraph init")
    langgraph_thread(r.work / "checkpoints.sqlite", "support-42", [("user", "my order is late")])
    agents_session(r.work / "agents.sqlite", "oslo", [{"role": "user", "content": "what to see in Oslo?"}])
    (r.work / "chat.jsonl").write_text("".join(json.dumps(m) + "\n" for m in [
        {"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi, how can I help?"}]))


GIVEN: dict[str, Callable[[Reader], None]] = {
    "Conversations: transcript and resume": _given_a_witness,
    "Sync: peer to peer, through a server, or by file": _given_team,
    "Catching a lying server": _given_a_server_restored_from_backup,
    "Viewer": _given_a_server,
    "Importing histories you already have": _given_histories,
}
BLOCKS = sh_blocks()


def test_the_readme_has_the_blocks_this_test_knows() -> None:
    headings = [b.heading for b in BLOCKS]
    assert len(headings) == len(set(headings)), "one sh block per section, so a block's id says where it is"
    assert set(GIVEN) <= set(headings), "a `given` step for a section that has no sh block any more"
    exempt = [line for b in BLOCKS for line, _ in b.lines() if any(line.startswith(e) for e in EXEMPT)]
    assert exempt and not [line for line in exempt if "convgraph" in line.split("#")[0]]


@pytest.fixture
def reader(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Reader]:
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "CONVGRAPH_PAGER": "cat", "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("CONVGRAPH_HOME", None)
    found = Reader(work, env, lambda: str(request.getfixturevalue("pg_dsn")))
    try:
        yield found
    finally:
        found.stop()


@pytest.mark.xdist_group("readme")  # servers and a hundred CLI starts: one block at a time on a worker
@pytest.mark.parametrize("block", BLOCKS, ids=[b.heading for b in BLOCKS])
def test_the_block_runs_as_written(block: Block, reader: Reader) -> None:
    GIVEN.get(block.heading, lambda _: None)(reader)
    for line, comments in block.lines():
        if any(line.startswith(e) for e in EXEMPT):
            continue
        expected = EXPECTED_EXIT.search(COMMENT.search(line)[0] if COMMENT.search(line) else "")
        prints = [c.lstrip("#").strip() for c in comments] if re.search(r"prints:\s*$", line) else []
        reader.run(line, int(expected[1]) if expected else 0, prints)
