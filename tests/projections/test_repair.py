"""Repair: each rule on the smallest sequence that needs it, and idempotence."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph.core.cid import CID
from convgraph.projections import repair as repair_
from convgraph.projections.message import Message
from convgraph.projections.repair import EMPTY_RESULT, repair
from convgraph.projections.turn import Role, ToolCall

U, A, T = Role.USER, Role.ASSISTANT, Role.TOOL


def text(s: str) -> tuple[dict[str, str], ...]:
    return ({"type": "text", "text": s},)


def user(s: str = "hi") -> Message:
    return Message(U, text(s), ops=(CID.of_record(s.encode()),))


def asst(s: str = "ok", *calls: str, provider: str | None = None, extra: tuple[dict[str, str], ...] = ()) -> Message:
    return Message(A, extra + (text(s) if s else ()), tuple(ToolCall(c, "f", {}) for c in calls), provider=provider)


def tool(call: str, s: str = "out") -> Message:
    return Message(T, text(s) if s else (), tool_use_id=call)


def shape(ms: list[Message]) -> list[str]:
    return [m.role.value + "".join(f"+{c.id}" for c in m.tool_calls) + (f"<{m.tool_use_id}" if m.tool_use_id else "")
            for m in ms]


def test_a_valid_exchange_is_left_alone() -> None:
    ms = [user(), asst("look", "c1", "c2"), tool("c1"), tool("c2"), asst("done")]
    assert repair(ms, "anthropic") == ms


def test_adjacent_same_role_messages_coalesce_in_order() -> None:
    out = repair([user("a"), user("b"), asst("x"), asst("y")], "openai")
    assert shape(out) == ["user", "assistant"]
    assert [b["text"] for b in out[0].content] == ["a", "b"]
    assert [b["text"] for b in out[1].content] == ["x", "y"]


def test_orphan_and_duplicate_results_are_dropped() -> None:
    out = repair([user(), tool("ghost"), asst("a", "c1"), tool("c1"), tool("c1", "again"), user("next"),
                  tool("c1", "late")], "openai")
    assert shape(out) == ["user", "assistant+c1", "tool<c1", "user"]


def test_a_result_that_arrives_after_a_concurrent_user_turn_moves_up_to_its_call() -> None:
    # the demo's case: the phone's user turn sorts between the laptop's call and its result
    out = repair([user("plan"), asst("day 1", "c1"), user("budget"), tool("c1", "sunny"), asst("revised")],
                 "anthropic")
    assert shape(out) == ["user", "assistant+c1", "tool<c1", "user", "assistant"]
    assert out[2].content == text("sunny")


def test_a_later_call_reusing_an_id_keeps_its_own_result() -> None:
    out = repair([user(), asst("a", "c1"), user("q"), asst("b", "c1"), tool("c1", "second")], "openai")
    assert shape(out) == ["user", "assistant", "user", "assistant+c1", "tool<c1"]


def test_unanswered_calls_are_stripped_and_empty_messages_vanish() -> None:
    out = repair([user(), asst("", "c1"), asst("partial", "c2", "c3"), tool("c3")], "anthropic")
    assert shape(out) == ["user", "assistant+c3", "tool<c3"]


def test_results_move_up_to_their_call_and_follow_in_call_order() -> None:
    # another device answered in between: the result arrives after a second assistant message
    out = repair([user(), asst("a", "c1", "c2"), asst("b"), tool("c2"), tool("c1")], "gemini")
    assert shape(out) == ["user", "assistant+c1+c2", "tool<c1", "tool<c2", "assistant"]


def test_history_starts_with_a_user_message() -> None:
    out = repair([tool("c0"), asst("a", "c1"), tool("c1"), user(), asst("b")], "openai")
    assert shape(out) == ["user", "assistant"]


def test_no_empty_or_whitespace_content_and_empty_results_get_a_placeholder() -> None:
    out = repair([user("  "), user("q"), asst(" \n"), asst("a", "c1"), tool("c1", ""), asst("end  \n")], "anthropic")
    assert shape(out) == ["user", "assistant+c1", "tool<c1", "assistant"]
    assert out[2].content == text(EMPTY_RESULT)
    assert out[-1].content == text("end")  # a final assistant message: no trailing whitespace


def test_opaque_blocks_are_kept_byte_for_byte_only_for_their_provider() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "c2lnbmVk"}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    ms = [user(), asst("a", provider="anthropic", extra=(thinking,))]
    assert repair(ms, "anthropic")[1].content == (thinking, *text("a"))
    assert repair(ms, "openai")[1].content == text("a")
    ms = [user(), asst("a", provider="openai-responses", extra=(reasoning,))]
    assert repair(ms, "openai-responses")[1].content[0] is reasoning
    assert repair(ms, "anthropic")[1].content == text("a")
    # a block of the right type but recorded from another provider is not trusted either
    assert repair([user(), asst("a", provider="openai", extra=(thinking,))], "anthropic")[1].content == text("a")


def test_repeated_call_ids_in_one_message_keep_the_first() -> None:
    out = repair([user(), asst("a", "c1", "c1"), tool("c1")], "openai")
    assert shape(out) == ["user", "assistant+c1", "tool<c1"]


def test_repair_is_idempotent() -> None:
    ms = [tool("x"), user(" "), user("q"), asst("a", "c1", "c2"), asst("b"), tool("c2"), user("r"), tool("c1")]
    for provider in ("anthropic", "openai", "openai-responses", "gemini"):
        once = repair(ms, provider)
        assert repair(once, provider) == once


def test_call_ids_stay_unique_when_a_runtime_reuses_them() -> None:
    ms = [user(), asst("a", "c1"), tool("c1", "first"), user("q"), asst("b", "c1", "c1_2"), tool("c1", "second"),
          tool("c1_2", "third"), asst("c", "c1"), tool("c1", "fourth")]
    out = repair(ms, "anthropic")
    assert shape(out) == ["user", "assistant+c1", "tool<c1", "user", "assistant+c1_2+c1_2_2", "tool<c1_2",
                          "tool<c1_2_2", "assistant+c1_3", "tool<c1_3"]
    assert [m.content for m in out if m.role is T] == [text(s) for s in ("first", "second", "third", "fourth")]
    assert repair(out, "anthropic") == out


def test_messages_that_need_no_repair_come_back_as_they_are_not_copied() -> None:
    ms = [user(), asst("look", "c1", "c2"), tool("c1"), tool("c2"), asst("between"), user("next")]
    out = repair(ms, "anthropic")
    assert len(out) == len(ms) and all(a is b for a, b in zip(out, ms, strict=True))


def test_the_first_of_two_answers_to_one_call_is_the_one_kept() -> None:
    out = repair([user(), asst("a", "c1"), tool("c1", "first"), tool("c1", "second")], "openai")
    assert shape(out) == ["user", "assistant+c1", "tool<c1"] and out[2].content == text("first")


def test_only_a_tool_message_answers_a_call() -> None:
    impostor = Message(U, text("I am no result"), tool_use_id="c1")
    out = repair([user(), asst("a", "c1"), impostor, tool("c1", "real")], "anthropic")
    assert shape(out) == ["user", "assistant+c1", "tool<c1", "user<c1"]
    assert out[2].content == text("real")


def test_blocks_that_are_neither_text_nor_opaque_are_kept() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
    out = repair([Message(U, (image, *text("what is this?")))], "anthropic")
    assert out[0].content == (image, *text("what is this?"))


def test_a_final_assistant_message_loses_trailing_whitespace_of_its_last_text_block() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    out = repair([user(), Message(A, (*text("look:  "), image))], "anthropic")
    assert out[-1].content == (*text("look:"), image)


_X, _Y = CID.of_record(b"x"), CID.of_record(b"y")


@pytest.mark.parametrize(("first", "second", "calls", "owner"), [
    ("anthropic", None, (), "anthropic"),  # the target's opaque blocks stay replayable
    (None, "anthropic", (), "anthropic"),
    ("anthropic", "gemini", ("c1",), "gemini"),  # call details ride on the message with the calls
    (None, "openai", (), "openai"),
    ("openai", None, (), None),
])
def test_coalesced_messages_keep_every_op_and_the_right_owner(
    first: str | None, second: str | None, calls: tuple[str, ...], owner: str | None
) -> None:
    a = Message(A, text("one"), provider=first, ops=(_X,))
    b = Message(A, text("two"), tuple(ToolCall(c, "f", {}) for c in calls), provider=second, ops=(_Y,))
    out = repair([user(), a, b, *(tool(c) for c in calls)], "anthropic")
    assert out[1].provider == owner and out[1].ops == (_X, _Y)
    assert out[1].content == text("one") + text("two") and [c.id for c in out[1].tool_calls] == list(calls)


def test_a_tool_result_loses_its_empty_blocks_too() -> None:
    result = Message(T, (*text("out"), *text("  ")), tool_use_id="c1")
    out = repair([user(), asst("a", "c1"), result], "openai")
    assert out[2].content == text("out")


def _pair_results_by_scan(messages: list[Message]) -> list[Message]:
    """Rule 3's pairing as it was first written: for each call, scan forward. The reference
    the indexed `_pair_results` must equal (it was quadratic in the window)."""
    out: list[Message] = []
    used: set[int] = set()
    taken: set[str] = set()
    for i, m in enumerate(messages):
        if m.role is T or i in used:
            continue
        if m.role is U or not m.tool_calls:
            out.append(m)
            continue
        wanted = {c.id for c in m.tool_calls}
        answers: dict[str, Message] = {}
        for j in range(i + 1, len(messages)):
            other = messages[j]
            if other.role is A and wanted.intersection(c.id for c in other.tool_calls):
                break
            answered = other.tool_use_id
            if other.role is T and j not in used and answered in wanted and answered not in answers:
                answers[answered] = other
                used.add(j)
        calls = tuple(c for c in m.tool_calls if c.id in answers)
        if calls:
            renamed = {c.id: repair_._fresh_id(c.id, taken) for c in calls}
            out.append(replace(m, tool_calls=tuple(replace(c, id=renamed[c.id]) for c in calls)))
            out.extend(replace(answers[c.id], tool_use_id=renamed[c.id]) for c in calls)
        elif m.content:
            out.append(replace(m, tool_calls=()))
    return out


_IDS = st.sampled_from(["a", "b", "c"])
_MESSAGES = st.lists(st.one_of(
    st.builds(user, st.sampled_from(["q", "r"])),
    st.builds(lambda ids, s: asst(s, *dict.fromkeys(ids)), st.lists(_IDS, max_size=3), st.sampled_from(["", "x"])),
    st.builds(tool, _IDS, st.sampled_from(["out", "other"])),
), max_size=16)


@settings(max_examples=1000 if IN_CI else 300)
@given(_MESSAGES)
def test_pairing_results_by_index_equals_the_forward_scan(messages: list[Message]) -> None:
    assert repair_._pair_results(messages) == _pair_results_by_scan(messages)


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-responses", "gemini"])
def test_a_call_held_both_as_a_content_block_and_in_tool_calls_is_sent_once(provider: str) -> None:
    # LangChain's AIMessage from ChatAnthropic keeps each `tool_use` block in content and the
    # same call in `tool_calls`; Anthropic answered the doubled id with a 400
    block = {"type": "tool_use", "id": "c1", "name": "f", "input": {}}
    other = {"type": "tool_use", "id": "c9", "name": "f", "input": {}}
    out = repair([user(), asst("look", "c1", extra=(block, other)), tool("c1")], provider)
    assert shape(out) == ["user", "assistant+c1", "tool<c1"]
    assert block not in out[1].content
    if provider == "anthropic":  # the only format that carries a tool_use block in content
        assert other in out[1].content  # one naming no call of the message is not ours to drop
