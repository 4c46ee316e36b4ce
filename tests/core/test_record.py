"""Records: signing, intrinsic validation on decode, and the typed error for each rule."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import Limits, decode_record, sign_record, signing_bytes
from convgraph.errors import (
    CidMismatchError,
    DecodeError,
    SchemaError,
    SignatureError,
    SizeLimitError,
    UnknownKindError,
)

KEY = SigningKey(bytes(range(32)))
P1, P2 = CID.of_record(b"p1"), CID.of_record(b"p2")


def make(**over: Any) -> Any:
    fields: dict[str, Any] = {
        "conv": "c", "seq": 1, "hlc": Hlc(1000, 0), "parents": [], "kind": "user_message",
        "payload": {"content": "hi"},
    }
    fields.update(over)
    return sign_record(KEY, **fields)


def resign(m: dict[str, Any]) -> bytes:
    """Re-sign a hand-edited map, so only the edit (not the signature) is wrong."""
    m = dict(m)
    m.pop("sig", None)
    return codec.encode({**m, "sig": KEY.sign(signing_bytes(m))})


def test_sign_then_decode_round_trip() -> None:
    rec = make(parents=[P2, P1], refs=[P1], branch="b1")
    assert rec.parents == tuple(sorted([P1, P2]))
    back = decode_record(rec.data)
    assert back == rec and back.cid == CID.of_record(rec.data)
    assert back.to_map() == codec.decode(rec.data)
    assert back.branch == "b1" and back.meta.seq == 1


def test_identical_content_distinct_authorings_have_distinct_cids() -> None:
    a = make()
    b = make(seq=2, hlc=Hlc(1000, 1), parents=[a.cid])
    assert a.cid != b.cid and a.payload == b.payload


def test_claimed_cid_must_match() -> None:
    rec = make()
    with pytest.raises(CidMismatchError) as info:
        decode_record(rec.data, expected_cid=P1)
    assert info.value.expected == str(P1) and info.value.got == str(rec.cid)


def test_any_flipped_bit_is_refused() -> None:
    rec = make()
    for i in range(len(rec.data)):
        for bit in (0, 7):
            data = bytearray(rec.data)
            data[i] ^= 1 << bit
            with pytest.raises((DecodeError, SchemaError, SignatureError)):
                decode_record(bytes(data))


def test_signature_from_another_key_is_refused() -> None:
    m = codec.decode(make().data)
    m["actor"] = SigningKey.generate().public
    with pytest.raises(SignatureError):
        decode_record(codec.encode(m))


def test_size_limit() -> None:
    big = make(payload={"content": "x" * 2000})
    with pytest.raises(SizeLimitError):
        decode_record(big.data, limits=Limits(max_record_bytes=1000))
    with pytest.raises(SizeLimitError):
        make(payload={"content": "x" * 2000}, limits=Limits(max_record_bytes=1000))


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (lambda m: m.pop("conv"), SchemaError),
        (lambda m: m.update(extra=1), SchemaError),
        (lambda m: m.update(conv=""), SchemaError),
        (lambda m: m.update(conv="x" * 257), SchemaError),
        (lambda m: m.update(conv=5), SchemaError),
        (lambda m: m.update(branch=""), SchemaError),
        (lambda m: m.update(seq=0), SchemaError),
        (lambda m: m.update(seq=-1), SchemaError),
        (lambda m: m.update(seq=2**53), SchemaError),
        (lambda m: m.update(seq=1.0), SchemaError),
        (lambda m: m.update(hlc=[1]), SchemaError),
        (lambda m: m.update(hlc=[1, -1]), SchemaError),
        (lambda m: m.update(hlc=[2**53, 0]), SchemaError),
        (lambda m: m.update(hlc=[1, 2**32]), SchemaError),
        (lambda m: m.update(actor=b"short"), SchemaError),
        (lambda m: m.update(parents=[P2, P1] if P1 < P2 else [P1, P2]), SchemaError),
        (lambda m: m.update(parents=[P1, P1]), SchemaError),
        (lambda m: m.update(parents=[CID.of_raw(b"x")]), SchemaError),
        (lambda m: m.update(parents=[bytes(P1)]), SchemaError),
        (lambda m: m.update(refs="x"), SchemaError),
        (lambda m: m.update(kind="telepathy"), UnknownKindError),
        (lambda m: m.update(kind=7), SchemaError),
        (lambda m: m.update(payload=[]), SchemaError),
        (lambda m: m.update(payload={"content": 5}), SchemaError),
        (lambda m: m.update(sig=b"\x00" * 63), SchemaError),
    ],
)
def test_structural_rules(edit: Any, error: type[Exception]) -> None:
    m = codec.decode(make().data)
    m.pop("sig")
    edit(m)
    try:
        data = resign(m)
    except SchemaError:
        return  # not even encodable: the writer side refuses it too
    if "sig" in m:  # the edit replaced the signature itself
        data = codec.encode(m)
    with pytest.raises(error):
        decode_record(data)


def test_too_many_parents() -> None:
    many = sorted(CID.of_record(i.to_bytes(4, "big")) for i in range(5))
    with pytest.raises(SizeLimitError):
        make(parents=many, limits=Limits(max_parents=4))


def test_errors_name_the_record() -> None:
    m = codec.decode(make().data)
    m["payload"] = {"content": "hi", "bogus": 1}
    data = resign(m)
    with pytest.raises(SchemaError) as info:
        decode_record(data)
    assert info.value.cid == str(CID.of_record(data))
    assert info.value.rule == "schema"


@pytest.mark.parametrize(
    ("over", "error"),
    [
        ({"conv": ""}, SchemaError),
        ({"conv": "x" * 257}, SchemaError),
        ({"conv": 5}, SchemaError),
        ({"conv": "\ud800"}, SchemaError),
        ({"branch": ""}, SchemaError),
        ({"seq": 0}, SchemaError),
        ({"seq": 2**53}, SchemaError),
        ({"seq": True}, SchemaError),
        ({"hlc": (1,)}, SchemaError),
        ({"hlc": (1, -1)}, SchemaError),
        ({"hlc": (2**53, 0)}, SchemaError),
        ({"hlc": (1, 2**32)}, SchemaError),
        ({"hlc": (1.0, 0)}, SchemaError),
        ({"parents": [CID.of_raw(b"x")]}, SchemaError),
        ({"parents": [bytes(P1)]}, SchemaError),
        ({"refs": ["x"]}, SchemaError),
        ({"kind": "telepathy"}, UnknownKindError),
        ({"kind": ["user_message"]}, SchemaError),
        ({"payload": {"content": 5}}, SchemaError),
        ({"payload": {"content": {1, 2}}}, SchemaError),
    ],
)
def test_the_writer_refuses_what_ingest_would(over: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        make(**over)


def test_writer_dedups_and_sorts_links_and_bounds_them_after_dedup() -> None:
    rec = make(parents=[P2, P1, P2], refs=[P1, P1])
    assert rec.parents == tuple(sorted([P1, P2])) and rec.refs == (P1,)
    assert make(parents=[P1] * 5, limits=Limits(max_parents=1)).parents == (P1,)


def test_a_record_shares_nothing_with_the_writer_and_is_immutable() -> None:
    payload: dict[str, Any] = {"content": [{"type": "text", "text": "hi"}]}
    rec = make(payload=payload)
    payload["content"][0]["text"] = "changed"
    assert rec.payload == {"content": [{"type": "text", "text": "hi"}]}
    assert codec.encode(rec.to_map()) == rec.data
    with pytest.raises(AttributeError):
        rec.seq = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del rec.conv  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(rec)) == rec
    assert str(rec.cid) in repr(rec) and "user_message" in repr(rec)
