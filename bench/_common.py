"""What every benchmark here shares: CPU accounting, memory readings, the environment
record, the snapshot of src/ a long run imports from, and a `convgraph serve` process
(`Server`) with the PostgreSQL schema it may leave behind (`drop_schema`).

Imported by the scripts in this directory (`python bench/<script>.py` puts it on the path).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import select
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from types import TracebackType

HZ = os.sysconf("SC_CLK_TCK")
SNAPSHOT_ENV = "CONVGRAPH_BENCH_SNAPSHOT"
ROOT = Path(__file__).resolve().parent.parent
# the vocabulary synthetic turns are drawn from
_VOCABULARY = (
    "the a of to and in is that for it with as on this be are was by at or from file code "
    "function test error result call tool patch review diff branch merge commit value return "
    "python module import class method string list map record signature replica conversation "
    "assistant user output input line path config build run check fix update because should "
    "would could will need here there which when then also only just more than into about"
)
WORDS = _VOCABULARY.split()


def machine_busy_s() -> float:
    """CPU seconds all processes on this machine have used (from /proc/stat)."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = f.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
    return (user + nice + system + irq + softirq) / HZ


def own_cpu_s() -> float:
    """CPU seconds of this process and of its waited-for descendants."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / HZ


def status_kib(field: str = "VmRSS") -> int:
    """A memory figure of this process from /proc/self/status, in KiB."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def environment(dists: Iterable[str]) -> dict[str, str]:
    """Machine, versions of `dists`, the convgraph revision and the load at the start."""
    cpu = "?"
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        git = ["git", "-C", str(ROOT)]
        head = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        )
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--", "src"], capture_output=True, text=True, check=False
        )
        rev = head.stdout.strip() + (" + uncommitted src changes" if dirty.stdout.strip() else "")
    except OSError:
        rev = "?"
    env = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"), "cpu": cpu, "cores": str(os.cpu_count()),
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "convgraph": rev,
        "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }  # fmt: skip
    for dist in dists:
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            env[dist] = "missing"
    return env


def tree_digest(root: Path) -> str:
    """sha256 over the relative paths and contents of the .py files under `root`."""
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def on_snapshot(script: str, run: Callable[[Sequence[str]], int], argv: Sequence[str] | None) -> int:
    """Run `run(argv)` on a copy of src/convgraph taken now (re-executing `script` on it).

    Others may edit src/ while a long run goes on; without a snapshot the child processes
    of later phases could import different code from the parent's.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if "--no-snapshot" not in args and not os.environ.get(SNAPSHOT_ENV):
        dest = Path(tempfile.mkdtemp(prefix="convgraph-bench-src-"))
        shutil.copytree(ROOT / "src" / "convgraph", dest / "convgraph",
                        ignore=shutil.ignore_patterns("__pycache__"))
        path = os.pathsep.join(filter(None, (str(dest), os.environ.get("PYTHONPATH"))))
        env = {**os.environ, SNAPSHOT_ENV: str(dest), "PYTHONPATH": path}
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, str(Path(script).resolve()), *args], env)
    try:
        return run(args)
    finally:
        if os.environ.get(SNAPSHOT_ENV):
            shutil.rmtree(os.environ[SNAPSHOT_ENV], ignore_errors=True)


def ok_mark(flag: bool) -> str:
    """A target's verdict, in rich markup."""
    return "[green]met[/]" if flag else "[red]MISSED[/]"


class ServerStartError(RuntimeError):
    """A `convgraph serve` process exited, or printed no URL in time; the message holds its log."""


class Server:
    """One `convgraph serve --port 0 --json` process on `home` (made by `init` first if it has
    no key), its stderr in `log`; `url` once it answers requests. Closing stops it: terminate,
    then kill after `stop_timeout_s`. Invariant: a `Server` that raised or closed left no process."""

    def __init__(self, home: Path, serve_args: Sequence[str], *, log: Path,
                 env: Mapping[str, str] | None = None, start_timeout_s: float = 60.0,
                 stop_timeout_s: float = 30.0) -> None:
        self._stop_timeout = stop_timeout_s
        if not (home / "actor.key").exists():  # only `init` makes a replica and the key it signs with
            subprocess.run([sys.executable, "-m", "convgraph.cli", "--home", str(home), "init"],
                           cwd=ROOT, check=True, capture_output=True, env=env)
        cmd = [sys.executable, "-m", "convgraph.cli", "--home", str(home), "serve", "--port", "0", "--json",
               *serve_args]
        self._log = log.open("w+")  # a file: a pipe nobody reads would fill and stall the server
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                     env=env)
        try:
            self.url = self._wait_up(start_timeout_s)
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _wait_up(self, timeout_s: float) -> str:
        """The URL from the JSON line `serve --json` prints once it answers requests (a loaded
        machine may take many seconds to start it)."""
        assert self.proc.stdout is not None
        said, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if said else ""  # the line, or end of file if it exits first
        try:
            return str(json.loads(line)["url"])
        except (ValueError, KeyError, TypeError):
            self.proc.kill()
            self.proc.wait()
            self._log.seek(0)
            raise ServerStartError(f"the server did not start (exit {self.proc.returncode}): "
                                    f"{line}{self._log.read()}") from None

    def close(self) -> None:
        """Stop the process (politely first) and close its pipe and log; again is a no-op."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(self._stop_timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def drop_schema(db: str, schema: str) -> str | None:
    """Drop a run's PostgreSQL schema; None, or why it could not (said by the caller, never
    raised: it must not hide why the run ended)."""
    import psycopg
    from psycopg import sql

    try:
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    except psycopg.Error as exc:
        return f"could not drop schema {schema}: {exc}"
    return None
