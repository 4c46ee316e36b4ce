"""viewer/code.py over a replica in memory: how each artifact a record names is shown (text,
binary, large, missing, corrupt), how a diff's lines read, and what a review names."""

from __future__ import annotations

from convgraph.artifacts.blocks import CHUNK_SIZE
from convgraph.artifacts.diff import make_unified_diff
from convgraph.core.cid import CID
from convgraph.replica import Replica
from convgraph.viewer import code


def test_each_artifact_is_shown_by_what_is_held() -> None:
    r = Replica.in_memory()
    text, binary = r.put(b"x = 1\n"), r.put(b"\xff\xfe")
    large = r.put(b"a" * (code.SHOWN_BYTES + 1))
    assert code.artifact(r, text, "t") == code.File("t", text, code.TEXT, 6, "x = 1\n")
    assert code.artifact(r, binary, "b") == code.File("b", binary, code.BINARY, 2)
    assert code.artifact(r, large, "l") == code.File("l", large, code.LARGE, code.SHOWN_BYTES + 1)
    assert code.artifact(r, text, "t", read=False).text is None
    absent = CID.of_raw(b"absent")
    assert code.artifact(r, absent, "m").status == code.MISSING
    rotten = CID.of_raw(b"the real bytes")
    r.store.put_blocks([(rotten, b"other bytes")])  # as a store that rotted would hand them back
    assert code.artifact(r, rotten, "c").status == code.CORRUPT


def test_a_manifest_held_without_a_chunk_is_missing_with_its_size() -> None:
    r = Replica.in_memory()
    data = b"z" * (CHUNK_SIZE + 1)
    cid = r.put(data)
    donor = Replica.in_memory()
    donor.store.put_blocks([(cid, r.store.get_block(cid) or b"")])  # the manifest only
    shown = code.artifact(donor, cid, "big")
    assert (shown.status, shown.size) == (code.MISSING, len(data))


def test_diff_lines_are_styled_by_their_place_and_sign() -> None:
    diff = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n--- not a header here\n"
    styles = [(d.style, d.text) for d in code.diff_lines(diff)]
    assert styles == [("header", "diff --git a/f b/f"), ("header", "--- a/f"), ("header", "+++ b/f"),
                      ("hunk", "@@ -1,3 +1,3 @@"), ("context", " a"), ("removed", "-b"), ("added", "+c"),
                      ("removed", "--- not a header here")]
    assert code.diff_lines("@@ -1 +1 @@\n-\u202e\n")[1].text == "-\\u202e"  # foreign text made safe


def test_views_of_a_snapshot_a_patch_and_the_records_that_name_them() -> None:
    r = Replica.in_memory()
    conv = r.create("t")
    tree = {f"f{i:03}.txt": r.put(str(i).encode()) for i in range(code.SHOWN_FILES + 2)}
    snap = r.write(conv, "code_snapshot", {"tree": tree})
    view = code.view(r, snap)
    assert view is not None and len(view.files) == code.SHOWN_FILES and view.more_files == 2
    assert view.claim_style == "ok" and view.claim is not None and view.claim.startswith("holds")
    base = tree["f000.txt"]
    patch = r.patch(conv, base, make_unified_diff(b"0", b"1", "f000.txt"))
    shown = code.view(r, patch)
    assert shown is not None and shown.base is not None and shown.result is not None
    assert (shown.base.cid, shown.result.cid, shown.base.status) == (base, patch.payload["result"], code.BINARY)
    review = code.view(r, r.review(conv, patch.cid, "ok"))
    assert review is not None and review.target == code.Target(patch.cid, "patch")
    request = r.ask(conv, "ship?", subject=patch.cid)
    assert code.view(r, request) == code.CodeView("decision_request", target=code.Target(patch.cid, "patch"))
    decision = code.view(r, r.decide(conv, request.cid, "yes"))
    assert decision is not None and decision.target == code.Target(request.cid, "decision_request")
    assert decision.subject == code.Target(patch.cid, "patch")  # through the request
    bare = code.view(r, r.decide(conv, r.ask(conv, "lunch?").cid, "yes"))
    assert bare is not None and bare.target is not None and bare.subject is None
    assert code.view(r, r.say(conv, "user", "hi")) is None
    unheld = r.write(conv, "review_comment", {"target": CID.of_raw(b"elsewhere"), "body": "?"})
    assert code.view(r, unheld) == code.CodeView("review_comment", target=code.Target(CID.of_raw(b"elsewhere"), None))


def test_a_stale_decision_says_so_on_its_page_and_the_rest_say_nothing() -> None:
    from convgraph.viewer.views import record as record_view

    r = Replica.in_memory()
    conv = r.create("review")
    base = r.put(b"n = 1\n")
    first = r.patch(conv, base, make_unified_diff(b"n = 1\n", b"n = 2\n", "n.py"))
    r.review(conv, first.cid, "fine", verdict="approve")
    ask = r.ask(conv, "merge?", subject=first.cid, options=["merge"], reviews=1)
    second = r.patch(conv, first.payload["result"], make_unified_diff(b"n = 2\n", b"n = 3\n", "n.py"))
    decision = r.decide(conv, ask.cid, "merge")
    view = record_view(r, decision.cid)
    assert view is not None and len(view.notes) == 1
    assert view.notes[0].startswith("stale:") and str(second.cid) in view.notes[0]
    assert record_view(r, ask.cid).notes == ()  # type: ignore[union-attr]


def test_the_records_naming_a_patch_and_the_files_reached_through_it() -> None:
    r = Replica.in_memory()
    conv, other = r.create("t"), r.create("u")
    base = r.put(b"0\n")
    patch = r.patch(conv, base, make_unified_diff(b"0\n", b"1\n", "f"))
    review = r.review(conv, patch.cid, "fine", verdict="approve")
    r.say(conv, "user", "unrelated")
    request = r.ask(conv, "ship?", subject=patch.cid, options=["ship"])
    decision = r.decide(conv, request.cid, "ship")
    assert [(m.cid, m.via) for m in code.mentions(r, conv, patch.cid)] == [
        (review.cid, None), (request.cid, None), (decision.cid, request.cid)]
    assert code.mentions(r, other, patch.cid) == ()  # another conversation's records only
    assert code.mentions(r, conv, review.cid) == ()

    shown = code.artifact_page(r, patch.cid, base)
    assert shown is not None and (shown.record, shown.conv, shown.kind) == (patch.cid, conv, "patch")
    assert shown.file == code.File("base", base, code.TEXT, 2, "0\n")
    result = code.artifact_page(r, patch.cid, patch.payload["result"])
    assert result is not None and result.file.text == "1\n" and result.file.path == "result"
    assert code.artifact_page(r, review.cid, base) is None  # a review names no file
    stranger = r.put(b"held, but not named by this patch")
    assert code.artifact_page(r, patch.cid, stranger) is None
    assert code.artifact_page(r, CID.of_raw(b"no record"), base) is None
