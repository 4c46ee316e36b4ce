"""The transcript: canonical order, identity by op id, retraction, supersession, branches, merges."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from convgraph import ManualClock, NoUserTurnError, ProjectionError, Record, Replica, SigningKey
from convgraph.projections import state as state_
from convgraph.projections.transcript import fork_point, transcript, transcript_bytes
from convgraph.projections.turn import Role

C = "c"
T0 = 1_700_000_000_000
KEYS = [SigningKey(bytes([i + 7]) * 32) for i in range(3)]


def writers(n: int = 2) -> tuple[list[Replica], list[ManualClock]]:
    clocks = [ManualClock(T0) for _ in range(n)]
    return [Replica.in_memory(KEYS[i], clock=clocks[i]) for i in range(n)], clocks


def sync(dst: Replica, *srcs: Replica) -> None:
    for src in srcs:
        dst.ingest([r.data for r in src.iter_records()])


def texts(r: Replica, branch: str | None = None, last: int | None = None) -> list[str]:
    return [t.text for t in r.transcript(C, branch=branch, last=last)]


def test_concurrent_writers_converge_on_one_canonical_order() -> None:
    (a, b), (ca, cb) = writers()
    a1 = a.say(C, "user", "a1")  # T0
    cb.advance(5)
    b1 = b.say(C, "user", "b1")  # T0 + 5, never having seen a1
    ca.advance(10)
    cb.advance(5)
    a2, b2 = a.say(C, "assistant", "a2"), b.say(C, "assistant", "b2")  # both at (T0 + 10, 0)
    assert a2.hlc == b2.hlc
    sync(a, b)
    sync(b, a)
    tie = [r.cid for r in sorted([a2, b2], key=lambda r: r.actor)]  # equal clocks: the actor decides
    for r in (a, b):
        assert [t.op for t in r.transcript(C)] == [a1.cid, b1.cid, *tie]
    assert transcript_bytes(a.transcript(C)) == transcript_bytes(b.transcript(C))


def test_identical_turns_stay_distinct_turns() -> None:
    (a, b), _ = writers()
    same = {"role": "user", "content": "yes", "timestamp": 1000}
    first, second = a.write(C, "user_message", same), a.write(C, "user_message", same)
    other = b.write(C, "user_message", same)  # another device, same instant, same bytes of payload
    sync(a, b)
    turns = a.transcript(C)
    assert [t.text for t in turns] == ["yes"] * 3
    assert {t.timestamp for t in turns} == {1000}
    assert {t.op for t in turns} == {first.cid, second.cid, other.cid} and len({t.op for t in turns}) == 3


def test_retransmission_dedups() -> None:
    (a, b), (ca, _) = writers()
    for i in range(3):
        a.say(C, "user" if i % 2 == 0 else "assistant", f"t{i}")
        ca.advance(1)
    sync(b, a)
    want = transcript_bytes(b.transcript(C))
    data = [r.data for r in a.iter_records()]
    report = b.ingest(data[::-1] + data)
    assert report.accepted == [] and len(report.duplicates) == 6
    assert transcript_bytes(b.transcript(C)) == want and b.state(C).count == 3


def test_retraction_counts_only_from_the_targets_author() -> None:
    (a, b), _ = writers()
    keep, oops, after = a.say(C, "user", "keep"), a.say(C, "assistant", "oops"), a.say(C, "user", "after")
    sync(b, a)
    b.write(C, "retraction", {"target": oops.cid})  # not b's turn to retract
    sync(a, b)
    assert texts(a) == ["keep", "oops", "after"]
    a.write(C, "retraction", {"target": oops.cid, "reason": "typo"})
    assert [t.op for t in a.transcript(C)] == [keep.cid, after.cid]
    assert oops.cid in a.state(C).entries  # hidden, not lost
    sync(b, a)
    assert transcript_bytes(b.transcript(C)) == transcript_bytes(a.transcript(C))


def test_supersession_replaces_content_in_place() -> None:
    (a, b), (ca, cb) = writers()
    t1, t2, t3 = a.say(C, "user", "t1"), a.say(C, "assistant", "t2"), a.say(C, "user", "t3")
    ca.advance(10)
    a.write(C, "supersession", {"target": t2.cid, "content": "v2"})
    ca.advance(10)
    a.write(C, "supersession", {"target": t2.cid, "content": [{"type": "text", "text": "v3"}]})
    sync(b, a)
    cb.advance(100)
    b.write(C, "supersession", {"target": t2.cid, "content": "by b"})  # latest, but not the author
    sync(a, b)
    turns = a.transcript(C)
    assert [t.text for t in turns] == ["t1", "v3", "t3"]
    assert [t.op for t in turns] == [t1.cid, t2.cid, t3.cid] and turns[1].role is Role.ASSISTANT
    # canonical order decides, not arrival: fold with the older supersession arriving last
    records = a.records(C)
    for order in (records, records[::-1], records[2:] + records[:2]):
        assert transcript_bytes(transcript(state_.fold(order))) == transcript_bytes(turns)


@dataclass
class Forked:
    r: Replica
    q: Record
    ans: Record
    more: Record
    alt_q: Record
    alt_ans: Record
    cont: Record


def forked() -> Forked:
    """main: q, ans, more, …, cont; branch `alt` forks at `ans` (after `more` was written)."""
    (r,), (clock,) = writers(1)

    def say(role: str, text: str, branch: str | None = None) -> Record:
        clock.advance(1)
        return r.say(C, role, text, branch=branch)

    q, ans, more = say("user", "q"), say("assistant", "ans"), say("user", "more")
    r.branch(C, "alt", ans.cid, purpose="try another answer")
    alt_q, alt_ans = say("user", "alt q", "alt"), say("assistant", "alt ans", "alt")
    cont = say("user", "main continues")
    return Forked(r, q, ans, more, alt_q, alt_ans, cont)


def test_a_branch_sees_main_up_to_its_fork_point_then_its_own_turns() -> None:
    f = forked()
    assert texts(f.r, branch="alt") == ["q", "ans", "alt q", "alt ans"]
    assert texts(f.r) == ["q", "ans", "more", "main continues"]
    assert [t.branch for t in f.r.transcript(C, branch="alt")] == [None, None, "alt", "alt"]
    assert fork_point(f.r.state(C), "alt") == f.ans.order_key


def test_the_last_branch_record_of_a_name_wins() -> None:
    f = forked()
    f.r.branch(C, "alt", f.q.cid)
    assert texts(f.r, branch="alt") == ["q", "alt q", "alt ans"]
    assert fork_point(f.r.state(C), "alt") == f.q.order_key


def test_merge_with_content_is_one_assistant_turn_at_its_place() -> None:
    f = forked()
    m = f.r.merge(C, "alt", accepted=[f.alt_ans.cid], content="merged answer", summary="ignored")
    after = f.r.say(C, "user", "next")
    turns = f.r.transcript(C)
    assert [t.text for t in turns] == ["q", "ans", "more", "main continues", "merged answer", "next"]
    merged = turns[4]
    assert merged.op == m.cid and merged.role is Role.ASSISTANT and merged.author == f.r.actor
    assert merged.conversation == C and merged.hlc == m.hlc
    assert turns[-1].op == after.cid
    assert {f.alt_q.cid, f.alt_ans.cid}.isdisjoint(t.op for t in turns)
    assert texts(f.r, branch="alt") == ["q", "ans", "alt q", "alt ans"]  # the branch view is unchanged


def test_merge_with_only_accepted_shows_the_accepted_branch_turns() -> None:
    f = forked()
    branch_record = f.r.state(C).branches["alt"][-1][1]
    f.r.merge(C, "alt", accepted=[f.alt_ans.cid, branch_record])  # a non-turn accepted shows nothing
    f.r.say(C, "user", "next")
    turns = f.r.transcript(C)
    assert [t.text for t in turns] == ["q", "ans", "more", "main continues", "alt ans", "next"]
    assert turns[4].op == f.alt_ans.cid and turns[4].branch == "alt"


def test_merge_accepts_in_canonical_order_and_respects_retraction() -> None:
    f = forked()
    f.r.write(C, "retraction", {"target": f.alt_q.cid})
    f.r.merge(C, "alt", accepted=[f.alt_q.cid, f.alt_ans.cid])
    assert texts(f.r) == ["q", "ans", "more", "main continues", "alt ans"]
    g = forked()
    g.r.merge(C, "alt", accepted=[g.alt_q.cid, g.alt_ans.cid])
    assert texts(g.r)[-2:] == ["alt q", "alt ans"]


def test_merge_with_a_summary_only() -> None:
    f = forked()
    m = f.r.merge(C, "alt", summary="tried alt: worse")
    turns = f.r.transcript(C)
    assert [t.text for t in turns] == ["q", "ans", "more", "main continues", "tried alt: worse"]
    assert turns[-1].op == m.cid and turns[-1].role is Role.ASSISTANT


def test_last_windows() -> None:
    (r,), _ = writers(1)
    made = [r.say(C, "user" if i % 2 == 0 else "assistant", f"t{i}") for i in range(5)]
    everything = [t.op for t in r.transcript(C)]
    assert everything == [m.cid for m in made]
    assert r.transcript(C, last=0) == []
    assert [t.op for t in r.transcript(C, last=1)] == everything[-1:]
    assert [t.op for t in r.transcript(C, last=3)] == everything[-3:]
    assert [t.op for t in r.transcript(C, last=99)] == everything
    assert transcript(r.state(C), last=-2) == []


def test_last_window_on_a_branch_reaches_into_main() -> None:
    f = forked()
    assert texts(f.r, branch="alt", last=3) == ["ans", "alt q", "alt ans"]


def test_conversation_filter() -> None:
    (r,), _ = writers(1)
    mine = [r.say(C, "user", "c1"), r.say(C, "assistant", "c2")]
    side = r.write(C, "user_message", {"content": "side", "conversation_id": "side"})
    legacy = r.write(C, "user_message", {"speaker": "bob", "text": "legacy"})
    state = r.state(C)
    assert len(transcript(state)) == 4
    assert [t.op for t in transcript(state, conversation=C)] == [m.cid for m in mine]
    assert [t.op for t in transcript(state, conversation="side")] == [side.cid]
    assert [t.op for t in transcript(state, conversation="default")] == [legacy.cid]
    assert [t.op for t in transcript(state, conversation=C, last=1)] == [mine[1].cid]  # window after filter
    assert transcript(state, conversation="absent") == []


def test_unknown_branch() -> None:
    f = forked()
    assert fork_point(f.r.state(C), "nope") is None
    assert transcript(f.r.state(C), branch="nope") == []
    assert f.r.transcript(C, branch="nope") == []


@pytest.mark.parametrize("branch", [None, "alt"])
def test_transcript_is_a_function_of_the_record_set(branch: str | None) -> None:
    f = forked()
    f.r.merge(C, "alt", accepted=[f.alt_ans.cid])
    records = f.r.records(C)
    want = transcript_bytes(transcript(state_.fold(records), branch=branch))
    for order in (records[::-1], records[1::2] + records[::2]):
        assert transcript_bytes(transcript(state_.fold(order), branch=branch)) == want


def test_resume_windows_widen_back_to_a_user_turn_with_text_and_are_never_empty() -> None:
    (r,), _ = writers(1)
    made = [r.say(C, "user", "question"), r.say(C, "assistant", "a1"), r.say(C, "user", "   "),
            r.say(C, "assistant", "a2"), r.say(C, "assistant", "a3")]
    ops = [m.cid for m in made]
    w = r.resume_window(C, last=2)
    assert [t.op for t in w.turns] == ops and w.widened == 3  # the blank user turn does not open it
    w = r.resume_window(C, last=5)
    assert [t.op for t in w.turns] == ops and w.widened == 0
    assert r.resume_window(C).turns == r.transcript(C)
    for provider in ("anthropic", "openai", "openai-responses", "gemini"):
        wire = r.resume(C, provider, last=1)
        assert wire and (wire[0].get("role") == "user")
    with pytest.raises(ProjectionError, match="at least one turn"):
        r.resume_window(C, last=0)


def test_resume_with_no_user_turn_is_a_typed_error_not_an_empty_list() -> None:
    (r,), _ = writers(1)
    with pytest.raises(NoUserTurnError, match="nothing to resume"):
        r.resume(C)  # nothing at all
    r.say(C, "assistant", "hello?")
    r.say(C, "user", " ")
    with pytest.raises(NoUserTurnError, match="no visible turn is a user turn with text") as caught:
        r.resume(C, "openai", last=1)
    assert caught.value.rule == "no_user_turn"
