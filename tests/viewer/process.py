"""`convgraph view` in a process of its own, and a real chromium driven by Playwright."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

from server.process import AnnouncedProcess

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package: Playwright's own download cannot be fetched here
_URL = re.compile(r"^viewer: (http://127\.0\.0\.1:\d+/view/\?token=[\w-]+)$", re.MULTILINE)


def _viewer_url(log: str) -> str | None:
    found = _URL.search(log)
    return found.group(1) if found else None


class ViewProcess(AnnouncedProcess):
    """Starts `convgraph view` on a free port and waits for the line that prints its URL."""

    def __init__(self, home: Path, timeout_s: float = 30) -> None:
        command = [sys.executable, "-m", "convgraph.cli", "--home", str(home), "view"]
        super().__init__(command, _viewer_url, merged=True, what="convgraph view", timeout_s=timeout_s)
        self.base = self.url.split("/view/")[0]


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
