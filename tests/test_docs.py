"""Every code block of the documentation site (the pages in mkdocs.yml's nav) is run or parsed,
so the docs cannot go stale.

* ```python: a page's blocks run in order in one fresh interpreter, in a temp dir; the provider
  SDKs there reach the mock provider APIs of examples/mock_providers.py, served by this test on
  127.0.0.1 (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`).
* ```sh / ```console: a page's blocks run in order, each in `bash -e -o pipefail`, in one temp
  dir with a fresh `HOME` and the project's `convgraph` first on `PATH` (`convgraph init` first,
  unless the page runs it). Each must exit 0, or the status its `# exits N` comment names. The
  port 8750 is replaced by a free one, and whatever a block left running is ended with it.
* ```json: must parse (a `…` stands for elided content and makes a block data, not JSON).
* The languages in DATA are declared non-executable; any other language fails the test.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
DATA = {"", "text"}
"""Not run: plain text, grammars, hex dumps and byte diagrams of the specs, and commands shown
for reading only (installing from the network), each with its reason in the prose."""
SHELL = {"sh", "console"}
EXPECTED_EXIT = re.compile(r"#\s*exits (\d+)\b")
FENCE = re.compile(r"^( *)(`{3,}|~{3,})\s*([\w+-]*)[^`]*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    code: str

    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists, in order."""
    text = (ROOT / "mkdocs.yml").read_text("utf-8")
    nav = text[text.index("\nnav:\n"):]
    nav = nav[:re.search(r"\n\S", nav[1:]).start() + 1]  # up to the next top-level key
    return re.findall(r":\s*(\S+\.md)\s*$", nav, re.MULTILINE)


def blocks(page: str) -> list[Block]:
    """The fenced code blocks of docs/`page`, with the fence's indentation taken off."""
    found: list[Block] = []
    if not (DOCS / page).exists():
        return found  # test_the_nav_lists_every_page_and_only_pages_that_exist says so
    lines = (DOCS / page).read_text("utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, lang = opening.groups()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[j]):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        assert j < len(lines), f"docs/{page}:{i + 1}: unclosed code fence"
        found.append(Block(page, i + 1, lang.lower(), "\n".join(body) + "\n"))
        i = j + 1
    return found


PAGES = nav_pages()


def test_the_nav_lists_every_page_and_only_pages_that_exist() -> None:
    on_disk = {p.name for p in DOCS.glob("*.md")}
    assert set(PAGES) == on_disk, "docs/*.md and mkdocs.yml's nav differ"
    assert len(PAGES) == len(set(PAGES))


def test_the_api_reference_names_every_public_name() -> None:
    import convgraph

    api = (DOCS / "api.md").read_text("utf-8")
    listed = set(re.findall(r"^::: convgraph\.(\w+)\s*$", api, re.MULTILINE))
    assert set(convgraph.__all__) - listed == set(), "public names missing from docs/api.md"
    assert listed - set(convgraph.__all__) == set(), "docs/api.md lists names that are not public"


def test_every_block_has_a_known_language() -> None:
    unknown = [(b.where(), b.lang) for page in PAGES for b in blocks(page)
               if b.lang not in DATA | SHELL | {"python", "json"}]
    assert unknown == [], "add the language to DATA (not run) or teach this test to run it"


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.lang == "json" for b in blocks(p))])
def test_json_blocks_parse(page: str) -> None:
    for block in blocks(page):
        if block.lang == "json":
            try:
                json.loads(block.code)
            except json.JSONDecodeError as exc:
                pytest.fail(f"{block.where()}: {exc}")


def _mock_providers() -> object:
    spec = importlib.util.spec_from_file_location("mock_providers", ROOT / "examples" / "mock_providers.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_RUNNER = textwrap.dedent("""
    import json, sys
    scope = {"__name__": "__main__"}
    for where, code in json.load(open(sys.argv[1], encoding="utf-8")):
        exec(compile(code, where, "exec"), scope)
""")


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.lang == "python" for b in blocks(p))])
def test_python_blocks_run(page: str, tmp_path: Path) -> None:
    code = [(b.where(), "\n" * (b.line) + b.code) for b in blocks(page) if b.lang == "python"]
    for where, source in code:
        ast.parse(source, where)  # a syntax error names its block before anything runs
    (tmp_path / "blocks.json").write_text(json.dumps(code), "utf-8")
    (tmp_path / "run.py").write_text(_RUNNER, "utf-8")
    server = _mock_providers().serve(0)  # type: ignore[attr-defined]
    base = f"http://127.0.0.1:{server.server_address[1]}"
    env = {**os.environ, "HOME": str(tmp_path), "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "offline",
           "OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": "offline",
           "PYTHONPATH": str(ROOT / "examples")}
    env.pop("CONVGRAPH_HOME", None)
    try:
        proc = subprocess.run([sys.executable, "run.py", "blocks.json"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60, check=False)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, f"docs/{page}: python blocks failed:\n{proc.stderr[-4000:]}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _console_commands(code: str) -> str:
    """A ```console block's commands: its `$ ` lines (the rest is output)."""
    return "\n".join(line[2:] for line in code.splitlines() if line.startswith("$ ")) + "\n"


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.lang in SHELL for b in blocks(p))])
def test_shell_blocks_run(page: str, tmp_path: Path) -> None:
    shell = [b for b in blocks(page) if b.lang in SHELL]
    port = str(_free_port())
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "CONVGRAPH_PAGER": "cat", "NO_COLOR": "1"}
    env.pop("CONVGRAPH_HOME", None)
    work = tmp_path / "work"
    work.mkdir()
    if not any(re.search(r"^convgraph init\b", b.code, re.MULTILINE) for b in shell):  # the default home
        subprocess.run([BIN / "convgraph", "init"], cwd=work, env=env, capture_output=True, check=True)
    for block in shell:
        code = _console_commands(block.code) if block.lang == "console" else block.code
        expected = {int(n) for n in EXPECTED_EXIT.findall(code)} or {0}
        assert len(expected) == 1, f"{block.where()}: one `# exits N` per block"
        script = tmp_path / "block.sh"
        script.write_text(code.replace("8750", port), "utf-8")
        with (tmp_path / "out").open("w+") as out, (tmp_path / "err").open("w+") as err:
            # files, not pipes: a server a block leaves running must not hold the test's pipes open
            proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", str(script)], cwd=work, env=env,
                                    stdout=out, stderr=err, start_new_session=True)
            try:
                proc.wait(timeout=60)
            finally:
                with contextlib.suppress(ProcessLookupError):  # what the block left running ends with it
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            out.seek(0)
            err.seek(0)
            printed, errors = out.read(), err.read()
        assert proc.returncode in expected, (
            f"{block.where()}: exit {proc.returncode}, expected {expected.pop()}\n{printed[-2000:]}\n{errors[-3000:]}")


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    """As scripts/test builds it: a broken link, anchor or docstring reference fails here too."""
    proc = subprocess.run([BIN / "mkdocs", "build", "--strict", "-f", ROOT / "mkdocs.yml", "-d", tmp_path / "site"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "index.html").read_text("utf-8").count('id="convgraph.Replica"') == 1
