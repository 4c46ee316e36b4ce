"""safe_text: every control, bidi and separator character comes out as a visible escape."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from convgraph.core import safe_text

# what a terminal acts on, written out here rather than taken from the module under test
C0 = [chr(c) for c in range(0x20)]
C1 = [chr(c) for c in range(0x80, 0xA0)]
BIDI = ["\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]
UNSAFE = {*C0, "\x7f", *C1, *BIDI, "\u2028", "\u2029"}


def unsafe_in(text: str, *, keep: str = "") -> list[str]:
    return sorted({c for c in text if c in UNSAFE and c not in keep})


@pytest.mark.parametrize("char", sorted(UNSAFE), ids=lambda c: f"U+{ord(c):04X}")
def test_each_character_is_escaped_visibly(char: str) -> None:
    shown = safe_text.line(f"a{char}b")
    assert unsafe_in(shown) == [] and shown.startswith("a\\") and shown.endswith("b")
    if char not in "\n\t":
        assert safe_text.block(f"a{char}b") == shown


def test_the_escapes_read_like_python_ones() -> None:
    assert safe_text.line("\x1b]0;PWNED\x07\x1b[2J") == "\\x1b]0;PWNED\\x07\\x1b[2J"
    assert safe_text.line("x\ny\tz\r") == "x\\ny\\tz\\r"
    assert safe_text.line("\x9b31m\u202eevil\u2028") == "\\x9b31m\\u202eevil\\u2028"


def test_block_keeps_newlines_and_tabs_only() -> None:
    assert safe_text.block("one\n\ttwo\r\x1b[2K") == "one\n\ttwo\\r\\x1b[2K"


def test_ordinary_text_passes_unchanged() -> None:
    text = "café → 東京 [bold]not markup[/bold] :smile: \\x1b"
    assert safe_text.line(text) == safe_text.block(text) == text


@given(st.text())
@example("\x00\x1b\x7f\x85\x9f\u202e\u2066\u2029\n\t")
def test_no_unsafe_character_survives(text: str) -> None:
    assert unsafe_in(safe_text.line(text)) == []
    assert unsafe_in(safe_text.block(text), keep="\n\t") == []


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))
@example({"content": "\x1b]0;PWNED\x07\x9b2J\u202e\u2028\x7f", "\x85key": ["\u2066"]})
def test_json_text_parses_to_the_same_value_with_nothing_unsafe(data: object) -> None:
    text = safe_text.json_text(data)
    assert json.loads(text) == data
    assert unsafe_in(text, keep="\n") == []


def test_json_text_keeps_readable_non_ascii() -> None:
    assert safe_text.json_text({"b": "東京", "a": "\u202e"}) == '{\n  "a": "\\u202e",\n  "b": "東京"\n}'
