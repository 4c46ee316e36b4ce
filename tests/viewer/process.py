"""`convgraph view` in a process of its own, and a real chromium driven by Playwright."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from playwright.sync_api import Browser, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package: Playwright's own download cannot be fetched here
_URL = re.compile(r"^viewer: (http://127\.0\.0\.1:\d+/view/\?token=[\w-]+)$", re.MULTILINE)


class ViewProcess:
    """Starts `convgraph view` on a free port and waits for the line that prints its URL."""

    def __init__(self, home: Path, timeout_s: float = 30) -> None:
        command = [sys.executable, "-m", "convgraph.cli", "--home", str(home), "view"]
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "300"})
        self._lines: list[str] = []
        self._named = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._named.wait(timeout_s) or self.proc.poll() is not None:
            self.close()
            raise AssertionError(f"convgraph view did not start: {self.log}")
        found = _URL.search(self.log)
        assert found, self.log
        self.url = found.group(1)
        self.base = self.url.split("/view/")[0]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.append(line)
            if _URL.search(self.log):
                self._named.set()
        self._named.set()

    @property
    def log(self) -> str:
        return "".join(self._lines)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ViewProcess:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's chromium under Playwright; missing, it fails (scripts/test installs it), never skips."""
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: `apt-get install -y chromium` (scripts/test does it as root)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield browser
        finally:
            browser.close()
