"""CLI processes that announce their URL: `convgraph serve --port 0` in a process of its own,
for tests that kill it or limit it, and the base `convgraph view` shares.

The home is made with `convgraph init` first when it holds no key: `serve` never creates one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

_URL = re.compile(r"serving .* on (http://\S+) as ")


class AnnouncedProcess:
    """Starts a command and waits for the line that names its URL (printed once it is bound).

    The announcing stream (stderr, or stdout with stderr merged into it) is read all along, so
    a chatty process never blocks on a full pipe, and `log` holds what it wrote.
    """

    def __init__(self, command: list[str], find: Callable[[str], str | None], *, merged: bool, what: str,
                 timeout_s: float) -> None:
        self.proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if merged else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if merged else subprocess.PIPE, text=True,
            env={**os.environ, "COLUMNS": "300"},
        )
        self._stream = self.proc.stdout if merged else self.proc.stderr
        self._find = find
        self._lines: list[str] = []
        self._named = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._named.wait(timeout_s) or self.proc.poll() is not None:
            self.close()
            raise AssertionError(f"{what} did not start: {self.log}")
        url = find(self.log)
        assert url, self.log
        self.url = url

    def _read(self) -> None:
        assert self._stream is not None
        for line in self._stream:
            self._lines.append(line)
            if self._find(self.log):
                self._named.set()
        self._named.set()  # the process ended: whoever waits sees it

    @property
    def log(self) -> str:
        return "".join(self._lines)

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
        self._reader.join()  # the process is gone: its stream ends
        if self._stream is not None:
            self._stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def _served_url(log: str) -> str | None:
    found = _URL.search(" ".join(log.split()))  # the line may wrap
    return found.group(1) if found else None


class ServeProcess(AnnouncedProcess):
    """`convgraph serve --port 0 ARGS`; `nofile` sets its descriptor limit (`ulimit -n`)."""

    def __init__(self, home: Path, *args: str, nofile: int | None = None, timeout_s: float = 30) -> None:
        if not (home / "actor.key").exists():  # only `init` makes a replica (and the key a server signs with)
            subprocess.run([sys.executable, "-m", "convgraph.cli", "--home", str(home), "init"], check=True,
                           capture_output=True, timeout=60)
        command = [sys.executable, "-m", "convgraph.cli", "--home", str(home), "serve", "--port", "0", *args]
        if nofile is not None:  # the shell's `ulimit`, then exec: the server process itself is limited
            command = ["sh", "-c", f'ulimit -n {int(nofile)} && exec "$@"', "sh", *command]
        super().__init__(command, _served_url, merged=False, what="convgraph serve", timeout_s=timeout_s)
