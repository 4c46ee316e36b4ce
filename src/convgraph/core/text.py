"""Text a record may hold: a Python `str` that encodes to UTF-8.

DAG-CBOR text is UTF-8, and so is every store's text column, but a Python `str` can hold
a lone surrogate (U+D800 to U+DFFF): `sys.argv` and `os.fsdecode` turn each byte of an
argument that is not UTF-8 into one. No record or query can carry such a string, so it is
refused where text enters, naming the field, before any store sees it. Pure. Invariant:
`utf8` returns bytes for exactly the strings that encode, and `check_value_text` finds
such a string anywhere in a DAG-CBOR value, map keys included.
"""

from __future__ import annotations

from typing import Any

from convgraph.errors import InvalidTextError


def utf8(value: str, field: str, *, cid: object = None) -> bytes:
    """`value` as UTF-8; raises `InvalidTextError` naming `field` if it holds a lone surrogate."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidTextError(field=field, position=exc.start, code_point=ord(value[exc.start]),
                               cid=cid) from None


def check_text(value: str, field: str) -> str:
    """Return `value` unchanged if it encodes to UTF-8, else raise `InvalidTextError`."""
    utf8(value, field)
    return value


def check_value_text(value: Any, field: str) -> None:
    """Raise `InvalidTextError` for the first string inside `value` (depth first, map keys
    before their values) that does not encode, named by its path, e.g. `payload.content`."""
    if isinstance(value, str):
        utf8(value, field)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                utf8(key, f"a key of {field}")
            check_value_text(item, f"{field}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_value_text(item, f"{field}[{i}]")
