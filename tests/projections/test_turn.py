"""`turn_of`: one record (any of the four turn kinds, or the legacy shape) as a typed turn."""

from __future__ import annotations

from typing import Any

import pytest

from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.kinds import SCHEMAS
from convgraph.core.record import Record, sign_record
from convgraph.projections.state import Entry, entry_of
from convgraph.projections.turn import (
    DEFAULT_CONVERSATION,
    TURN_KINDS,
    Role,
    ToolCall,
    blocks_of,
    is_turn,
    turn_of,
)

KEY = SigningKey(bytes(range(32)))
T0 = 1_700_000_000_000


def mk(kind: str, payload: dict[str, Any], *, branch: str | None = None, wall: int = T0) -> Record:
    return sign_record(KEY, conv="c", seq=1, hlc=Hlc(wall, 3), parents=[], kind=kind, payload=payload,
                       branch=branch)


CALL = {"id": "call_1", "name": "lookup", "input": {"q": "x"}}


@pytest.mark.parametrize(
    ("kind", "payload", "role"),
    [
        ("user_message", {"content": "hi"}, Role.USER),
        ("agent_message", {"content": "hi"}, Role.ASSISTANT),
        ("tool_invocation", {"tool_calls": [CALL]}, Role.ASSISTANT),
        ("tool_result", {"tool_use_id": "call_1", "content": "hi"}, Role.TOOL),
    ],
)
def test_each_turn_kind_has_its_role(kind: str, payload: dict[str, Any], role: Role) -> None:
    r = mk(kind, payload, branch="alt", wall=T0 + 7)
    turn = turn_of(r)
    assert turn is not None and is_turn(r)
    assert turn.role is role
    assert turn.op == r.cid and turn.author == KEY.public and turn.hlc == Hlc(T0 + 7, 3)
    assert turn.branch == "alt"
    assert turn_of(entry_of(r)) == turn  # a folded entry reads exactly as its record


def test_legacy_speaker_text_timestamp_payload_folds() -> None:
    turn = turn_of(mk("user_message", {"speaker": "alice", "text": "hello", "timestamp": "2024-01-02"}))
    assert turn is not None
    assert turn.content == ({"type": "text", "text": "hello"},)
    assert turn.text == "hello"
    assert turn.timestamp == "2024-01-02"
    assert turn.conversation == DEFAULT_CONVERSATION


def test_content_wins_over_legacy_text() -> None:
    turn = turn_of(mk("agent_message", {"text": "old", "content": [{"type": "text", "text": "new"}]}))
    assert turn is not None and turn.text == "new"


def test_conversation_comes_from_the_payload_else_default() -> None:
    named, unnamed = turn_of(mk("user_message", {"content": "a", "conversation_id": "side"})), turn_of(
        mk("user_message", {"content": "a"})
    )
    assert named is not None and named.conversation == "side"
    assert unnamed is not None and unnamed.conversation == DEFAULT_CONVERSATION == "default"


def test_tool_calls_keep_their_meta() -> None:
    raw = '{"q":  "x"}'  # the provider's own bytes, spacing included
    payload = {"content": "", "tool_calls": [{**CALL, "meta": {"arguments": raw}},
                                             {"id": "call_2", "name": "ls", "input": {}}]}
    turn = turn_of(mk("agent_message", payload, wall=T0))
    assert turn is not None
    assert turn.tool_calls == (
        ToolCall("call_1", "lookup", {"q": "x"}, {"arguments": raw}),
        ToolCall("call_2", "ls", {}, {}),
    )
    assert turn.content == ()  # the calls are not content blocks
    assert turn.to_map()["tool_calls"][0]["meta"] == {"arguments": raw}


def test_tool_result_fields() -> None:
    turn = turn_of(mk("tool_result", {"tool_use_id": "call_1", "content": "boom", "is_error": True}))
    assert turn is not None and turn.tool_use_id == "call_1" and turn.is_error
    m = turn.to_map()
    assert m["tool_use_id"] == "call_1" and m["is_error"] is True and m["role"] == "tool"
    plain = turn_of(mk("user_message", {"content": "x"}))
    assert plain is not None and not plain.is_error
    assert {"tool_use_id", "is_error", "tool_calls", "branch", "provider"}.isdisjoint(plain.to_map())


def test_tool_call_arguments_raw_or_json() -> None:
    raw = '{"b": 1,  "a": [1, 2]}'
    assert ToolCall("c", "f", {"a": [1, 2], "b": 1}, {"arguments": raw}).arguments() == raw
    assert ToolCall("c", "f", {"b": 1, "a": [1, 2]}).arguments() == '{"a":[1,2],"b":1}'
    # a non-text `arguments` meta is not the provider's bytes: fall back to the input
    assert ToolCall("c", "f", {"x": "é"}, {"arguments": {"x": 1}}).arguments() == '{"x":"\\u00e9"}'


@pytest.mark.parametrize("kind", sorted(set(SCHEMAS) - TURN_KINDS))
def test_other_kinds_are_not_turns(kind: str) -> None:
    r = mk("user_message", {"content": "x"})
    entry = Entry(r.cid, kind, r.actor, r.hlc, None, {"content": "x"})
    assert turn_of(entry) is None and not is_turn(entry)


def test_real_non_turn_records_are_not_turns() -> None:
    target = mk("user_message", {"content": "x"})
    for kind, payload in [("retraction", {"target": target.cid}),
                          ("routing_observation", {"model": "m", "latency_ms": 5, "ok": True}),
                          ("code_snapshot", {"path": "a.py", "content": "x"})]:
        assert turn_of(mk(kind, payload)) is None


def test_blocks_of() -> None:
    assert blocks_of("") == ()
    assert blocks_of("hi") == ({"type": "text", "text": "hi"},)
    blocks = [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "ok"}]
    assert blocks_of(blocks) == tuple(blocks)
    assert blocks_of([]) == ()
    assert blocks_of(None) == () and blocks_of(7) == ()


def test_text_joins_only_text_blocks() -> None:
    content = [{"type": "thinking", "thinking": "secret", "signature": "s"}, {"type": "text", "text": "a"},
               {"type": "image", "source": {}}, {"type": "text", "text": "b"}]
    turn = turn_of(mk("agent_message", {"content": content, "provider": "anthropic"}))
    assert turn is not None and turn.text == "ab" and turn.provider == "anthropic"
    assert turn.content == tuple(content)
