"""Strict DAG-CBOR: round trips, and every non-canonical form refused with a typed error.

The error class follows docs/format.md §2.7, checked against a lenient decoder written here
from that text alone: `NonCanonicalError` exactly when the bytes are a DAG-CBOR value in some
other encoding, `DecodeError` otherwise, whichever fault comes first in the bytes.
"""

from __future__ import annotations

import json
import math
import struct
import unicodedata
from pathlib import Path
from typing import Any

import cbrrr
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from convgraph.core.cid import CID
from convgraph.core.codec import decode, decode_trusted, encode, from_json, to_json
from convgraph.errors import DecodeError, NonCanonicalError, SchemaError

INVALID = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "invalid.json").read_text("utf-8"))

cids = st.binary(min_size=1, max_size=64).map(CID.of_record)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.binary(max_size=40)
    | cids
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


@given(values)
@example(1.0)
@example(-0.0)
@example(2**64 - 1)
@example(-(2**64))
@example({"a": 1, "bb": 2, "aa": 3, "c": 4})
def test_round_trip_is_identity_on_bytes(value: object) -> None:
    data = encode(value)
    assert encode(decode(data)) == data
    assert decode(data) == value


@pytest.mark.parametrize(
    ("name", "hex_bytes", "error"),
    [
        ("unsorted map keys", "a2616201616102", DecodeError),
        ("length-first order broken", "a262616101616202", DecodeError),
        ("duplicate keys", "a2616101616102", DecodeError),
        ("non-minimal int", "1801", DecodeError),
        ("half float", "f93c00", DecodeError),
        ("single float", "fa3f800000", DecodeError),
        ("NaN", "fb7ff8000000000000", DecodeError),
        ("Infinity", "fb7ff0000000000000", DecodeError),
        ("indefinite array", "9f01ff", DecodeError),
        ("indefinite text", "7f6161ff", DecodeError),
        ("foreign tag", "c11a514b67b0", DecodeError),
        ("undefined", "f7", DecodeError),
        ("simple value", "f0", DecodeError),
        ("trailing bytes", "0000", DecodeError),
        ("bad utf-8", "62ff00", DecodeError),
        ("integer map key", "a10101", DecodeError),
        ("truncated", "6261", DecodeError),
        ("empty", "", DecodeError),
        ("huge array claim", "9b7fffffffffffffff", DecodeError),
        ("short CID in tag 42", "d82a4400017112", DecodeError),
        ("CID without 0x00 prefix", "d82a5824" + "01711220" + "00" * 32, DecodeError),
        ("tag 42 on text", "d82a6161", DecodeError),
    ],
)
def test_non_canonical_or_malformed_is_refused(name: str, hex_bytes: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode(bytes.fromhex(hex_bytes))


def test_identity_encoded_cid_is_refused() -> None:
    # tag 42 around a CIDv1 identity-multihash link: valid CBOR, not a link we accept
    raw = bytes([0x00, 0x01, 0x71, 0x00, 0x03]) + b"abc"
    with pytest.raises(DecodeError):
        decode(bytes([0xD8, 0x2A, 0x40 + len(raw)]) + raw)


def test_nan_and_infinity_are_not_encodable() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(SchemaError):
            encode({"x": bad})


def test_unsupported_python_types_are_schema_errors() -> None:
    for bad in ((1, 2), {1: "int key"}, {1, 2}, 2**64, object()):
        with pytest.raises(SchemaError):
            encode(bad)


def test_deep_nesting_decodes_without_crashing() -> None:
    data = b"\x81" * 100_000 + b"\x00"
    value = decode(data)
    depth = 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert depth == 100_000


def test_bytes_that_look_like_a_cid_stay_bytes() -> None:
    lookalike = bytes(CID.of_record(b"x"))
    assert decode(encode(lookalike)) == lookalike
    assert encode(lookalike)[0] >> 5 == 2  # major type 2: a byte string, not tag 42


def test_non_canonical_error_is_distinct() -> None:
    # cbrrr refuses most forms itself; the re-encode comparison is the backstop
    assert issubclass(NonCanonicalError, DecodeError)


@given(values)
def test_dag_json_round_trip(value: object) -> None:
    assert from_json(to_json(value)) == value


# --- the error class, against a lenient decoder written from docs/format.md §2.7 ------------------


class NotAValue(Exception):
    """The bytes are no DAG-CBOR value in any encoding."""


def lenient_item(data: bytes, i: int) -> tuple[Any, int]:
    """One item at `i` read leniently (any head width, indefinite lengths, short floats, any key
    order; a map is a list of pairs so that repeats survive); returns it and where it ends."""
    if i >= len(data):
        raise NotAValue("truncated")
    major, info = data[i] >> 5, data[i] & 31
    i += 1
    if 28 <= info <= 30:
        raise NotAValue("reserved info")
    if info == 31:
        if major in (0, 1, 6, 7):
            raise NotAValue("info 31 on an integer or a tag, or a stray break")
        return lenient_indefinite(data, i, major)
    if major == 7:
        if info in (20, 21, 22):
            return {20: False, 21: True, 22: None}[info], i
        width = {25: 2, 26: 4, 27: 8}.get(info)
        if width is None or i + width > len(data):
            raise NotAValue("simple value or truncated float")
        (value,) = struct.unpack({2: ">e", 4: ">f", 8: ">d"}[width], data[i : i + width])
        if not math.isfinite(value):
            raise NotAValue("NaN or Infinity")
        return float(value), i + width
    n = info
    if info >= 24:
        width = 1 << (info - 24)
        if i + width > len(data):
            raise NotAValue("truncated head")
        n, i = int.from_bytes(data[i : i + width], "big"), i + width
    if major == 0:
        return n, i
    if major == 1:
        return -1 - n, i
    if major in (2, 3):
        if i + n > len(data):
            raise NotAValue("truncated string")
        return lenient_string(major, data[i : i + n]), i + n
    if major == 6:
        if n != 42:
            raise NotAValue("foreign tag")
        content, i = lenient_item(data, i)
        if type(content) is not bytes or content[:1] != b"\x00" or len(content) != 37 or content[1:5] not in (
            b"\x01\x71\x12\x20", b"\x01\x55\x12\x20"
        ):
            raise NotAValue("not a link")
        return CID(content[1:]), i
    items = []
    for _ in range(n * (2 if major == 5 else 1)):
        item, i = lenient_item(data, i)
        items.append(item)
    return lenient_container(major, items), i


def lenient_string(major: int, raw: bytes) -> Any:
    if major == 2:
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise NotAValue("bad UTF-8") from None


def lenient_indefinite(data: bytes, i: int, major: int) -> tuple[Any, int]:
    items = []
    while True:
        if i >= len(data):
            raise NotAValue("no break")
        if data[i] == 0xFF:
            break
        if major in (2, 3) and (data[i] >> 5 != major or data[i] & 31 == 31):
            raise NotAValue("a chunk that is not a definite string of the same type")
        item, i = lenient_item(data, i)
        items.append(item)
    if major in (2, 3):
        return (b"" if major == 2 else "").join(items), i + 1
    return lenient_container(major, items), i + 1


def lenient_container(major: int, items: list[Any]) -> Any:
    if major == 4:
        return items
    if len(items) % 2 or any(type(k) is not str for k in items[::2]):
        raise NotAValue("odd map or a key that is not text")
    return ("map", list(zip(items[::2], items[1::2], strict=True)))


def as_value(item: Any) -> Any:
    """The data-model value of a lenient item; None-able repeats make it non-canonical anyway."""
    if type(item) is tuple:
        return {k: as_value(v) for k, v in item[1]}
    if type(item) is list:
        return [as_value(v) for v in item]
    return item


def has_repeated_key(item: Any) -> bool:
    if type(item) is tuple:
        keys = [k for k, _ in item[1]]
        return len(keys) != len(set(keys)) or any(has_repeated_key(v) for _, v in item[1])
    return type(item) is list and any(has_repeated_key(v) for v in item)


def expected_class(data: bytes) -> type[Exception] | None:
    """What §2.7 says decode does with `data`: None (accept), NonCanonicalError or DecodeError."""
    try:
        item, end = lenient_item(data, 0)
    except NotAValue:
        return DecodeError
    if end != len(data):
        return DecodeError
    if has_repeated_key(item) or encode(as_value(item)) != data:
        return NonCanonicalError
    return None


def decode_class(data: bytes) -> type[Exception] | None:
    try:
        decode(data)
    except DecodeError as exc:
        return type(exc)
    return None


@pytest.mark.parametrize(
    "hex_bytes",
    ["1f", "3f", "df", "df5825", "5f6161ff", "5f5f4161ffff", "7f4161ff", "f97e00", "f97c00", "fa7fc00000",
     "fa7f800000", "f814", "ff", "81ff", "bf6161ff", "821801", "8218016a", "82180162ff00", "821801f97e00"],
)
def test_faults_outside_every_encoding_are_decode_errors(hex_bytes: str) -> None:
    data = bytes.fromhex(hex_bytes)
    assert expected_class(data) is DecodeError
    assert decode_class(data) is DecodeError


@pytest.mark.parametrize(
    "hex_bytes",
    ["1801", "f93c00", "fa3f800000", "9f01ff", "bf616101ff", "5f4161ff", "7f6161ff", "a2616201616102",
     "a2616101616102", "d9002a5825000171122000" + "00" * 31, "8218011901f4", "82f93c00fa3f800000"],
)
def test_other_encodings_of_values_are_non_canonical(hex_bytes: str) -> None:
    data = bytes.fromhex(hex_bytes)
    assert expected_class(data) is NonCanonicalError
    assert decode_class(data) is NonCanonicalError


@pytest.mark.parametrize("case", INVALID["cases"], ids=[c["name"] for c in INVALID["cases"]])
def test_reject_vector_error_class_follows_the_rule(case: dict[str, Any]) -> None:
    expected = expected_class(bytes.fromhex(case["hex"]))
    if expected is not None or case["error"] == "NonCanonicalError":
        assert expected is not None and expected.__name__ == case["error"]
    # else the bytes are canonical DAG-CBOR and another rule is broken (the map, the schema …)


_EDITS = st.sampled_from([b"\x1f", b"\x3f", b"\x5f", b"\x7f", b"\x9f", b"\xbf", b"\xdf", b"\xff", b"\xf9\x7e\x00",
                          b"\xf9\x3c\x00", b"\xfa\x7f\x80\x00\x00", b"\x18\x01", b"\x19\x00\x05", b"\xf8\x10",
                          b"\x63abc", b"\x43abc", b"\x62\xff\xfe", b"\xd9\x00\x2a", b"\x1c", b"\x00"])


@given(value=values, edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3), _EDITS | st.binary(
    min_size=1, max_size=3)), min_size=1, max_size=3))
