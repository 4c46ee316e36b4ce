"""Payload schemas: one valid example per kind, and the ways a payload can be wrong."""

from __future__ import annotations

from typing import Any

import pytest

from convgraph.core import kinds
from convgraph.core.cid import CID
from convgraph.core.kinds import KINDS, MAX_DEPTH, check_payload
from convgraph.errors import SchemaError, UnknownKindError

C = CID.of_record(b"x")
LO, HI = sorted([CID.of_record(b"1"), CID.of_record(b"2")])
VALID: dict[str, dict[str, Any]] = {
    "user_message": {"content": "hi", "role": "user", "conversation_id": "c", "timestamp": 1},
    "agent_message": {"content": [{"type": "text", "text": "ok"}],
                      "tool_calls": [{"id": "t1", "name": "f", "input": {}}]},
    "tool_invocation": {"tool_calls": [{"id": "t1", "name": "f", "input": {"a": 1}}]},
    "tool_result": {"tool_use_id": "t1", "content": "42", "is_error": False},
    "code_snapshot": {"path": "a.py", "content": "print(1)"},
    "patch": {"base": C, "diff": "--- a\n+++ b\n"},
    "review_comment": {"target": C, "body": "nit", "verdict": "comment"},
    "decision_request": {"question": "ship?", "options": ["yes", "no"]},
    "decision": {"request": C, "choice": "yes"},
    "attestation": {"subject": C, "statement": "tests pass"},
    "checkpoint": {"heads": [C], "count": 3, "snapshot": C},
    "branch": {"name": "alt", "from": C},
    "merge": {"branch": "alt", "heads": [C], "accepted": [C]},
    "retraction": {"target": C},
    "routing_observation": {"model": "m", "latency_ms": 12, "ok": False},
    "supersession": {"target": C, "content": "fixed"},
    "pin": {"target": C},
    "grant": {"grantee": b"\x01" * 32, "rights": ["admin", "read", "write"]},
    "audit": {"target": C, "result": "pass"},
    "revocation": {"target": C, "reason": "lost device"},
}


def test_every_kind_has_an_example() -> None:
    assert sorted(VALID) == list(KINDS) and len(KINDS) == 20


@pytest.mark.parametrize("kind", KINDS)
def test_valid_examples_pass_and_meta_is_allowed(kind: str) -> None:
    check_payload(kind, VALID[kind])
    check_payload(kind, {**VALID[kind], "meta": {"anything": [1, 2]}})


@pytest.mark.parametrize("kind", KINDS)
def test_undeclared_field_fails(kind: str) -> None:
    with pytest.raises(SchemaError, match="undeclared"):
        check_payload(kind, {**VALID[kind], "surprise": 1})


@pytest.mark.parametrize("kind", KINDS)
def test_wrong_type_for_each_field_fails(kind: str) -> None:
    for name in VALID[kind]:
        if name == "timestamp":
            continue  # any value: legacy turns carry seconds, ms or ISO text
        wrong = {**VALID[kind], name: object()}
        with pytest.raises(SchemaError):
            check_payload(kind, wrong)


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("user_message", {}),
        ("user_message", {"role": "assistant", "content": "x"}),
        ("agent_message", {"model": "m"}),
        ("tool_invocation", {"tool_calls": []}),
        ("tool_invocation", {"tool_calls": [{"id": "", "name": "f", "input": {}}]}),
        ("tool_invocation", {"tool_calls": [{"id": "1", "name": "f"}]}),
        ("tool_result", {"content": "no id"}),
        ("tool_result", {"tool_use_id": "  ", "content": "x"}),
        ("agent_message", {"content": [{"text": "block without type"}]}),
        ("review_comment", {"target": C, "body": "x", "verdict": "meh"}),
        ("grant", {"grantee": b"short", "rights": ["read"]}),
        ("grant", {"grantee": b"\x01" * 32, "rights": ["fly"]}),
        ("checkpoint", {"heads": [C], "count": -1, "snapshot": C}),
        ("decision", {"request": str(C), "choice": "yes"}),
        ("user_message", {"content": "x", "meta": "not a map"}),
        ("checkpoint", {"heads": [HI, LO], "count": 1, "snapshot": C}),
        ("merge", {"branch": "b", "heads": [LO, LO], "accepted": []}),
        ("merge", {"branch": "b", "heads": [], "accepted": []}),
        ("grant", {"grantee": b"\x01" * 32, "rights": ["write", "read"]}),
        ("grant", {"grantee": b"\x01" * 32, "rights": ["read", "read"]}),
        ("tool_invocation", {"tool_calls": [{"id": "1", "name": "f", "input": {}, "meta": 5}]}),
        ("user_message", {1: "int key", "content": "x"}),
    ],
)
def test_invalid_payloads(kind: str, payload: dict[str, Any]) -> None:
    with pytest.raises(SchemaError):
        check_payload(kind, payload)


