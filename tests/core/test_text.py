"""Text a record may hold: a lone surrogate is refused with the field named, nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import sign_record
from convgraph.core.text import check_text, check_value_text, utf8
from convgraph.errors import InvalidTextError, SchemaError

KEY = SigningKey(bytes(range(32)))


def test_a_lone_surrogate_is_named_with_its_field_and_place() -> None:
    with pytest.raises(InvalidTextError) as info:
        check_text("ab\udcff", "conv")
    err = info.value
    assert (err.field, err.position, err.code_point, err.rule) == ("conv", 2, 0xDCFF, "text")
    assert isinstance(err, SchemaError)
    assert "conv is not valid Unicode text" in str(err) and "byte 0xff" in str(err)
    with pytest.raises(InvalidTextError, match=r"U\+D800 at index 0$"):
        utf8("\ud800", "branch")


@given(st.text())
def test_every_encodable_text_passes_unchanged(text: str) -> None:
    assert check_text(text, "t") is text and utf8(text, "t") == text.encode("utf-8")
    check_value_text({"k": [text, {text: text}]}, "payload")


@pytest.mark.parametrize(("value", "field"), [
    ({"content": "x\udcff"}, "payload.content"),
    ({"content": [{"type": "text", "text": "\udc80"}]}, "payload.content[0].text"),
    ({"meta": {"\udcffkey": 1}}, "a key of payload.meta"),
])
def test_the_path_to_the_bad_text_is_given(value: Any, field: str) -> None:
    with pytest.raises(InvalidTextError) as info:
        check_value_text(value, "payload")
    assert info.value.field == field


@pytest.mark.parametrize(("over", "field"), [
    ({"conv": "\udcff"}, "conv"),
    ({"branch": "b\udcff"}, "branch"),
    ({"payload": {"content": "hi \udcff"}}, "payload.content"),
    ({"kind": "tool_result", "payload": {"tool_use_id": "\udcff", "content": "ok"}}, "payload.tool_use_id"),
])
def test_sign_record_refuses_text_that_is_not_utf8(over: dict[str, Any], field: str) -> None:
    fields: dict[str, Any] = {"conv": "c", "seq": 1, "hlc": Hlc(1000, 0), "parents": [],
                              "kind": "user_message", "payload": {"content": "hi"}}
    with pytest.raises(InvalidTextError) as info:
        sign_record(KEY, **{**fields, **over})
    assert info.value.field == field


def test_a_refusal_names_the_record_it_was_found_in() -> None:
    # found by mutation testing (tests/MUTATION.md, issue 30 §4): `cid` was dropped unseen
    with pytest.raises(InvalidTextError) as info:
        utf8("\ud800", "branch", cid="bafyexample")
    assert info.value.cid == "bafyexample" and str(info.value).endswith("at index 0 (record bafyexample)")
