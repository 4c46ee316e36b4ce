"""Foreign text made safe for a terminal: no control character reaches it as itself.

Record content, conversation and branch names, tool names and ids, and error messages
that quote them or a server's words are written by other people's keys. Printed raw, an
ESC or C1 byte starts a control sequence (a window title, a cleared screen, hidden or
recoloured text), a bidi control reorders what the reader sees ("Trojan Source"), and a
line break in a one-line view forges the next line. Each such character is printed as a
visible escape instead (`\\x1b`, `\\u202e`, `\\n`). Pure: text in, text out. Invariant:
`line` returns no C0 control, DEL, C1 control, bidi control or line/paragraph separator;
`block` returns none of them but newline and tab; `json_text` returns JSON that parses to
the same value and holds none of them raw.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

_BIDI: Final = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_SEPARATORS: Final = "\u2028\u2029"
_UNSAFE_LINE: Final = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}{_SEPARATORS}]")
_UNSAFE_BLOCK: Final = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}{_SEPARATORS}]")
# json.dumps escapes C0 itself; with ensure_ascii off it leaves these raw
_UNSAFE_JSON: Final = re.compile(f"[\x7f-\x9f{_BIDI}{_SEPARATORS}]")
_NAMED: Final = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def line(text: str) -> str:
    """`text` for a one-line view: every control, bidi and line-breaking character escaped."""
    return _UNSAFE_LINE.sub(_visible, text)


def block(text: str) -> str:
    """`text` for a multi-line view: as `line`, but newlines and tabs are kept."""
    return _UNSAFE_BLOCK.sub(_visible, text)


def json_text(data: Any) -> str:
    """`data` as indented JSON with sorted keys; non-ASCII text stays readable, but DEL, C1,
    bidi controls and line separators are `\\uXXXX` escapes like the C0 controls."""
    raw = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)
    # outside strings JSON is ASCII, so every match is inside a string, where \\uXXXX is valid
    return _UNSAFE_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", raw)


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
