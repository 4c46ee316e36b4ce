"""Strict DAG-CBOR: round trips, and every non-canonical form refused with a typed error."""

from __future__ import annotations

import math
import unicodedata

import cbrrr
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from convgraph.core.cid import CID
from convgraph.core.codec import decode, decode_trusted, encode, from_json, to_json
from convgraph.errors import DecodeError, NonCanonicalError, SchemaError

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
    with pytest.raises(SchemaError, match=r"^value is not representable in DAG-CBOR: "):
        encode({1, 2})
    with pytest.raises(DecodeError, match=r"^not DAG-CBOR: "):
        decode_trusted(b"\xff")
