"""The viewer in a real browser: `convgraph view` in its own process, Debian's chromium.

A two-device conversation with concurrent writes, a branch and a merge: the list, the graph,
a record's detail, and a record written while the page is open arriving without a reload.
With CONVGRAPH_SCREENSHOT=1 the test also rewrites docs/viewer.png (the README's picture).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from convgraph.core.keys import fingerprint
from convgraph.replica import Replica
from convgraph.viewer.app import CSP
from servers import ViewProcess
from viewer.process import chromium
from viewer.world import TITLE, World, two_devices


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One chromium per module (a module-scoped conftest fixture would shadow tests/conftest.py)."""
    with chromium() as found:
        yield found

DOCS_SHOT = Path(__file__).resolve().parents[2] / "docs" / "viewer.png"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return two_devices(tmp_path_factory.mktemp("viewer"))


@pytest.fixture(scope="module")
def served(world: World) -> Iterator[ViewProcess]:
    with ViewProcess(world.laptop) as process:
        yield process


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    opened = context.new_page()
    dialogs: list[str] = []
    opened.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    yield opened
    context.close()
    assert not dialogs


def test_without_the_token_everything_is_refused(served: ViewProcess) -> None:
    base = served.base
    with httpx.Client() as client:
        for path in ("/view/", "/view/c?id=x", "/view/c/events?id=x", "/view/r/bafy", "/view/?token=guess"):
            response = client.get(base + path)
            assert response.status_code == 403, path
            assert response.headers["content-security-policy"] == CSP
        assert client.get(served.url).status_code == 303  # the token: a cookie, and the page without it
        assert client.get(base + "/view/").status_code == 200


def test_list_graph_record_and_a_live_record(served: ViewProcess, world: World, page: Page,
                                             tmp_path: Path) -> None:
    response = page.goto(served.url)
    assert response is not None and response.ok
    assert "token=" not in page.url  # dropped from the address once it set the cookie
    row = page.locator("table.convs tr", has_text=TITLE)
    expect(row).to_contain_text("trip")  # its local alias
    expect(row.locator("td.num").first).to_have_text("10")

    row.locator("a.conv").click()
    expect(page.locator("#live-status")).to_have_class("badge live")
    graph = page.locator("svg.dag")
    expect(graph.locator("a.node")).to_have_count(10)
    expect(graph.locator("text.lane-label", has_text="concurrent")).to_have_count(1)
    expect(graph.locator("text.lane-label", has_text="day-trips")).to_have_count(1)
    lanes = {world.labels[cid]: lane for cid, lane in graph.locator("a.node").evaluate_all(
        "els => els.map(e => [e.dataset.cid, Number(e.dataset.lane)])") if cid in world.labels}
    assert lanes["joined"] == lanes["merge"] == 0
    # the concurrent pair: whichever sorts first (its clock, then its key) continues main
    assert {lanes["day 1"], lanes["budget"]} == {0, 1}
    assert lanes["sintra?"] != 0 and lanes["sintra"] == lanes["sintra?"]
    merges = graph.locator("rect.merge").evaluate_all("els => els.map(e => e.parentElement.dataset.cid)")
    assert {world.labels[c] for c in merges if c in world.labels} >= {"joined", "merge"}
    transcript = page.locator("section.transcript")
    expect(transcript).to_contain_text("Budget is 800 EUR.")
    expect(transcript).not_to_contain_text("Sintra: Pena Palace")  # a branch turn: not on main
    page.locator("p.branches a", has_text="day-trips").click()
    expect(transcript).to_contain_text("Sintra: Pena Palace")
    page.go_back()

    graph.locator(f'a.node[data-cid="{world.merge}"]').click()
    expect(page.locator("#f-kind")).to_have_text("merge")
    expect(page.locator("#f-cid")).to_have_text(str(world.merge))
    expect(page.locator("#f-sig")).to_contain_text("verified")
    expect(page.locator("#f-sig .badge.ok")).to_have_count(1)
    expect(page.locator("#f-time")).to_contain_text("Z")
    expect(page.locator("#payload")).to_contain_text('"branch": "day-trips"')
    with Replica.open(world.laptop) as laptop:
        merged = laptop.get(world.merge)
        expect(page.locator("#f-author")).to_contain_text(fingerprint(laptop.actor))
    parents = page.locator("#f-parents a.parent")
    expect(parents).to_have_count(len(merged.parents))
    parents.first.click()  # parents are links
    expect(page.locator("#f-cid")).to_have_text(str(sorted(merged.parents)[0]))

    page.locator("nav.top a").nth(1).click()  # the record's conversation
    expect(page.locator("#live-status")).to_have_class("badge live")
    with Replica.open(world.laptop) as laptop:  # another process writes while the page is open
        written = laptop.say(world.conv, "user", "Book the 09:10 train, please.")
    expect(transcript).to_contain_text("Book the 09:10 train, please.", timeout=15_000)
    expect(graph.locator("a.node")).to_have_count(11)
    expect(graph.locator(f'a.node.fresh[data-cid="{written.cid}"]')).to_have_count(1)
    expect(page.locator("#count")).to_contain_text("11 records")

    shot = tmp_path / "viewer.png"
    page.screenshot(path=str(shot), animations="disabled")
    assert shot.read_bytes().startswith(b"\x89PNG")
    if os.environ.get("CONVGRAPH_SCREENSHOT") == "1":
        DOCS_SHOT.write_bytes(shot.read_bytes())
