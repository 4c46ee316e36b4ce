"""A real chromium driven by Playwright, for the viewer's pages (`convgraph view` itself is
started by `servers.ViewProcess`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package: Playwright's own download cannot be fetched here


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
