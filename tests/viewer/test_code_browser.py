"""Code on the record page, in a real chromium against `convgraph view` in its own process: a
snapshot's files (text escaped, binary by size and CID, a missing artifact marked missing), a
patch's diff with its added and removed lines styled and its base and result, and the record
a review names; and the links along what names what, clicked through: patch → review → patch,
patch → its base file, decision → request → subject."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from convgraph.artifacts.diff import make_unified_diff
from convgraph.core.cid import CID
from convgraph.replica import Replica
from convgraph.viewer.app import artifact_url
from servers import ViewProcess
from viewer.process import chromium

HOSTILE = "<script>alert('x')</script>\u202e & <b>bold</b>\n"
OLD = b"def total(xs):\n    return sum(xs)\n"
NEW = b"def total(xs):\n    return sum(xs, 0.0)\n"
ABSENT = CID.of_raw(b"named by the tree, never put here")


@dataclass(frozen=True)
class Code:
    home: Path
    snapshot: CID
    tree: dict[str, CID]
    patch: CID
    base: CID
    result: CID
    review: CID
    forged: CID
    request: CID
    decision: CID


def _code(home: Path, work: Path) -> Code:
    (work / "src").mkdir(parents=True)
    (work / "src" / "calc.py").write_bytes(OLD)
    (work / "src" / "evil.html").write_text(HOSTILE, "utf-8")
    (work / "logo.bin").write_bytes(bytes(range(256)))
    (work / "nul.dat").write_bytes(b"UTF-8, but a NUL\x00 in it")
    with Replica.open(home) as r:
        conv = r.create("code")
        made = r.snapshot(conv, ["src", "logo.bin", "nul.dat"], root=work)
        tree = {**made.tree, "gone.txt": ABSENT}  # a tree naming an artifact not held (sync may bring it)
        snapshot = r.write(conv, "code_snapshot", {"tree": tree})
        base = made.tree["src/calc.py"]
        patch = r.patch(conv, base, make_unified_diff(OLD, NEW, "src/calc.py"))
        review = r.review(conv, patch.cid, "sum(xs, 0.0) keeps floats", verdict="approve")
        forged = r.write(conv, "patch", {"base": base, "diff": make_unified_diff(OLD, NEW, "src/calc.py"),
                                         "result": r.put(b"not what the diff gives\n"), "format": "unified"})
        request = r.ask(conv, f"Merge it? {HOSTILE}", subject=patch.cid, options=["merge", "hold"])
        decision = r.decide(conv, request.cid, "merge")
        return Code(home, snapshot.cid, tree, patch.cid, base, patch.payload["result"], review.cid, forged.cid,
                    request.cid, decision.cid)


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory) -> Code:
    root = tmp_path_factory.mktemp("code")
    return _code(root / "home", root / "work")


@pytest.fixture(scope="module")
def served(code: Code) -> Iterator[ViewProcess]:
    with ViewProcess(code.home) as process:
        yield process


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as found:
        yield found


@pytest.fixture
def page(browser: Browser, served: ViewProcess) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    dialogs: list[str] = []
    opened.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    response = opened.goto(served.url)  # the token becomes a cookie
    assert response is not None and response.ok
    yield opened
    context.close()
    assert not dialogs  # no script in a file ran


def _record(page: Page, served: ViewProcess, cid: CID) -> None:
    response = page.goto(f"{served.base}/view/r/{cid}")
    assert response is not None and response.ok


def test_a_snapshot_lists_its_files_shows_text_escaped_and_marks_binary_and_missing(
        page: Page, served: ViewProcess, code: Code) -> None:
    _record(page, served, code.snapshot)
    rows = page.locator("#tree tr.file")
    expect(rows).to_have_count(5)
    expect(rows.locator("td.path")).to_have_text(["gone.txt", "logo.bin", "nul.dat", "src/calc.py", "src/evil.html"])
    missing = page.locator("#tree tr.file.missing")
    expect(missing).to_contain_text(str(ABSENT))
    expect(missing.locator(".badge.missing")).to_have_text("missing")
    binary = page.locator("#tree tr.file.binary")
    expect(binary).to_have_count(2)
    expect(binary.first).to_contain_text(str(code.tree["logo.bin"]))
    expect(binary.first).to_contain_text("256 bytes")
    expect(binary.nth(1)).to_contain_text(str(code.tree["nul.dat"]))
    texts = page.locator("pre.file-text")
    expect(texts).to_have_count(2)  # the two text files; the binary and the missing one are not shown
    expect(texts.first).to_have_text(OLD.decode())
    evil = texts.nth(1)
    expect(evil).to_contain_text("<script>alert('x')</script>")  # shown as text, not run
    expect(evil).to_contain_text("\\u202e")  # a bidi override made visible
    expect(page.locator("section.code script")).to_have_count(0)
    expect(page.locator("section.code b")).to_have_count(0)
    expect(page.locator("#claim.warn")).to_contain_text("pending")  # a named blob is not held: not checkable yet


def test_a_patch_shows_its_diff_styled_with_its_base_and_result(page: Page, served: ViewProcess, code: Code) -> None:
    _record(page, served, code.patch)
    diff = page.locator("#diff")
    expect(diff.locator("span.removed")).to_have_text(["-    return sum(xs)"])
    expect(diff.locator("span.added")).to_have_text(["+    return sum(xs, 0.0)"])
    expect(diff.locator("span.hunk")).to_have_count(1)
    expect(diff.locator("span.header")).to_have_text(["--- a/src/calc.py", "+++ b/src/calc.py"])
    added = diff.locator("span.added").evaluate("e => getComputedStyle(e).backgroundColor")
    removed = diff.locator("span.removed").evaluate("e => getComputedStyle(e).backgroundColor")
    context = diff.locator("span.context").first.evaluate("e => getComputedStyle(e).backgroundColor")
    assert len({added, removed, context}) == 3, (added, removed, context)
    expect(page.locator("#patch-base")).to_contain_text(str(code.base))
    expect(page.locator("#patch-base")).to_contain_text(f"{len(OLD)} bytes")
    expect(page.locator("#patch-result")).to_contain_text(str(code.result))
    expect(page.locator("#claim.ok")).to_contain_text("holds")


def test_a_forged_patch_result_is_shown_false(page: Page, served: ViewProcess, code: Code) -> None:
    _record(page, served, code.forged)
    expect(page.locator("#claim.bad")).to_contain_text("false")


def test_a_review_names_the_patch_it_read(page: Page, served: ViewProcess, code: Code) -> None:
    _record(page, served, code.review)
    names = page.locator("#names")
    expect(names).to_contain_text("reviews")
    expect(names.locator(".target-kind")).to_have_text("patch")
    names.locator("a.target").click()
    expect(page.locator("#f-cid")).to_have_text(str(code.patch))
    expect(page.locator("#diff")).to_be_visible()


def test_a_patch_links_its_reviews_and_decisions_and_they_link_back(page: Page, served: ViewProcess, code: Code) -> None:
    _record(page, served, code.patch)
    mentions = page.locator("#named-by li.mention")
    expect(mentions.locator("a.mention code")).to_have_text([str(code.review)[-10:], str(code.request)[-10:],
                                                              str(code.decision)[-10:]])
    expect(mentions.locator(".mention-kind")).to_have_text(["review", "request", "decision"])
    expect(mentions.nth(0).locator(".note")).to_have_text("approve")
    expect(mentions.nth(1).locator(".note")).to_contain_text("Merge it? <script>alert('x')</script>\\u202e")
    expect(mentions.nth(2).locator("a.via")).to_have_attribute("href", f"/view/r/{code.request}")
    expect(page.locator("#named-by script, #named-by b")).to_have_count(0)

    mentions.nth(0).locator("a.mention").click()  # patch → its review
    expect(page.locator("#f-cid")).to_have_text(str(code.review))
    expect(page.locator("#names")).to_contain_text("reviews")
    page.locator("#names a.target").click()  # → back to the patch
    expect(page.locator("#f-cid")).to_have_text(str(code.patch))
    expect(page.locator("#diff")).to_be_visible()
    page.locator("#named-by li.mention").nth(2).locator("a.mention").click()  # patch → the decision on it
    expect(page.locator("#f-cid")).to_have_text(str(code.decision))


def test_a_patch_links_its_base_and_result_files(page: Page, served: ViewProcess, code: Code) -> None:
    _record(page, served, code.patch)
    page.locator("#patch-base a.artifact").click()
    expect(page.locator("#a-cid")).to_have_text(str(code.base))
    expect(page.locator("#content")).to_have_text(OLD.decode())
    expect(page.locator("#a-size")).to_have_text(f"{len(OLD)} bytes")
    page.locator("#a-record a.record").click()  # and back to the patch naming it
    expect(page.locator("#f-cid")).to_have_text(str(code.patch))
    page.locator("#patch-result a.artifact").click()
    expect(page.locator("#a-cid")).to_have_text(str(code.result))
    expect(page.locator("#content")).to_have_text(NEW.decode())
    expect(page.locator("nav.top")).to_contain_text("result")


def test_a_snapshot_links_each_file_even_one_not_held(page: Page, served: ViewProcess, code: Code) -> None:
    _record(page, served, code.snapshot)
    page.locator("#tree tr.file").filter(has_text="evil.html").locator("a.artifact").click()
    expect(page.locator("#content")).to_contain_text("<script>alert('x')</script>")  # text, not run
    expect(page.locator("#content")).to_contain_text("\\u202e")
    expect(page.locator("main.artifact script, main.artifact b")).to_have_count(0)
    _record(page, served, code.snapshot)
    page.locator("#tree tr.file.missing a.artifact").click()
    expect(page.locator("#content.missing")).to_contain_text("missing")


def test_a_decision_links_its_request_and_through_it_the_subject(
        page: Page, served: ViewProcess, code: Code) -> None:
    _record(page, served, code.decision)
    expect(page.locator("#names .target-kind")).to_have_text("decision_request")
    expect(page.locator("#subject .subject-kind")).to_have_text("patch")
    page.locator("#subject a.subject").click()
    expect(page.locator("#f-cid")).to_have_text(str(code.patch))
    _record(page, served, code.decision)
    page.locator("#names a.target").click()
    expect(page.locator("#f-cid")).to_have_text(str(code.request))
    expect(page.locator("#names")).to_contain_text("asks about")
    expect(page.locator("#named-by a.mention code")).to_have_text([str(code.decision)[-10:]])
    page.locator("#names a.target").click()
    expect(page.locator("#f-cid")).to_have_text(str(code.patch))


def test_a_file_is_reached_only_through_a_record_that_names_it(served: ViewProcess, code: Code) -> None:
    with httpx.Client(base_url=served.base, follow_redirects=True, timeout=10) as client:
        assert client.get(served.url).status_code == 200  # the token becomes a cookie
        assert client.get(artifact_url(code.patch, code.base)).status_code == 200
        assert client.get(artifact_url(code.review, code.base)).status_code == 404  # a review names no file
        assert client.get(artifact_url(code.patch, code.tree["logo.bin"])).status_code == 404
        assert client.get(f"/view/r/{code.patch}/a/not-a-cid").status_code == 404
    with httpx.Client(base_url=served.base, timeout=10) as anonymous:
        assert anonymous.get(artifact_url(code.patch, code.base)).status_code == 403