def test_unknown_kind_and_non_map() -> None:
    with pytest.raises(UnknownKindError):
        check_payload("nope", {})
    with pytest.raises(SchemaError):
        check_payload("user_message", ["content"])


def test_depth_bound() -> None:
    nested: Any = "leaf"
    for _ in range(MAX_DEPTH):
        nested = [nested]
    check_payload("user_message", {"content": "x", "meta": {"n": nested[0][0]}})
    with pytest.raises(SchemaError, match="nested"):
        check_payload("user_message", {"content": "x", "meta": {"n": nested}})


@pytest.mark.parametrize(("kind", "name", "good", "bad"), [
    ("checkpoint", "count", [0, 1, 2**53 - 1], [-1, 2**53, 1.0, True]),
    ("routing_observation", "latency_ms", [0, 0.0, 0.5, 2**53 - 1], [-1, -0.5, 2**53, 2.0**53, "1"]),
    ("review_comment", "line", [0, 2**53 - 1], [-1, 2**53]),
])
def test_counts_and_latencies_run_from_zero_to_the_largest_exact_double(
    kind: str, name: str, good: list[Any], bad: list[Any]
) -> None:
    for value in good:
        check_payload(kind, {**VALID[kind], name: value})
    for value in bad:
        with pytest.raises(SchemaError, match=f"^{kind} payload field '{name}' has the wrong type$"):
            check_payload(kind, {**VALID[kind], name: value})


def test_the_set_and_list_checks_the_schemas_are_built_from() -> None:
    # the table is built once at import; these build the same checks anew, so what each
    # builder promises is checked here and not only through the one table it made
    cids, texts = kinds._cid_set(), kinds._text_set("a", "b")
    assert cids([]) and cids([LO]) and cids([LO, HI])
    assert not any(cids(v) for v in ([HI, LO], [LO, LO], [bytes(LO)], (LO,), None))
    assert not kinds._cid_set(nonempty=True)([]) and kinds._cid_set(nonempty=True)([LO])
    assert texts(["a"]) and texts(["a", "b"]) and texts(["b"])
    assert not any(texts(v) for v in ([], ["b", "a"], ["a", "a"], ["c"], "a", None))
    assert kinds._list_of(kinds._cid)([]) and kinds._list_of(kinds._cid)([HI, LO])
    assert not kinds._list_of(kinds._cid, nonempty=True)([]) and kinds._list_of(kinds._cid, nonempty=True)([LO])
    assert not kinds._list_of(kinds._cid)([LO, "x"]) and not kinds._list_of(kinds._cid)((LO,))


def nested_list(depth: int) -> Any:
    nested: Any = "leaf"
    for _ in range(depth):
        nested = [nested]
    return nested


@pytest.mark.parametrize(("kind", "payload", "why"), [
    ("nope", {}, "unknown kind 'nope'"),
    ("k" * 100, {}, f"unknown kind {'k' * 64!r}"),
    ("user_message", ["content"], "user_message payload must be a map"),
    ("tool_result", {"content": "x"}, "tool_result payload lacks required field 'tool_use_id'"),
    ("tool_result", {"tool_use_id": 5, "content": "x"}, "tool_result payload field 'tool_use_id' has the wrong type"),
    ("user_message", {1: "x", "content": "x"}, "user_message payload keys must be text"),
    ("user_message", {"content": "x", "f" * 100: 1}, f"user_message payload has undeclared field {'f' * 64!r}"),
    ("user_message", {"content": 5}, "user_message payload field 'content' has the wrong type"),
    ("user_message", {"role": "user"}, "user_message payload needs one of content, text"),
    ("user_message", {"content": "x", "meta": {"n": nested_list(MAX_DEPTH)}}, f"payload nested deeper than {MAX_DEPTH}"),
])
def test_each_payload_error_says_what_is_wrong_and_names_the_record(kind: str, payload: Any, why: str) -> None:
    with pytest.raises(SchemaError) as info:
        check_payload(kind, payload, cid="bafy-the-record")
    assert (info.value.message, info.value.cid) == (why, "bafy-the-record")
