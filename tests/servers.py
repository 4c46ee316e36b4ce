"""Servers the tests start as processes of their own: `convgraph serve` (HTTP or a spool) and
`convgraph view`, each ready when it says so.

Each is started with `--json` (and `--port 0`: tests never collide on a port) and waited for
until it prints its one JSON line on stdout, which the CLI prints only once requests are
answered (`listener.serve`'s `on_ready`), never by polling a port. The deadline is generous
(`DEADLINE_S`) because a loaded machine (a load average of 18 on 2 cores has been seen) may
take many seconds to start an interpreter and import the server; a process that exits first,
or says nothing by then, fails the test with what it wrote on stderr. Both streams are read
all along, so a chatty process never blocks on a full pipe.

The home is made with `convgraph init` first when it holds no key: `serve` never creates one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

DEADLINE_S = 60.0
CLI = (sys.executable, "-m", "convgraph.cli")


def announcement(line: str) -> dict[str, Any] | None:
    """The JSON object a server prints on stdout once it answers, or None for any other line."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and ("url" in doc or "spool" in doc) else None


class AnnouncedProcess:
    """Starts `command` and waits up to `deadline_s` for its announcement (`announcement`);
    `announced` is that object, `url` its URL (when it serves HTTP), `log` its stderr so far."""

    def __init__(self, command: Sequence[str], *, what: str, deadline_s: float = DEADLINE_S,
                 env: dict[str, str] | None = None) -> None:
        self.what = what
        self.proc = subprocess.Popen(
            list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "COLUMNS": "300", **(env or {})},
        )
        self._out: list[str] = []
        self._err: list[str] = []
        self._announced: dict[str, Any] | None = None
        self._ready = threading.Event()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stdout, self._out, True), daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stderr, self._err, False), daemon=True)]
        for reader in self._readers:
            reader.start()
        ready = self._ready.wait(deadline_s)
        if self._announced is None:
            self.close()
            why = f"exited with {self.proc.returncode}" if ready else f"said nothing within {deadline_s:.0f} s"
            raise AssertionError(f"{what} {why}; stderr:\n{self.log}\nstdout:\n{''.join(self._out)}")
        self.announced: dict[str, Any] = self._announced
        self.url: str = str(self.announced.get("url", ""))

    def _read(self, stream: IO[str], into: list[str], announces: bool) -> None:
        for line in stream:
            into.append(line)
            if announces and self._announced is None:
                self._announced = announcement(line)
                if self._announced is not None:
                    self._ready.set()
        if announces:
            self.proc.wait()  # stdout closed: the process is ending; say so once it has
            self._ready.set()

    @property
    def log(self) -> str:
        """What the process wrote on stderr so far."""
        return "".join(self._err)

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, as in a crash."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        for reader in self._readers:  # the process is gone: its streams end
            reader.join()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def init(home: Path) -> None:
    """`convgraph init` in `home` unless it holds a key already (only `init` makes a replica)."""
    if not (home / "actor.key").exists():
        subprocess.run([*CLI, "--home", str(home), "init"], check=True, capture_output=True, timeout=DEADLINE_S)


class ServeProcess(AnnouncedProcess):
    """`convgraph serve --port 0 --json ARGS` over the replica in `home`; `nofile` sets its
    descriptor limit (`ulimit -n`)."""

    def __init__(self, home: Path, *args: str, nofile: int | None = None, deadline_s: float = DEADLINE_S) -> None:
        init(home)
        command = [*CLI, "--home", str(home), "serve", "--port", "0", "--json", *args]
        if nofile is not None:  # the shell's `ulimit`, then exec: the server process itself is limited
            command = ["sh", "-c", f'ulimit -n {int(nofile)} && exec "$@"', "sh", *command]
        super().__init__(command, what="convgraph serve", deadline_s=deadline_s)


class SpoolProcess(AnnouncedProcess):
    """`convgraph serve --spool SPOOL --json` over the replica in `home`."""

    def __init__(self, home: Path, spool: Path, *, deadline_s: float = DEADLINE_S) -> None:
        init(home)
        command = [*CLI, "--home", str(home), "serve", "--spool", str(spool), "--json"]
        super().__init__(command, what="convgraph serve --spool", deadline_s=deadline_s)


class ViewProcess(AnnouncedProcess):
    """`convgraph view --json` of the replica in `home`, on a free port; `base` is its origin."""

    def __init__(self, home: Path, *, deadline_s: float = DEADLINE_S) -> None:
        super().__init__([*CLI, "--home", str(home), "view", "--json"], what="convgraph view", deadline_s=deadline_s)
        self.base = self.url.split("/view/")[0]
