"""The providers' official SDK request types, used strictly: `sdk_errors(provider, wire)`.

The SDKs declare requests as TypedDicts (Anthropic, OpenAI) or pydantic models (google-genai).
Validated as they are, TypedDicts drop unknown keys silently (`TypeAdapter(T, config=...)` is
refused for a TypedDict, and a config on an enclosing list or union reaches only the top level)
and `Iterable[...]` fields become lazy `ValidatorIterator`s that check nothing until consumed.
So the core schema pydantic builds for each request type is rewritten once, recursively: every
typed dict and model forbids extra keys, and every lazy `generator` schema becomes an eager
`list` schema, so each block inside an iterable is validated (and its own iterables too).
google-genai models already forbid extras; the rewrite changes nothing there but is harmless.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from anthropic.types import MessageParam
from google.genai.types import Content, GenerateContentConfig
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter, ValidationError
from pydantic_core import SchemaValidator

_REQUEST_TYPES: dict[str, Any] = {
    "anthropic": list[MessageParam],  # Messages API `messages=`
    "openai": list[ChatCompletionMessageParam],  # Chat Completions `messages=`
    "openai-responses": ResponseInputParam,  # Responses `input=`
    "gemini": list[Content],  # generate_content `contents=`
}


def _strict(node: Any) -> None:
    """Forbid extra keys in every typed dict / model, and validate every iterable eagerly."""
    if isinstance(node, dict):
        kind = node.get("type")
        if kind in ("typed-dict", "model-fields", "dataclass-args"):
            node["extra_behavior"] = "forbid"
        elif kind == "model":
            node["config"] = {**node.get("config", {}), "extra_fields_behavior": "forbid"}
        elif kind == "generator":  # `Iterable[X]`: a lazy ValidatorIterator otherwise
            node["type"] = "list"
        for value in node.values():
            _strict(value)
    elif isinstance(node, list):
        for value in node:
            _strict(value)


@cache
def strict_validator(provider: str) -> SchemaValidator:
    """A validator for `provider`'s request history type that forbids extras and consumes iterables."""
    schema = copy.deepcopy(TypeAdapter(_REQUEST_TYPES[provider]).core_schema)
    _strict(schema)
    return SchemaValidator(schema)


def sdk_errors(provider: str, wire: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why the official SDK types refuse `wire` (empty when they accept it), one line per error."""
    try:
        strict_validator(provider).validate_python(list(wire))
    except ValidationError as err:
        return _describe(err)
    return []


def _describe(err: ValidationError) -> list[str]:
    """The errors of the union branches that could have matched, as `path: message [type]`.

    Pydantic reports every branch of a union; a branch whose `type` or `role` literal did not
    match is the wrong branch, so its errors are left out (unless every branch was wrong).
    """
    errors = err.errors(include_url=False)
    tags = (("type",), ("role",))
    wrong = [e["loc"][:-1] for e in errors if e["type"] == "literal_error" and e["loc"][-1:] in tags]
    kept = [e for e in errors if not any(e["loc"][: len(w)] == w for w in wrong)] or errors
    return [f"{_path(e['loc'])}: {e['msg']} [{e['type']}]" for e in kept]


def _path(loc: tuple[int | str, ...]) -> str:
    # drop pydantic's synthetic schema tags such as `list[union[...]]`, keep branch names
    return ".".join(str(part) for part in loc if not (isinstance(part, str) and "[" in part))


# ---------------------------------------------------------------- whole requests (system placement included)

_CALL_TYPES: dict[str, Any] = {
    "anthropic": "anthropic.types.message_create_params:MessageCreateParamsNonStreaming",
    "openai": "openai.types.chat.completion_create_params:CompletionCreateParamsNonStreaming",
    "openai-responses": "openai.types.responses.response_create_params:ResponseCreateParamsNonStreaming",
}
_NEEDED: dict[str, dict[str, Any]] = {  # what a call needs beside the history, if the request lacks it
    "anthropic": {"model": "claude-x", "max_tokens": 1024},
    "openai": {"model": "gpt-x"},
    "openai-responses": {"model": "gpt-x"},
}


@cache
def _call_validator(provider: str) -> SchemaValidator:
    module, name = _CALL_TYPES[provider].split(":")
    schema = copy.deepcopy(TypeAdapter(getattr(importlib.import_module(module), name)).core_schema)
    _strict(schema)
    return SchemaValidator(schema)


def request_errors(provider: str, request: Mapping[str, Any]) -> list[str]:
    """Why the SDK's own call-parameter type refuses `request` (`Replica.request` kwargs, or the
    JSON body an SDK sent), every key checked strictly; Gemini's kwargs are `contents` checked
    as `Content`s and `config` as `GenerateContentConfig`."""
    if provider == "gemini":
        out = sdk_errors(provider, request.get("contents", []))
        extra = sorted(set(request) - {"contents", "config", "model"})
        out += [f"{k}: not a generate_content argument" for k in extra]
        try:
            GenerateContentConfig.model_validate(request.get("config", {}))
        except ValidationError as err:
            out += _describe(err)
        return out
    try:
        _call_validator(provider).validate_python({**_NEEDED[provider], **request})
    except ValidationError as err:
        return _describe(err)
    return []
