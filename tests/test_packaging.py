"""`pip install .` (from a checkout: convgraph is on no index) is the library and the CLI on
SQLite, with a minimal, fixed set of dependencies; the PostgreSQL store and the sync server are
extras (`[postgres]`, `[server]`).

The core list is pinned by name here, so it cannot grow without this test changing. The CLI's
local commands are run in a Python whose import system refuses every module that the core
install would not bring (and the HTTP client stack too, which only `sync URL` loads); a command
that needs a missing extra says which to install and exits 2, with no traceback. And the real
thing, once: the sdist and the wheel built from it by the pinned backend, the wheel installed
in a fresh venv with the lock's core dependencies, and `convgraph` run from there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib.metadata import PackageNotFoundError, packages_distributions, requires, version
from pathlib import Path

import pytest

import pins

ROOT = pins.PYPROJECT.parent
LOCK = ROOT / "requirements-dev.lock"
BOOTSTRAP = ROOT / "requirements-bootstrap.lock"
# what a build reads from a checkout: the metadata, the long description it names, the packages
BUILD_INPUTS = ("pyproject.toml", "README.md", "src")
CORE = {"cbrrr", "pynacl", "click", "rich", "httpx"}
EXTRAS = {"postgres": {"psycopg", "psycopg-pool"}, "server": {"starlette", "uvicorn", "h11", "httptools", "jinja2"}}
# loaded only by `sync URL` and witness cosigning, never by a local command
HTTP_CLIENT = {"httpx", "httpcore", "h11", "anyio"}
# `import` hooks: every module outside the core install is refused, as if not installed
_HOOK = """
import json, sys
BLOCKED = frozenset(json.loads(sys.argv[1]))

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name.partition(".")[0])
        return None

