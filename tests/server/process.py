"""`convgraph serve --port 0` in a process of its own, for tests that kill it or limit it.

The home is made with `convgraph init` first when it holds no key: `serve` never creates one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType

_URL = re.compile(r"serving .* on (http://\S+) as ")


class ServeProcess:
    """Starts the server and waits for the line that names its URL (printed once it is bound).

    `nofile` sets the server's descriptor limit (`ulimit -n`); stderr is read all along, so a
    chatty server never blocks on a full pipe, and `log` holds what it wrote.
    """

    def __init__(self, home: Path, *args: str, nofile: int | None = None, timeout_s: float = 30) -> None:
        if not (home / "actor.key").exists():  # only `init` makes a replica (and the key a server signs with)
            subprocess.run([sys.executable, "-m", "convgraph.cli", "--home", str(home), "init"], check=True,
                           capture_output=True, timeout=60)
        command = [sys.executable, "-m", "convgraph.cli", "--home", str(home), "serve", "--port", "0", *args]
        if nofile is not None:  # the shell's `ulimit`, then exec: the server process itself is limited
            command = ["sh", "-c", f'ulimit -n {int(nofile)} && exec "$@"', "sh", *command]
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "300"})
        self._lines: list[str] = []
        self._named = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._named.wait(timeout_s) or self.proc.poll() is not None:
            self.close()
            raise AssertionError(f"convgraph serve did not start: {self.log}")
        found = _URL.search(" ".join(self.log.split()))
        assert found, self.log
        self.url = found.group(1)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._lines.append(line)
            if _URL.search(" ".join("".join(self._lines).split())):
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
        self._reader.join()  # the process is gone: its stderr ends
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
