"""CIDs: the two accepted forms, text round trips, ordering, and refusal of everything else."""

from __future__ import annotations

import hashlib
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convgraph.core.cid import CID, DAG_CBOR, RAW
from convgraph.errors import DecodeError


@given(st.binary(max_size=100))
def test_text_round_trip(data: bytes) -> None:
    for cid in (CID.of_record(data), CID.of_raw(data)):
        assert CID.parse(str(cid)) == cid
        assert CID(bytes(cid)) == cid
        assert len(str(cid)) == 59


def test_known_cid_of_empty_map() -> None:
    # the dag-cbor CID of `{}` (0xa0), as every IPLD implementation computes it
    assert str(CID.of_record(b"\xa0")) == "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua"


def test_fields() -> None:
    cid = CID.of_record(b"abc")
    assert cid.codec == DAG_CBOR
    assert cid.digest == hashlib.sha256(b"abc").digest()
    assert CID.of_raw(b"abc").codec == RAW
    assert str(cid).startswith("bafyrei")
    assert str(CID.of_raw(b"abc")).startswith("bafkrei")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x01\x71\x12\x20" + b"\x00" * 31,  # short digest
        b"\x01\x71\x12\x20" + b"\x00" * 33,  # long digest
        b"\x01\x70\x12\x20" + b"\x00" * 32,  # dag-pb codec
        b"\x01\x71\x13\x40" + b"\x00" * 32,  # sha2-512 code
        b"\x12\x20" + b"\x00" * 34,  # CIDv0 shape
        b"\x00\x71\x12\x20" + b"\x00" * 32,
    ],
)
def test_other_forms_are_refused(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        CID(raw)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua",
        "BAFYREIGBTJ4X7IP5LEGNFZNUFUOPL4SG4KNZC2COF6DUAS4B3Q2FY6SWUA",
        "zafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua",
        "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swu1",
        "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swub",  # non-zero pad bits
        "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
    ],
)
def test_bad_text_is_refused(text: str) -> None:
    with pytest.raises(DecodeError):
        CID.parse(text)


def test_order_hash_immutability_pickle() -> None:
    a, b = sorted([CID.of_record(b"1"), CID.of_record(b"2")])
    assert a < b <= b and b > a >= a
    assert bytes(a) < bytes(b)
    assert len({a, CID(bytes(a))}) == 1
    with pytest.raises(AttributeError):
        a._raw = b""  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(a)) == a


GOOD = "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua"


def _not_base32(text: str) -> str:
    return f"not a base32 CIDv1 text: {text[:80]!r}"


@pytest.mark.parametrize(("text", "why"), [
    ("z" + GOOD[1:], _not_base32("z" + GOOD[1:])),
    (GOOD + "a", _not_base32(GOOD + "a")),
    (GOOD.upper(), _not_base32(GOOD.upper())),
    ("b" + "1" * 58, _not_base32("b" + "1" * 58)),  # not base32: the decoder's error, our words
    ("b" + "x" * 100, _not_base32("b" + "x" * 100)),  # shown cut short
    ("b" + "a" * 58, f"not a CIDv1 dag-cbor/raw sha2-256 link: {bytes(8)!r}…"),
    (GOOD[:-1] + "b", f"non-canonical CID text: {GOOD[:-1] + 'b'!r}"),
])
def test_bad_text_is_refused_saying_why(text: str, why: str) -> None:
    with pytest.raises(DecodeError) as info:
        CID.parse(text)
    assert info.value.message == why


def test_the_error_for_a_bad_binary_form_shows_its_first_eight_bytes() -> None:
    with pytest.raises(DecodeError) as info:
        CID(bytes(range(40)))
    assert info.value.message == f"not a CIDv1 dag-cbor/raw sha2-256 link: {bytes(range(8))!r}…"


def test_order_is_strict_and_hash_follows_the_bytes() -> None:
    a, b = sorted([CID.of_record(b"1"), CID.of_record(b"2")])
    assert not a < a and not a > a and not b < a and not a > b
    assert hash(a) == hash(CID(bytes(a))) != hash(b)


def test_a_cid_is_a_bytes_subclass_holding_its_binary_form() -> None:
    cid = CID.of_record(b"x")
    raw = bytes(cid)
    assert type(raw) is bytes and raw == cid and hash(raw) == hash(cid)
    for like in (bytearray(raw), memoryview(raw)):  # any bytes-like value, checked the same way
        assert CID(like) == cid and type(CID(like)) is CID
    with pytest.raises(DecodeError):
        CID(bytearray(b"\x00" * 36))
    assert type(cid.digest) is bytes
    assert type(pickle.loads(pickle.dumps(cid))) is CID
    assert repr(cid) == f"CID({cid})" and f"{cid}" == str(cid)
