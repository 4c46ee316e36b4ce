"""Drafts: what an author decides about a record before the replica fills in the rest.

`turn_draft` makes the draft of one conversation turn, `response_drafts` those of a
provider's response (thinking / reasoning blocks and their signatures kept byte for byte).
Pure. Invariant: a turn's draft is of the kind its role writes (`user_message`,
`agent_message`, `tool_result`) and its payload names the conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.errors import ProjectionError
from convgraph.projections.resume import RECORDERS
from convgraph.projections.turn import Role, ToolCall


@dataclass(frozen=True)
class Draft:
    """One record to write: what the author decides; the replica fills in the rest."""

    kind: str
    payload: dict[str, Any]
    refs: Sequence[CID] = ()
    branch: str | None = None


def genesis_payload(nonce: bytes, title: str | None, migrated_from: str | None) -> dict[str, Any]:
    """The payload of a genesis (docs/authority.md §2): `{nonce, title?, migrated_from?}`."""
    payload: dict[str, Any] = {"nonce": nonce}
    if title is not None:
        payload["title"] = title
    if migrated_from is not None:
        payload["migrated_from"] = migrated_from
    return payload


def merge_payload(
    branch: str, heads: Sequence[CID], accepted: Iterable[CID], summary: str | None,
    content: str | list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """A `merge` record's payload: the heads it joins, what of `branch` was accepted (sorted, once)."""
    payload: dict[str, Any] = {"branch": branch, "heads": heads, "accepted": sorted(set(accepted))}
    if summary is not None:
        payload["summary"] = summary
    if content is not None:
        payload["content"] = content
    return payload


def turn_draft(
    conv: str, role: Role | str, content: str | list[dict[str, Any]], *, tool_calls: Sequence[ToolCall] = (),
    tool_use_id: str | None = None, is_error: bool = False, branch: str | None = None,
) -> Draft:
    """The draft of one turn of `conv` as `role` (user, assistant or tool)."""
    try:
        role = Role(role)
    except ValueError:
        raise ProjectionError(f"role must be user, assistant or tool, not {role!r}") from None
    # given with another role they would be dropped without a word: refuse them instead
    if tool_calls and role is not Role.ASSISTANT:
        raise ProjectionError(f"only an assistant turn makes tool calls, not a {role.value} turn: "
                              "say it with role assistant, or leave the tool calls out")
    if (tool_use_id is not None or is_error) and role is not Role.TOOL:
        what = "tool_use_id" if tool_use_id is not None else "is_error"
        raise ProjectionError(f"only a tool turn has a {what} (the call it answers), not a {role.value} "
                              "turn: say it with role tool, or leave it out")
    payload: dict[str, Any] = {"conversation_id": conv, "role": role.value, "content": content}
    if role is Role.ASSISTANT:
        if tool_calls:
            payload["tool_calls"] = [
                {"id": c.id, "name": c.name, "input": c.input, **({"meta": c.meta} if c.meta else {})}
                for c in tool_calls
            ]
        kind = "agent_message"
    elif role is Role.TOOL:
        if tool_use_id is None:
            raise ProjectionError("a tool turn must name the tool_use_id it answers")
        payload.update(tool_use_id=tool_use_id, **({"is_error": True} if is_error else {}))
        kind = "tool_result"
    else:
        kind = "user_message"
    return Draft(kind, payload, branch=branch)


def response_drafts(conv: str, response: Any, *, provider: str | None, branch: str | None) -> list[Draft]:
    """The drafts of a provider's response (an SDK object, or its dict with `provider` named)."""
    name = provider or _provider_of(response)
    recorder = RECORDERS.get(name)
    if recorder is None:
        raise ProjectionError(f"cannot tell which provider made this {type(response).__name__}")
    return [Draft(kind, {"conversation_id": conv, **payload}, branch=branch)
            for kind, payload in recorder(response)]


_SDK_MODULES: Final = (
    ("anthropic.", "anthropic"),
    ("openai.types.chat.", "openai"),
    ("openai.types.responses.", "openai-responses"),
    ("google.genai.", "gemini"),
)


def _provider_of(response: Any) -> str:
    module = type(response).__module__ + "."
    return next((name for prefix, name in _SDK_MODULES if module.startswith(prefix)), "")
