"""The record kinds and the schema of each kind's payload, declared in one table.

A payload is a DAG-CBOR map. Each kind names its required and optional fields with a type;
any payload may also carry `meta`, a free map for applications. A field not declared is an
error, so two versions of convgraph never read one payload two ways. Invariant:
`check_payload(kind, p)` accepts exactly the payloads this table describes, and it walks
nested values without recursion, so hostile nesting cannot exhaust the stack.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.errors import SchemaError, UnknownKindError

MAX_DEPTH: Final = 64
NONCE_LEN: Final = 16
CAPABILITIES: Final = ("admin", "decide", "merge", "read", "review", "write")
_Check = Callable[[Any], bool]


def _text(v: Any) -> bool:
    return type(v) is str


def _nonempty_text(v: Any) -> bool:
    return type(v) is str and v.strip() != ""


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v <= 2**53 - 1


def _latency(v: Any) -> bool:
    return type(v) in (int, float) and 0 <= v <= 2**53 - 1


def _bool(v: Any) -> bool:
    return type(v) is bool


def _map(v: Any) -> bool:
    return type(v) is dict


def _cid(v: Any) -> bool:
    return type(v) is CID


def _actor(v: Any) -> bool:
    return type(v) is bytes and len(v) == 32


def _nonce(v: Any) -> bool:
    return type(v) is bytes and len(v) == NONCE_LEN


def _actor_set(v: Any) -> bool:
    """A non-empty list of actors sorted bytewise without duplicates: one set, one encoding."""
    return _list_of(_actor, nonempty=True)(v) and all(a < b for a, b in itertools.pairwise(v))


def _list_of(item: _Check, *, nonempty: bool = False) -> _Check:
    return lambda v: type(v) is list and (bool(v) or not nonempty) and all(map(item, v))


def _cid_set(*, nonempty: bool = False) -> _Check:
    """A list of CIDs sorted by binary form without duplicates: one set, one encoding."""
    return lambda v: (
        _list_of(_cid, nonempty=nonempty)(v) and all(a < b for a, b in itertools.pairwise(v))
    )


def _text_set(*choices: str) -> _Check:
    """A non-empty list of distinct `choices`, sorted: one set, one encoding."""
    return lambda v: (
        _list_of(_one_of(*choices), nonempty=True)(v) and all(a < b for a, b in itertools.pairwise(v))
    )


def _one_of(*choices: str) -> _Check:
    return lambda v: type(v) is str and v in choices


def _any(_: Any) -> bool:
    return True


def _tool_call(v: Any) -> bool:
    return (
        type(v) is dict
        and {"id", "name", "input"} <= v.keys() <= {"id", "name", "input", "meta"}
        and _nonempty_text(v["id"])
        and _nonempty_text(v["name"])
        and _map(v["input"])
        and _map(v.get("meta", {}))
    )


def _content(v: Any) -> bool:
    """Text, or a list of content blocks (maps with a text `type`), as providers use."""
    if type(v) is str:
        return True
    return type(v) is list and all(type(b) is dict and _text(b.get("type")) for b in v)


@dataclass(frozen=True)
class Schema:
    """Fields a payload must have and may have, each with its type check."""

    required: Mapping[str, _Check]
    optional: Mapping[str, _Check] = field(default_factory=dict)
    one_of: tuple[str, ...] = ()  # at least one of these optional fields must be present


_TURN: Final[dict[str, _Check]] = {
    "conversation_id": _text,
    "timestamp": _any,
    "speaker": _text,
    "text": _text,
    "name": _text,
}

SCHEMAS: Final[Mapping[str, Schema]] = {
    "user_message": Schema(
        {}, {**_TURN, "role": _one_of("user"), "content": _content}, ("content", "text")
    ),
    "agent_message": Schema(
        {},
        {
            **_TURN,
            "role": _one_of("assistant"),
            "content": _content,
            "tool_calls": _list_of(_tool_call),
            "model": _text,
            "stop_reason": _text,
            "provider": _text,
        },
        ("content", "text", "tool_calls"),
    ),
    "tool_invocation": Schema(
        {"tool_calls": _list_of(_tool_call, nonempty=True)},
        {**_TURN, "role": _one_of("assistant")},
    ),
    "tool_result": Schema(
        {"tool_use_id": _nonempty_text, "content": _content},
        {**_TURN, "role": _one_of("tool"), "is_error": _bool},
    ),
    "code_snapshot": Schema(
        {},
        {"path": _text, "language": _text, "content": _text, "tree": _map, "blob": _cid},
        ("content", "tree", "blob"),
    ),
    "patch": Schema(
        {"base": _cid, "diff": _text},
        {"format": _text, "result": _cid, "path": _text},
    ),
    "review_comment": Schema(
        {"target": _cid, "body": _text},
        {"verdict": _one_of("approve", "request_changes", "comment"), "line": _count},
    ),
    "decision_request": Schema(
        {"question": _nonempty_text},
        {"options": _list_of(_text), "subject": _cid},
    ),
    "decision": Schema(
        {"request": _cid, "choice": _text},
        {"rationale": _text},
    ),
    "attestation": Schema(
        {"subject": _cid, "statement": _text},
        {"claims": _map},
    ),
    "checkpoint": Schema(
        {"heads": _cid_set(), "count": _count, "snapshot": _cid},
        {"previous": _cid},
    ),
    "branch": Schema(
        {"name": _nonempty_text, "from": _cid},
        {"purpose": _text},
    ),
    "merge": Schema(
        {"branch": _nonempty_text, "heads": _cid_set(nonempty=True), "accepted": _cid_set()},
        {"summary": _text, "content": _content},
    ),
    "retraction": Schema({"target": _cid}, {"reason": _text}),
    "routing_observation": Schema(
        {"model": _nonempty_text, "latency_ms": _latency, "ok": _bool},
        {"provider": _text, "route": _text},
    ),
    "supersession": Schema({"target": _cid, "content": _content}, {"reason": _text}),
    "pin": Schema({"target": _cid}, {"note": _text}),
    "grant": Schema(
        {"grantee": _actor, "rights": _text_set("admin", "read", "write")},
        {"expires_ms": _count, "note": _text},
    ),
    "audit": Schema(
        {"target": _cid, "result": _one_of("pass", "fail", "inconclusive")},
        {"notes": _text},
    ),
    "revocation": Schema({"target": _cid}, {"reason": _text}),
}

# Rooted conversations (docs/authority.md) read some kinds differently; legacy conversations
# keep exactly the table above, so a version-1 replica and this one accept the same records.
ROOTED_SCHEMAS: Final[Mapping[str, Schema]] = {
    **SCHEMAS,
    "genesis": Schema({"nonce": _nonce}, {"title": _text, "migrated_from": _nonempty_text}),
    "decision_request": Schema(
        {"question": _nonempty_text},
        {"options": _list_of(_text), "subject": _cid, "reviews": _count, "reviewers": _actor_set},
    ),
    "grant": Schema(
        {"grantee": _actor, "rights": _text_set(*CAPABILITIES)},
        {"expires_ms": _count, "note": _text},
    ),
    "revocation": Schema(
        {"grantee": _actor, "rights": _text_set(*CAPABILITIES)},
        {"reason": _text},
    ),
    # rooted only: the legacy table stays exactly what a version-1 replica accepts
    "system_prompt": Schema({"content": _text}),
}

KINDS: Final = tuple(sorted(SCHEMAS))
ROOTED_KINDS: Final = tuple(sorted(ROOTED_SCHEMAS))


def check_payload(kind: str, payload: Any, *, cid: object = None, rooted: bool = False) -> None:
    """Raise `SchemaError` unless `payload` is a valid payload of `kind`.

    `rooted` selects the table of a rooted conversation (docs/authority.md) over the legacy one.
    `genesis` is known in both: in a legacy conversation the root rule refuses it (GenesisError).
    """
    # docs/format.md §15.2: a legacy genesis passes check 15 only to fail check 15a, so every
    # replica that knows rooted conversations refuses it with the same error.
    schema = (ROOTED_SCHEMAS if rooted or kind == "genesis" else SCHEMAS).get(kind)
    if schema is None:
        raise UnknownKindError(f"unknown kind {kind[:64]!r}", cid=cid)
    if type(payload) is not dict:
        raise SchemaError(f"{kind} payload must be a map", cid=cid)
    _check_depth(payload, cid)
    for name, check in schema.required.items():
        if name not in payload:
            raise SchemaError(f"{kind} payload lacks required field {name!r}", cid=cid)
        if not check(payload[name]):
            raise SchemaError(f"{kind} payload field {name!r} has the wrong type", cid=cid)
    for name, value in payload.items():
        if type(name) is not str:
            raise SchemaError(f"{kind} payload keys must be text", cid=cid)
        if name in schema.required:
            continue
        optional = _map if name == "meta" else schema.optional.get(name)
        if optional is None:
            raise SchemaError(f"{kind} payload has undeclared field {name[:64]!r}", cid=cid)
        if not optional(value):
            raise SchemaError(f"{kind} payload field {name!r} has the wrong type", cid=cid)
    if schema.one_of and payload.keys().isdisjoint(schema.one_of):
        raise SchemaError(f"{kind} payload needs one of {', '.join(schema.one_of)}", cid=cid)


def _check_depth(value: Any, cid: object) -> None:
    """Containers (maps and lists) may nest `MAX_DEPTH` deep, the payload map counting as 1."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        for child in item.values() if type(item) is dict else item:
            if type(child) is dict or type(child) is list:
                if depth >= MAX_DEPTH:
                    raise SchemaError(f"payload nested deeper than {MAX_DEPTH}", cid=cid)
                stack.append((child, depth + 1))
