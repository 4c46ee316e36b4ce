"""Code on the record page, in a real chromium against `convgraph view` in its own process: a
snapshot's files (text escaped, binary by size and CID, a missing artifact marked missing), a
patch's diff with its added and removed lines styled and its base and result, and the record
a review names."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from convgraph.artifacts.diff import make_unified_diff
from convgraph.core.cid import CID
from convgraph.replica import Replica
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
        return Code(home, snapshot.cid, tree, patch.cid, base, patch.payload["result"], review.cid, forged.cid)


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