@example(value=[1, "x"], edits=[(1, 1, b"\x18\x01"), (3, 1, b"\xff")])
def test_error_class_of_mutated_bytes_follows_the_rule(
    value: object, edits: list[tuple[int, int, bytes]]
) -> None:
    data = bytearray(encode(value))
    for where, removed, inserted in edits:
        at = where % (len(data) + 1)
        data[at : at + removed] = inserted
    assert decode_class(bytes(data)) is expected_class(bytes(data))
@pytest.mark.parametrize(("name", "data", "lenient_value"), [
    ("non-minimal int", bytes.fromhex("1801"), 1),
    ("unsorted map keys", bytes.fromhex("a2616201616102"), {"b": 1, "a": 2}),
    ("text a decoder normalised", encode("e\u0301"), unicodedata.normalize("NFC", "e\u0301")),
])
def test_bytes_that_are_not_the_encoding_of_what_they_decode_to_are_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, data: bytes, lenient_value: object
) -> None:
    # the re-encode-and-compare backstop: should the decoder underneath ever accept a second
    # encoding of a value (a looser release, a normalising decoder), decode still refuses it
    strict = cbrrr.decode_dag_cbor

    def lenient(raw: bytes, **kw: object) -> object:
        return lenient_value if raw == data else strict(raw, **kw)

    monkeypatch.setattr(cbrrr, "decode_dag_cbor", lenient)
    with pytest.raises(NonCanonicalError, match=r"^bytes decode but are not the canonical DAG-CBOR encoding$"):
        decode(data)
    assert decode(encode(lenient_value)) == lenient_value


