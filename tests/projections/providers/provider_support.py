"""Helpers for the wire-format tests: drafts through a real replica, SDK request validation."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from convgraph import Draft, Replica
from convgraph.core.codec import encode
from convgraph.core.kinds import check_payload
from convgraph.projections.message import Message, message_of
from convgraph.projections.turn import Role, turn_of

Drafts = list[tuple[str, dict[str, Any]]]


def checked(drafts: Drafts) -> Drafts:
    """`drafts`, after asserting each payload is schema-valid and DAG-CBOR encodable."""
    for kind, payload in drafts:
        check_payload(kind, payload)
        encode(payload)
    return drafts


def messages(drafts: Drafts) -> list[Message]:
    """The neutral messages the drafts make once written to a replica and read back."""
    records = Replica.in_memory().write_many("c", [Draft(k, p) for k, p in checked(drafts)])
    turns = [turn_of(r) for r in records]
    return [message_of(t) for t in turns if t is not None]


def user(text: str) -> tuple[str, dict[str, Any]]:
    return ("user_message", {"role": "user", "content": text})


def tool(call_id: str, text: str, *, is_error: bool = False) -> tuple[str, dict[str, Any]]:
    payload: dict[str, Any] = {"role": "tool", "tool_use_id": call_id, "content": text}
    if is_error:
        payload["is_error"] = True
    return ("tool_result", payload)


def assistant(recorded: Drafts) -> Message:
    """The one assistant message a response's drafts make."""
    (m,) = messages(recorded)
    assert m.role is Role.ASSISTANT
    return m


_SHARED = Path(__file__).resolve().parents[1] / "sdk.py"


def _local_adapter(provider: str) -> Callable[[Any], Any]:
    if provider == "anthropic":
        from anthropic.types import MessageParam

        return TypeAdapter(MessageParam).validate_python
    if provider == "openai":
        from openai.types.chat import ChatCompletionMessageParam

        return TypeAdapter(ChatCompletionMessageParam).validate_python
    if provider == "openai-responses":
        from openai.types.responses import ResponseInputItemParam

        return TypeAdapter(ResponseInputItemParam).validate_python
    from google.genai.types import Content

    return Content.model_validate


def _local_sdk_errors(provider: str, wire: Sequence[dict[str, Any]]) -> list[str]:
    validate = _local_adapter(provider)
    errors = []
    for i, entry in enumerate(wire):
        try:
            validate(entry)
        except ValidationError as exc:
            errors.append(f"entry {i}: {str(exc)[:500]}")
    return errors


@cache
def _validator() -> Callable[[str, Sequence[dict[str, Any]]], list[str]]:
    if not _SHARED.exists():
        return _local_sdk_errors
    spec = importlib.util.spec_from_file_location("projections_sdk", _SHARED)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shared: Callable[[str, Sequence[dict[str, Any]]], list[str]] = module.sdk_errors
    return shared


def sdk_errors(provider: str, wire: Sequence[dict[str, Any]]) -> list[str]:
    """The SDK's complaints about a request list for `provider`, [] when it accepts it.

    Uses the strict shared `tests/projections/sdk.py` when present (loaded by path, as this
    folder's tests may run alone), else a plain TypeAdapter validation of each entry."""
    return _validator()(provider, wire)

