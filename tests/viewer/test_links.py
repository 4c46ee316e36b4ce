"""viewer/links.py on plain values: what a review, request or decision names, the records
naming a given one (decisions through their request), and the artifacts a record names."""

from __future__ import annotations

from convgraph.core.cid import CID
from convgraph.viewer import links
from convgraph.viewer.links import Mention, Said


def cid(name: str) -> CID:
    return CID.of_raw(name.encode())


PATCH, OTHER, BASE, RESULT = cid("patch"), cid("other"), cid("base"), cid("result")
REVIEW = Said(cid("review"), "review_comment", {"target": PATCH, "body": "ok", "verdict": "approve"})
ELSEWHERE = Said(cid("review 2"), "review_comment", {"target": OTHER, "body": "no", "verdict": "request_changes"})
ASK = Said(cid("ask"), "decision_request", {"question": "Merge\nit?\u202e", "subject": PATCH})
ASK_OTHER = Said(cid("ask 2"), "decision_request", {"question": "and that?", "subject": OTHER})
DECIDE = Said(cid("decide"), "decision", {"request": ASK.cid, "choice": "merge"})
DECIDE_OTHER = Said(cid("decide 2"), "decision", {"request": ASK_OTHER.cid, "choice": "hold"})
SAY = Said(cid("say"), "assistant_message", {"role": "assistant", "content": "see the patch", "target": PATCH})


def test_named_reads_the_field_of_each_kind_and_only_a_link() -> None:
    assert links.named("review_comment", REVIEW.payload) == PATCH
    assert links.named("decision_request", ASK.payload) == PATCH
    assert links.named("decision", DECIDE.payload) == ASK.cid
    assert links.named("decision_request", {"question": "no subject"}) is None
    assert links.named("review_comment", {"target": str(PATCH)}) is None  # text is never a link
    assert links.named("assistant_message", SAY.payload) is None  # a field of another kind says nothing


def test_mentions_are_reviews_requests_and_decisions_through_their_request_in_order() -> None:
    records = [SAY, REVIEW, ELSEWHERE, ASK, ASK_OTHER, DECIDE_OTHER, DECIDE]
    assert links.mentions(PATCH, records) == (
        Mention(REVIEW.cid, "review_comment", None, "approve"),
        Mention(ASK.cid, "decision_request", None, "Merge it?\\u202e"),  # one line, the override visible
        Mention(DECIDE.cid, "decision", ASK.cid, "merge"),
    )
    assert [m.cid for m in links.mentions(OTHER, records)] == [ELSEWHERE.cid, ASK_OTHER.cid, DECIDE_OTHER.cid]
    assert links.mentions(ASK.cid, records) == (Mention(DECIDE.cid, "decision", None, "merge"),)
    assert links.mentions(DECIDE.cid, records) == ()
    assert links.mentions(PATCH, [DECIDE, ASK]) == (  # the order given, whichever comes first
        Mention(DECIDE.cid, "decision", ASK.cid, "merge"), Mention(ASK.cid, "decision_request", None, "Merge it?\\u202e"))


def test_a_long_note_is_cut_to_one_line() -> None:
    long = Said(cid("long"), "decision_request", {"question": "x" * 200, "subject": PATCH})
    (found,) = links.mentions(PATCH, [long])
    assert len(found.note) == links.NOTE_WIDTH and found.note.endswith("…")
    odd = Said(cid("odd"), "decision", {"request": PATCH, "choice": 7})
    assert links.mentions(PATCH, [odd]) == (Mention(odd.cid, "decision", None, ""),)


def test_artifacts_are_named_as_the_record_names_them() -> None:
    patch = {"base": BASE, "diff": "…", "result": RESULT, "format": "unified"}
    assert links.artifacts("patch", patch) == {BASE: "base", RESULT: "result"}
    assert links.artifacts("patch", {**patch, "result": BASE}) == {BASE: "base"}  # the first name holds
    assert links.artifacts("patch", {"base": str(BASE)}) == {}
    tree = {"b.py": RESULT, "a\u202e.py": BASE, "c.py": BASE}
    assert links.artifacts("code_snapshot", {"tree": tree}) == {BASE: "a\\u202e.py", RESULT: "b.py"}
    assert links.artifacts("code_snapshot", {"tree": {"state": 1}}) == {}  # application state, no files
    assert links.artifacts("user_message", {"content": "hi"}, [OTHER, BASE]) == {OTHER: "ref", BASE: "ref"}
    assert links.artifacts("patch", patch, [BASE, OTHER]) == {BASE: "base", RESULT: "result", OTHER: "ref"}
    assert links.artifacts("review_comment", REVIEW.payload) == {}  # it names a record, not a file
