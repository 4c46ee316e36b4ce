"""The providers package: its public face, its docstring example, and pinned block-type tables."""

from __future__ import annotations

import doctest
import typing

import anthropic.types
import openai.types.responses

from convgraph.projections import providers
from convgraph.projections.message import OPAQUE_BLOCKS
from convgraph.projections.providers import _common


def _literals(union: object) -> set[str]:
    args = typing.get_args(union)
    if typing.get_origin(union) is typing.Annotated:
        args = typing.get_args(args[0])
    return {typing.get_args(m.model_fields["type"].annotation)[0] for m in args}


def test_exports_are_the_four_formats_sorted() -> None:
    assert providers.__all__ == sorted(providers.__all__) == ["anthropic", "gemini", "openai_chat", "openai_responses"]
    for name in providers.__all__:
        module = getattr(providers, name)
        assert callable(module.to_wire) and callable(module.record)
    assert {getattr(providers, n).PROVIDER for n in providers.__all__} == {
        "anthropic", "gemini", "openai", "openai-responses"}


def test_docstring_example_runs() -> None:
    assert doctest.testmod(providers).failed == 0


def test_responses_item_table_matches_the_sdk() -> None:
    # every output item type but the three the Responses module maps itself
    assert _literals(openai.types.responses.ResponseOutputItem) - {"message", "function_call", "reasoning"} == set(
        _common.RESPONSES_ITEMS)


def test_foreign_types_never_name_an_anthropic_block() -> None:
    anthropic_types = _literals(anthropic.types.ContentBlock)
    assert not (_common.FOREIGN & anthropic_types)
    assert not (_common.FOREIGN & {k for k, owner in OPAQUE_BLOCKS.items() if owner == "anthropic"})
