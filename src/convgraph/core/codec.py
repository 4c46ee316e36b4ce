"""Strict DAG-CBOR: one value, one byte string, both ways.

Encoding is cbrrr's (deterministic DAG-CBOR: shortest integers, 64-bit floats only, map
keys sorted length-first then bytewise, CIDs as tag 42). Decoding accepts only what
encoding would produce: cbrrr already refuses indefinite lengths, foreign tags, NaN/Inf,
short floats and unsorted or duplicate keys, and we re-encode and compare besides, so no
second encoding of one value can ever reach the store. Invariant: for every `b` that
`decode` accepts, `encode(decode(b)) == b`; a refused `b` raises `NonCanonicalError` exactly
when it is a DAG-CBOR value in some other encoding (`lenient.invalidity(b) is None`), else
`DecodeError`, whichever fault comes first in the bytes (docs/format.md §2.7).
"""

from __future__ import annotations

import base64
from typing import Any

import cbrrr

from convgraph.core import lenient
from convgraph.core.cid import CID
from convgraph.errors import DecodeError, NonCanonicalError, SchemaError

# A value of the DAG-CBOR data model as Python holds it.
Value = Any

# cbrrr stops at the first fault it meets. These messages name a fault of form (unsorted or
# duplicate map keys, over-long heads, 16/32-bit floats, info 31), which the input may have
# without being anything but a DAG-CBOR value in another encoding; every other message names
# a fault that no encoding of a DAG-CBOR value has. Info 31 is a form fault on strings, arrays
# and maps only, and a short float only when finite: the lenient reading settles those too.
_FORM_FAULTS = ("non-canonical", "not minimally encoded", "float mtype (25)", "float mtype (26)",
                "extra info (31)")


def encode(value: Value) -> bytes:
    """Canonical DAG-CBOR bytes of `value` (dict/list/str/bytes/int/float/bool/None/CID)."""
    try:
        return bytes(cbrrr.encode_dag_cbor(value, cid_type=CID))
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise SchemaError(f"value is not representable in DAG-CBOR: {exc}") from exc


def decode(data: bytes) -> Value:
    """Decode canonical DAG-CBOR, refusing any byte string that is not the canonical one."""
    try:
        value = cbrrr.decode_dag_cbor(data, cid_ctor=CID)  # CID() refuses any other form
    except DecodeError:
        raise
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        # cbrrr raises CbrrrDecodeError (a ValueError), ValueError for trailing bytes,
        # UnicodeDecodeError for bad UTF-8. Input that is a DAG-CBOR value in some encoding
        # gets the narrower error, so reports can tell "other bytes" from "not DAG-CBOR";
        # a fault of the second kind anywhere in the input wins over one of the first.
        if any(sign in str(exc) for sign in _FORM_FAULTS):
            invalid = lenient.invalidity(data)
            if invalid is None:
                raise NonCanonicalError(f"not canonical DAG-CBOR: {exc}") from exc
            raise DecodeError(f"not DAG-CBOR: {invalid}") from exc
        raise DecodeError(f"not DAG-CBOR: {exc}") from exc
    if encode(value) != data:
        raise NonCanonicalError("bytes decode but are not the canonical DAG-CBOR encoding")
    return value


def decode_trusted(data: bytes) -> Value:
    """Decode bytes this process verified or produced itself, skipping the canonical check."""
    try:
        return cbrrr.decode_dag_cbor(data, cid_ctor=CID._trusted)
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        raise DecodeError(f"not DAG-CBOR: {exc}") from exc


def to_json(value: Value) -> Any:
    """The DAG-JSON form of a value: CIDs as `{"/": text}`, bytes as `{"/": {"bytes": b64}}`."""
    if isinstance(value, CID):
        return {"/": str(value)}
    if isinstance(value, bytes):
        return {"/": {"bytes": base64.b64encode(value).decode("ascii").rstrip("=")}}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return value


def from_json(value: Any) -> Value:
    """Inverse of `to_json`: read a DAG-JSON value (as parsed by `json.loads`)."""
    if isinstance(value, dict):
        if set(value) == {"/"}:
            inner = value["/"]
            if isinstance(inner, str):
                return CID.parse(inner)
            if isinstance(inner, dict) and set(inner) == {"bytes"} and isinstance(inner["bytes"], str):
                text = inner["bytes"]
                try:
                    data = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
                except ValueError as exc:
                    raise SchemaError(f"bad base64 in DAG-JSON bytes: {text[:40]!r}") from exc
                # one text per value: padding ("aGk=") or stray low bits ("aGl") would make two
                # JSON texts read as one record
                if base64.b64encode(data).decode("ascii").rstrip("=") != text:
                    raise SchemaError(f"bad base64 in DAG-JSON bytes: {text[:40]!r} is not unpadded "
                                      "canonical")
                return data
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value