@pytest.mark.parametrize("text", ["aGk!!", "aGk\n\n", "a Gk.", "aGk-_"])
def test_dag_json_bytes_outside_the_base64_alphabet_are_refused(text: str) -> None:
    # a lenient base64 reader would skip the stray characters: two JSON texts, one record
    with pytest.raises(SchemaError, match="bad base64"):
        from_json({"/": {"bytes": text}})
    assert from_json({"/": {"bytes": "aGk"}}) == b"hi"


@pytest.mark.parametrize("text", ["aGk=", "aA==", "aGl", "aB", "+/9"])
def test_dag_json_bytes_have_one_text_each(text: str) -> None:
    # padded, or with stray bits below the last byte: each would be a second text for one value
    with pytest.raises(SchemaError, match="not unpadded canonical"):
        from_json({"/": {"bytes": text}})


@pytest.mark.parametrize(("value", "text"), [
    (b"hi", "aGk"), (b"h", "aA"), (b"", ""), (b"\x00\x00\x17", "AAAX"), (b"\xfb\xff", "+/8"),
])
def test_dag_json_bytes_are_unpadded_standard_base64(value: bytes, text: str) -> None:
    assert to_json(value) == {"/": {"bytes": text}}
    assert from_json({"/": {"bytes": text}}) == value