# setuptools' distutils-precedence.pth imports _distutils_hack at startup; nothing else may be in
preloaded = [m for m in sys.modules if m.partition(".")[0] in BLOCKED - {"_distutils_hack"}]
assert not preloaded, f"loaded before the hook: {preloaded}"
sys.meta_path.insert(0, Block())
"""
_DRIVER = _HOOK + """
import convgraph
from convgraph.cli.entry import main
sys.argv = ["convgraph", *sys.argv[2:]]
main()
"""
# several commands in one process (each as the console script runs it), to spare start-ups
_BATCH = _HOOK + """
import contextlib, io
import convgraph
from convgraph.cli.entry import main
results = []
for args in json.loads(sys.argv[2]):
    sys.argv, out, err = ["convgraph", *args], io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code
    results.append({"args": args, "code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(results))
"""
_IMPORTS = _HOOK + """
import importlib
import convgraph
for module, extra in [("convgraph.store.postgres", "postgres"), ("convgraph.server.pg_nonces", "postgres"),
                      ("convgraph.server.app", "server"), ("convgraph.server.listener", "server"),
                      ("convgraph.viewer.app", "server")]:
    try:
        importlib.import_module(module)
    except convgraph.MissingExtraError as exc:
        assert exc.extra == extra and isinstance(exc, ImportError), (module, exc)
        assert f"pip install 'convgraph[{extra}]'" in str(exc), (module, exc)
    else:
        raise AssertionError(f"{module} imported without its extra")
"""


def _closure(requirements: list[str]) -> set[str]:
    """The distributions installing `requirements` brings, as installed here (what only an
    extra of theirs asks for left out)."""
    todo, seen = [pins.requirement_name(r) for r in requirements], {"convgraph"}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            needs = requires(name) or []
        except PackageNotFoundError:
            continue
        todo += [pins.requirement_name(r) for r in needs if not re.search(r"\bextra\s*==", r)]
    return seen


def _installed(name: str) -> bool:
    try:
        version(name)
    except PackageNotFoundError:
        return False
    return True


def _refused(allowed: set[str]) -> set[str]:
    """Every installed top-level module that no distribution in `allowed` provides."""
    outside = {
        module for module, dists in packages_distributions().items()
        if not any(pins.normal(d) in allowed for d in dists)
    }
    return outside - set(sys.stdlib_module_names)


@pytest.fixture(scope="module")
def blocked() -> set[str]:
    names = _refused(_closure(pins.project()["dependencies"])) | HTTP_CLIENT
    # the hook does refuse the stacks the core install leaves out (and the walk saw them)
    assert {"psycopg", "psycopg_pool", "starlette", "uvicorn", "h11", "httpx", "pytest", "hypothesis"} <= names
    return names


def _cli(blocked: set[str], home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(sorted(blocked)), "--home", str(home), *args],
        check=False, capture_output=True, text=True, timeout=60, cwd=home.parent,
    )


def _ok(blocked: set[str], cwd: Path, *commands: list[str]) -> list[str]:
    """Each command's stdout, once every one has exited 0."""
    done = subprocess.run([sys.executable, "-c", _BATCH, json.dumps(sorted(blocked)), json.dumps(commands)],
                          check=False, capture_output=True, text=True, timeout=120, cwd=cwd)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert [(r["args"], r["code"]) for r in results] == [(c, 0) for c in commands], results
    return [r["out"] for r in results]


def test_the_core_dependencies_are_exactly_the_minimal_set() -> None:
    core = pins.project()["dependencies"]
    assert {pins.requirement_name(r) for r in core} == CORE
    assert [r for r in core if "==" not in r] == []


def test_postgres_and_server_are_extras_that_all_and_dev_install() -> None:
    extras = pins.project()["optional-dependencies"]
    for extra, names in EXTRAS.items():
        assert {pins.requirement_name(r) for r in extras[extra]} == names
        assert [r for r in extras[extra] if "==" not in r] == []
    assert set(extras["all"]) >= {"convgraph[postgres]", "convgraph[server]"}
    assert "convgraph[all]" in extras["dev"]


def test_the_lock_pins_every_version_pyproject_pins() -> None:
    """A pin changed or added in pyproject.toml without running scripts/lock fails here."""
    locked = dict(re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+)", LOCK.read_text(), re.M | re.I))
    locked = {pins.normal(n): v for n, v in locked.items()}
    project = pins.project()
    pinned = [*project["dependencies"], *(r for extra in ("dev", "bench")
                                           for r in pins.extra(project["optional-dependencies"], extra))]
    stale = {r: locked.get(pins.requirement_name(r)) for r in pinned if locked.get(pins.requirement_name(r)) != r.partition("==")[2]}
    assert stale == {}, "run scripts/lock: requirements-dev.lock lags pyproject.toml"


def test_the_core_lock_is_the_core_install_at_the_dev_locks_versions() -> None:
    """scripts/demo installs requirements-core.lock: what the core install brings, no more, each
    at the version (and with the hashes) the development lock holds."""
    def pins_of(lock: Path) -> dict[str, str]:
        blocks = re.split(r"^(?=[a-z0-9][a-z0-9._-]*==)", lock.read_text(), flags=re.M | re.I)[1:]
        return {pins.normal(b.partition("==")[0]): b.split("#")[0].strip() for b in blocks}

    core, dev = pins_of(LOCK.with_name("requirements-core.lock")), pins_of(LOCK)
    # the closure as installed here: a requirement behind a marker this Python fails (anyio's
    # exceptiongroup, for Python < 3.11) is neither installed nor locked
    assert set(core) == {d for d in _closure(pins.project()["dependencies"]) - {"convgraph"} if _installed(d)}
    assert {name: block for name, block in core.items() if dev.get(name) != block} == {}


def test_local_commands_run_on_the_core_install_alone(tmp_path: Path, blocked: set[str]) -> None:
    home, other = ["--home", str(tmp_path / "home")], ["--home", str(tmp_path / "other")]
    init, _, _, _, text, log, anthropic, verify, listed, _, _ = _ok(
        blocked, tmp_path,
        [*home, "init"],
        [*home, "say", "plan three days in Lisbon"],
        [*home, "say", "--role", "assistant", "Day 1: Alfama."],
        [*home, "append", "user_message", '{"role": "user", "content": "and day 2?"}'],
        [*home, "transcript"],
        [*home, "log"],
        [*home, "transcript", "--format", "anthropic"],  # the resume view
        [*home, "verify"],
        [*home, "conversations", "--json"],
        [*other, "init"],
        [*other, "sync", str(tmp_path / "home")],  # replica to replica: no HTTP
    )
    assert "actor" in init
    assert "Alfama" in text
    assert "user_message" in log
    assert [m["role"] for m in json.loads(anthropic)] == ["user", "assistant", "user"]
    assert "0 failed" in verify
    [conv] = json.loads(listed)["conversations"]
    synced, _ = _ok(blocked, tmp_path, [*other, "transcript", "--conv", conv["conv"]],
                    ["demo"])  # two replicas, in process
    assert "Alfama" in synced


def test_serve_without_the_server_extra_names_it_and_exits_2(tmp_path: Path, blocked: set[str]) -> None:
    done = _cli(blocked, tmp_path / "home", "serve", "--port", "0")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "pip install 'convgraph[server]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_view_without_the_server_extra_names_it_and_exits_2(tmp_path: Path, blocked: set[str]) -> None:
    home = tmp_path / "home"
    assert _cli(blocked, home, "init").returncode == 0
    done = _cli(blocked, home, "view")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "pip install 'convgraph[server]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_db_without_the_postgres_extra_names_it_and_exits_2(tmp_path: Path, blocked: set[str]) -> None:
    extras = pins.project()["optional-dependencies"]
    with_server = _refused(_closure([*pins.project()["dependencies"], *extras["server"]]))
    assert "starlette" not in with_server and "psycopg" in with_server
    done = _cli(with_server, tmp_path / "home", "serve", "--port", "0", "--db", "postgresql://127.0.0.1/none")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "pip install 'convgraph[postgres]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_api_behind_an_extra_raises_the_typed_error(blocked: set[str]) -> None:
    done = subprocess.run([sys.executable, "-c", _IMPORTS, json.dumps(sorted(blocked))],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _locked(lock: Path) -> dict[str, str]:
    """Each distribution a pip-compile lock pins, to its whole entry (`name==version` and hashes)."""
    entries = re.finditer(r"^([A-Za-z0-9][\w.-]*)==\S+(?: \\\n\s+--hash=\S+)+", lock.read_text(), re.M)
    return {pins.normal(m[1]): m[0] for m in entries}


def _run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
         ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in command], check=False, capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)
    if ok:
        assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _sources() -> set[str]:
    """The files of src/ a build must carry: modules, py.typed, the viewer's templates and static files."""
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "src").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and not any(d.endswith(".egg-info") for d in p.parts)}


