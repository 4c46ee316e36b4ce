"""Foreign content in the viewer cannot run: hostile payloads in a real browser.

Records whose text, titles, branch names, tool names, conversation names, file names and
file contents carry `<script>`, event-handler attributes, SVG with `onload`, `javascript:`
URLs and bidi overrides (U+202E) are shown on every page (a file's own included), one also
arriving live, and nothing executes:
`window.__pwned` stays undefined, no dialog opens, the only script is our file, no element
has an `on…` attribute, every link is one of ours, and each override is shown as a visible
`\\u202e` instead of reordering the text around it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from convgraph.artifacts.diff import make_unified_diff
from convgraph.projections.turn import ToolCall
from convgraph.replica import Replica
from convgraph.viewer.app import CSP, artifact_url, conv_url, record_url
from servers import ViewProcess
from viewer.process import chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One chromium per module (a module-scoped conftest fixture would shadow tests/conftest.py)."""
    with chromium() as found:
        yield found


RLO = "\u202e"
SCRIPT = "<script>window.__pwned = 'script'; alert(1)</script>"
HANDLERS = "<img src=x onerror=\"window.__pwned='img'\"><svg onload=\"window.__pwned='svg'\"><circle/></svg>"
BREAKOUT = "</text></svg></pre></div><script>window.__pwned='breakout'</script><a href=\"javascript:alert(2)\">x</a>"
JS_LINK = "javascript:window.__pwned='link';alert(3)"
MARKS = [SCRIPT, HANDLERS, BREAKOUT, JS_LINK, RLO]


@dataclass(frozen=True)
class Hostile:
    home: Path
    rooted: str
    legacy: str
    records: tuple[str, ...]
    files: tuple[str, ...]  # the pages of files records name


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Hostile:
    home = tmp_path_factory.mktemp("hostile")
    with Replica.open(home) as r:
        conv = r.create(f"{SCRIPT} trip {RLO}gpj.exe")
        written = [
            r.say(conv, "user", f"{SCRIPT}\n{HANDLERS}\npay {RLO}3.exe\n{JS_LINK}"),
            r.say(conv, "assistant", BREAKOUT, tool_calls=[
                ToolCall("call_1", f"{BREAKOUT}{RLO}", {"url": JS_LINK, "svg": HANDLERS})]),
            r.say(conv, "user", f"on a branch {RLO}", branch=f"b{RLO}<b onmouseover=alert(4)>x</b>"),
            r.write(conv, "code_snapshot", {"content": HANDLERS, "path": JS_LINK, "language": RLO + SCRIPT}),
            r.write(conv, "decision_request", {"question": f"{RLO}{BREAKOUT}", "options": [JS_LINK, SCRIPT]}),
        ]
        old = f"{SCRIPT}\n{HANDLERS}\n{RLO}\n".encode()
        base = r.put(old)
        patch = r.patch(conv, base, make_unified_diff(old, old + BREAKOUT.encode() + b"\n", f"{RLO}{SCRIPT}.py"))
        tree = r.write(conv, "code_snapshot", {"tree": {f"{BREAKOUT}{RLO}.html": base}})
        ask = r.ask(conv, f"{RLO}{BREAKOUT}", subject=patch.cid, options=[SCRIPT])
        written += [patch, tree, r.review(conv, patch.cid, f"{BREAKOUT}{HANDLERS}"), ask,
                    r.decide(conv, ask.cid, SCRIPT, rationale=JS_LINK)]
        files = (artifact_url(patch.cid, base), artifact_url(patch.cid, patch.payload["result"]),
                 artifact_url(tree.cid, base))
        legacy = f"<img src=x onerror=alert(5)>{RLO}legacy"
        written.append(r.write(legacy, "user_message", {"role": "user", "content": SCRIPT}))
    return Hostile(home, conv, legacy, tuple(str(w.cid) for w in written), files)


@pytest.fixture(scope="module")
def served(hostile: Hostile) -> Iterator[ViewProcess]:
    with ViewProcess(hostile.home) as process:
        yield process


def _nothing_ran(page: Page, dialogs: list[str]) -> None:
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == []
    scripts = page.evaluate("Array.from(document.scripts, s => [s.getAttribute('src'), s.text])")
    assert scripts == [["/view/static/viewer.js", ""]]
    handlers = page.evaluate("""Array.from(document.querySelectorAll('*')).flatMap(
        e => Array.from(e.attributes).filter(a => a.name.toLowerCase().startsWith('on')).map(a => a.name))""")
    assert handlers == []
    links = page.evaluate("Array.from(document.querySelectorAll('[href]'), e => e.getAttribute('href'))")
    assert all(link.startswith(("/view/", "#file-")) for link in links), links  # ours, or a snapshot's own file
    text = page.evaluate("document.body.innerText")
    assert RLO not in text
    assert RLO not in page.title()


def test_hostile_content_is_shown_inert(served: ViewProcess, hostile: Hostile, browser: Browser) -> None:
    context = browser.new_context()
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    response = page.goto(served.url)
    assert response is not None and response.ok
    assert response.headers["content-security-policy"] == CSP
    expect(page.locator("table.convs")).to_contain_text("\\u202e")  # the override, made visible
    _nothing_ran(page, dialogs)

    for path in [conv_url(hostile.rooted), conv_url(hostile.legacy), *hostile.files, *map(record_url, hostile.records)]:
        response = page.goto(served.base + path)
        assert response is not None and response.ok, path
        page.mouse.move(40, 300)  # over the graph and its labels: a mouseover handler would fire
        _nothing_ran(page, dialogs)
    expect(page.locator("#payload")).to_contain_text("<script>")  # shown as text, whole

    page.goto(served.base + conv_url(hostile.rooted))
    expect(page.locator("section.transcript")).to_contain_text("pay \\u202e3.exe")
    expect(page.locator("#live-status")).to_have_class("badge live")
    with Replica.open(hostile.home) as r:  # hostile text arriving live goes through the page's script
        r.say(hostile.rooted, "user", f"late {SCRIPT}{HANDLERS}{RLO}")
    expect(page.locator("section.transcript")).to_contain_text("late <script>", timeout=15_000)
    page.locator("svg.dag a.node").last.hover()
    _nothing_ran(page, dialogs)
    context.close()