@pytest.mark.parametrize("value", [
    {"/": {"x": 1}}, {"/": {"bytes": "aGk", "more": 1}}, {"/": {"bytes": 5}}, {"/": ["bytes"]}, {"/": 5},
])
def test_a_map_that_only_looks_like_a_dag_json_link_or_bytes_stays_a_map(value: object) -> None:
    assert from_json(value) == value


def test_the_errors_of_the_codec_say_what_failed() -> None:
    long_bad = "!" * 100
    with pytest.raises(SchemaError) as info:
        from_json({"/": {"bytes": long_bad}})
    assert info.value.message == f"bad base64 in DAG-JSON bytes: {long_bad[:40]!r}"
    padded = "QUFB" * 25 + "aGk="  # valid base64 of 77 bytes, padded: a second text for them
    with pytest.raises(SchemaError) as info:
        from_json({"/": {"bytes": padded}})
    assert info.value.message == f"bad base64 in DAG-JSON bytes: {padded[:40]!r} is not unpadded canonical"
    with pytest.raises(SchemaError, match=r"^value is not representable in DAG-CBOR: "):
        encode({1, 2})
    with pytest.raises(DecodeError, match=r"^not DAG-CBOR: "):
        decode_trusted(b"\xff")


def test_a_cid_encodes_as_a_link_and_its_binary_form_as_a_byte_string() -> None:
    # a CID is a bytes subclass: the encoder must still tell it from the plain bytes it equals
    cid = CID.of_record(b"x")
    link, data = encode({"a": cid}), encode({"a": bytes(cid)})
    assert link == b"\xa1\x61a\xd8\x2a\x58\x25\x00" + bytes(cid)
    assert data == b"\xa1\x61a\x58\x24" + bytes(cid)
    assert type(decode(link)["a"]) is CID and type(decode(data)["a"]) is bytes
    assert to_json(decode(link)) != to_json(decode(data))