@pytest.mark.slow
@pytest.mark.xdist_group("install")  # builds and installs: one such test at a time on a worker
def test_the_wheel_built_from_the_sdist_installs_in_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    """As README.md says to build and install it, with this venv's pip and setuptools (the pinned,
    hash-checked ones of requirements-bootstrap.lock) and nothing fetched for the build; the
    fresh venv gets the lock's hash-checked core dependencies, so the install is the same on any
    machine. `python -m build` would call the same setuptools hooks (it is not a dependency here)."""
    bootstrap = _locked(BOOTSTRAP)
    for tool in ("pip", "setuptools", "wheel"):
        assert bootstrap[tool].startswith(f"{tool}=={version(tool)} "), f"{tool} {version(tool)} is not the pinned one"
    checkout = tmp_path / "checkout"  # a copy, so the build's egg-info and build/ land outside the tree
    checkout.mkdir()
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / name, checkout / name)

    # the sdist, by the backend hook `python -m build --sdist` calls
    built = _run(sys.executable, "-c", "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))",
                 tmp_path / "dist", cwd=checkout)
    sdist = tmp_path / "dist" / built.stdout.split()[-1]
    top = f"convgraph-{pins.project()['version']}"
    with tarfile.open(sdist) as tar:
        members = set(tar.getnames())
        tar.extractall(tmp_path / "unpacked", filter="data")
    needed = {f"{top}/{name}" for name in ("PKG-INFO", "pyproject.toml", "README.md", *_sources())}
    assert needed - members == set(), "the sdist lacks what a build needs"

    # the wheel, from the unpacked sdist alone: what the sdist holds is enough to build it
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check",
         "-w", tmp_path / "wheels", tmp_path / "unpacked" / top)
    [wheel] = (tmp_path / "wheels").glob("convgraph-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        files = set(archive.namelist())
        entry_points = archive.read(f"{top}.dist-info/entry_points.txt").decode()
    assert {s.removeprefix("src/") for s in _sources()} - files == set(), "the wheel lacks package files"
    assert "convgraph = convgraph.cli.entry:main" in entry_points

    # a fresh venv (no pip of its own: this venv's pinned pip installs into it), the core
    # dependencies from the lock by hash, no resolution; then pip check says nothing is missing
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", venv / "bin" / "python"]
    locked = _locked(LOCK)
    # what the lock lacks is not needed on this Python (a marker excludes it): pip check would say so
    core = [locked[name] for name in sorted(_closure(pins.project()["dependencies"]) - {"convgraph"}) if name in locked]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (tmp_path / "requirements.txt").write_text("\n".join([*core, f"{wheel} --hash=sha256:{digest}"]) + "\n")
    _run(*pip, "install", "--quiet", "--no-deps", "--require-hashes", "-r", tmp_path / "requirements.txt")
    assert "No broken requirements found" in _run(*pip, "check").stdout

    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "CONVGRAPH_HOME"}} | {"COLUMNS": "200"}
    where = _run(venv / "bin" / "python", "-c", "import convgraph; print(convgraph.__file__)", env=env).stdout
    assert Path(where.strip()).is_relative_to(venv), where  # the installed wheel, not this checkout
    convgraph = venv / "bin" / "convgraph"
    assert _run(convgraph, "--help", env=env).stdout.startswith("Usage: convgraph [OPTIONS] COMMAND")
    work = tmp_path / "work"
    work.mkdir()
    assert "actor" in _run(convgraph, "init", cwd=work, env=env).stdout
    said = _run(convgraph, "say", "plan three days in Lisbon", cwd=work, env=env).stdout.strip()
    log = _run(convgraph, "log", cwd=work, env=env).stdout
    assert said[-10:] in log and "plan three days in Lisbon" in log
    assert "0 failed" in _run(convgraph, "verify", cwd=work, env=env).stdout
    # the core install has no server; the command it names adds the extra to the installed wheel
    refused = _run(convgraph, "serve", "--port", "0", cwd=work, env=env, ok=False)
    assert refused.returncode == 2 and "pip install 'convgraph[server]'" in refused.stderr, refused.stderr
    extra = _run(*pip, "install", "--dry-run", "--no-index", "convgraph[server]", ok=False)
    assert "Requirement already satisfied: convgraph[server]" in extra.stdout, extra.stdout
    assert "No matching distribution found for starlette" in extra.stderr, extra.stderr  # (--no-index)
