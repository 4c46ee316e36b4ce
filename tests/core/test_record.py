"""Records: signing, intrinsic validation on decode, and the typed error for each rule."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import (
    Limits,
    _signed_part,
    decode_record,
    load_trusted,
    sign_record,
    signing_bytes,
)
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
    data = codec.encode(m)
    with pytest.raises(SignatureError) as info:
        decode_record(data)
    assert info.value.message == "signature does not verify under the record's actor"
    assert info.value.cid == str(CID.of_record(data))


def test_size_limit() -> None:
    big = make(payload={"content": "x" * 2000})
    with pytest.raises(SizeLimitError):
        decode_record(big.data, limits=Limits(max_record_bytes=1000))
    with pytest.raises(SizeLimitError):
        make(payload={"content": "x" * 2000}, limits=Limits(max_record_bytes=1000))


SEQ_RANGE = "seq must be an integer in [1, 9007199254740991]"
HLC_RANGE = "hlc must be [wall_ms, counter] of bounded non-negative integers"
UNSORTED = "must be sorted by binary CID without duplicates"
WRONG_CONTENT = "user_message payload field 'content' has the wrong type"


@pytest.mark.parametrize(
    ("edit", "error", "why"),
    [
        (lambda m: m.pop("conv"), SchemaError, "record fields wrong: missing ['conv'], unknown []"),
        (lambda m: m.update(extra=1), SchemaError, "record fields wrong: missing [], unknown ['extra']"),
        (lambda m: m.update({"k" * 40: 1}), SchemaError, f"record fields wrong: missing [], unknown ['{'k' * 32}']"),
        (lambda m: m.update(conv=""), SchemaError, "conv must be non-empty text"),
        (lambda m: m.update(conv="x" * 257), SchemaError, "conv longer than 256 bytes"),
        (lambda m: m.update(conv=5), SchemaError, "conv must be non-empty text"),
        (lambda m: m.update(branch=""), SchemaError, "branch must be non-empty text"),
        (lambda m: m.update(branch="é" * 129), SchemaError, "branch longer than 256 bytes"),
        (lambda m: m.update(seq=0), SchemaError, SEQ_RANGE),
        (lambda m: m.update(seq=-1), SchemaError, SEQ_RANGE),
        (lambda m: m.update(seq=2**53), SchemaError, SEQ_RANGE),
        (lambda m: m.update(seq=1.0), SchemaError, SEQ_RANGE),
        (lambda m: m.update(hlc=[1]), SchemaError, HLC_RANGE),
        (lambda m: m.update(hlc=[1, -1]), SchemaError, HLC_RANGE),
        (lambda m: m.update(hlc=[2**53, 0]), SchemaError, HLC_RANGE),
        (lambda m: m.update(hlc=[1, 2**32]), SchemaError, HLC_RANGE),
        (lambda m: m.update(hlc=[1.5, 0]), SchemaError, HLC_RANGE),
        (lambda m: m.update(hlc=[1, 0.5]), SchemaError, HLC_RANGE),
        (lambda m: m.update(actor=b"short"), SchemaError, "actor must be a 32-byte Ed25519 public key"),
        (lambda m: m.update(parents=[P2, P1] if P1 < P2 else [P1, P2]), SchemaError, "parents " + UNSORTED),
        (lambda m: m.update(parents=[P1, P1]), SchemaError, "parents " + UNSORTED),
        (lambda m: m.update(parents=[CID.of_raw(b"x")]), SchemaError, "parents must be dag-cbor CIDs"),
        (lambda m: m.update(parents=[bytes(P1)]), SchemaError, "parents must be a list of CIDs"),
        (lambda m: m.update(refs="x"), SchemaError, "refs must be a list of CIDs"),
        (lambda m: m.update(refs=[bytes(P1)]), SchemaError, "refs must be a list of CIDs"),
        (lambda m: m.update(refs=[P1, P1]), SchemaError, "refs " + UNSORTED),
        (lambda m: m.update(kind="telepathy"), UnknownKindError, "unknown kind 'telepathy'"),
        (lambda m: m.update(kind=7), SchemaError, "kind must be text"),
        (lambda m: m.update(payload=[]), SchemaError, "user_message payload must be a map"),
        (lambda m: m.update(payload={"content": 5}), SchemaError, WRONG_CONTENT),
        (lambda m: m.update(sig=b"\x00" * 63), SchemaError, "sig must be 64 bytes"),
    ],
)
def test_structural_rules(edit: Any, error: type[Exception], why: str) -> None:
    m = codec.decode(make().data)
    m.pop("sig")
    edit(m)
    data = resign(m)
    if "sig" in m:  # the edit replaced the signature itself
        data = codec.encode(m)
    with pytest.raises(error) as info:
        decode_record(data)
    assert info.value.message == why  # type: ignore[attr-defined]
    assert info.value.cid == str(CID.of_record(data))  # type: ignore[attr-defined]


def test_raw_cids_are_fine_as_refs_but_not_as_parents() -> None:
    raw = CID.of_raw(b"artifact")
    assert make(refs=[raw]).refs == (raw,)
    m = codec.decode(make().data)
    m["refs"] = [raw]
    assert decode_record(resign(m)).refs == (raw,)


@pytest.mark.parametrize(("data", "error", "why"), [
    (codec.encode([1, 2]), DecodeError, "a record must be a DAG-CBOR map"),
    (bytes.fromhex("a1616101") + b"\x00", DecodeError, "not DAG-CBOR"),
    (bytes.fromhex("a2616201616102"), DecodeError, "canonical DAG-CBOR"),
])
def test_bytes_that_are_no_record_map_are_refused_naming_their_cid(
    data: bytes, error: type[Exception], why: str
) -> None:
    with pytest.raises(error) as info:
        decode_record(data)
    assert why in info.value.message  # type: ignore[attr-defined]
    assert info.value.cid == str(CID.of_record(data))  # type: ignore[attr-defined]
    if why.startswith("a record"):
        assert info.value.message == why  # type: ignore[attr-defined]


def test_decode_bounds_links_and_size_naming_the_record() -> None:
    many = sorted(CID.of_record(i.to_bytes(4, "big")) for i in range(5))
    rec = make(parents=many, refs=many)
    for limits, what in ((Limits(max_parents=4), "parents"), (Limits(max_refs=4), "refs")):
        with pytest.raises(SizeLimitError) as info:
            decode_record(rec.data, limits=limits)
        assert (info.value.message, info.value.limit, info.value.got) == (f"too many {what}: 5 > 4", 4, 5)
        assert info.value.cid == str(rec.cid)
    assert decode_record(rec.data, limits=Limits(max_parents=5, max_refs=5)) == rec
    n = len(rec.data)
    with pytest.raises(SizeLimitError) as info:
        decode_record(rec.data, limits=Limits(max_record_bytes=n - 1), expected_cid=rec.cid)
    assert (info.value.message, info.value.limit, info.value.got) == (f"record too large: {n} > {n - 1}", n - 1, n)
    assert info.value.cid == str(rec.cid)
    assert decode_record(rec.data, limits=Limits(max_record_bytes=n)) == rec


def test_the_writer_bounds_size_and_links_with_the_same_figures() -> None:
    many = sorted(CID.of_record(i.to_bytes(4, "big")) for i in range(5))
    n = len(make(parents=many).data)
    assert len(make(parents=many, limits=Limits(max_record_bytes=n)).data) == n
    with pytest.raises(SizeLimitError) as info:
        make(parents=many, limits=Limits(max_record_bytes=n - 1))
    assert (info.value.message, info.value.limit, info.value.got) == (f"record too large: {n} > {n - 1}", n - 1, n)
    for over in ({"parents": many, "limits": Limits(max_parents=4)}, {"refs": many, "limits": Limits(max_refs=4)}):
        with pytest.raises(SizeLimitError) as info:
            make(**over)
        what = "parents" if "parents" in over else "refs"
        assert (info.value.message, info.value.limit, info.value.got) == (f"too many {what}: 5 > 4", 4, 5)


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


def _past_last_stamp(wall: int, counter: int) -> str:
    return (f"hlc [{wall}, {counter}] is past the last stamp a record can carry, "
            f"[{2**53 - 1}, {2**32 - 1}]: no record can be written after it")


@pytest.mark.parametrize(
    ("over", "error", "why"),
    [
        ({"conv": ""}, SchemaError, "conv must be non-empty text"),
        ({"conv": "x" * 257}, SchemaError, "conv longer than 256 bytes"),
        ({"conv": 5}, SchemaError, "conv must be non-empty text"),
        ({"conv": "\ud800"}, SchemaError, "conv is not valid Unicode text: a lone surrogate U+D800 at index 0"),
        ({"branch": ""}, SchemaError, "branch must be non-empty text"),
        ({"branch": "\ud800"}, SchemaError, "branch is not valid Unicode text: a lone surrogate U+D800 at index 0"),
        ({"seq": 0}, SchemaError, SEQ_RANGE),
        ({"seq": 2**53}, SchemaError, SEQ_RANGE),
        ({"seq": True}, SchemaError, SEQ_RANGE),
        ({"hlc": (1,)}, SchemaError, "hlc must be (wall_ms, counter)"),
        ({"hlc": "ab"}, SchemaError, "hlc must be (wall_ms, counter)"),
        ({"hlc": (1, -1)}, SchemaError, HLC_RANGE),
        ({"hlc": (2**53, 0)}, SchemaError, _past_last_stamp(2**53, 0)),
        ({"hlc": (1, 2**32)}, SchemaError, _past_last_stamp(1, 2**32)),
        ({"hlc": (1.0, 0)}, SchemaError, HLC_RANGE),
        ({"hlc": (1, 1.0)}, SchemaError, HLC_RANGE),
        ({"payload": {"content": "a\ud800"}}, SchemaError,
         "payload.content is not valid Unicode text: a lone surrogate U+D800 at index 1"),
        ({"parents": [CID.of_raw(b"x")]}, SchemaError, "parents must be dag-cbor CIDs"),
        ({"parents": [bytes(P1)]}, SchemaError, "parents must be CIDs"),
        ({"refs": ["x"]}, SchemaError, "refs must be CIDs"),
        ({"kind": "telepathy"}, UnknownKindError, "unknown kind 'telepathy'"),
        ({"kind": ["user_message"]}, SchemaError, "kind must be text"),
        ({"payload": {"content": 5}}, SchemaError, WRONG_CONTENT),
        ({"payload": {"content": {1, 2}}}, SchemaError, WRONG_CONTENT),
    ],
)
def test_the_writer_refuses_what_ingest_would(over: dict[str, Any], error: type[Exception], why: str) -> None:
    with pytest.raises(error) as info:
        make(**over)
    assert info.value.message == why  # type: ignore[attr-defined]


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
    with pytest.raises(AttributeError, match=r"^Record is immutable$"):
        rec.seq = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match=r"^Record is immutable$"):
        del rec.conv  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(rec)) == rec
    assert str(rec.cid) in repr(rec) and "user_message" in repr(rec)


def test_a_record_is_equal_and_hashes_by_its_cid_only() -> None:
    rec = make()
    again = decode_record(rec.data)
    assert rec == again and hash(rec) == hash(again) == hash(rec.cid)
    assert rec != make(seq=2) and rec != rec.cid and rec != "x" and rec != None  # noqa: E711


def test_a_trusted_load_rebuilds_the_whole_record() -> None:
    rec = make(parents=[P1], refs=[P2], branch="b")
    back = load_trusted(rec.data, rec.cid)
    assert (back.sig, back.data, back.cid, back.branch, back.payload) == (rec.sig, rec.data, rec.cid, "b", rec.payload)
    assert back.to_map() == codec.decode(rec.data)


_WIDTHS = [0, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**53 - 1]


@given(
    wall=st.sampled_from(_WIDTHS) | st.integers(0, 2**53 - 1),
    counter=st.sampled_from(_WIDTHS[:8]) | st.integers(0, 2**32 - 1),
    seq=st.sampled_from(_WIDTHS[1:]) | st.integers(1, 2**53 - 1),
    branch=st.none() | st.text(min_size=1, max_size=5),
    parents=st.integers(0, 2),
)
@settings(max_examples=150, deadline=None)
def test_the_signature_covers_the_record_without_sig_at_every_width_of_hlc_and_seq(
    wall: int, counter: int, seq: int, branch: str | None, parents: int
) -> None:
    """decode_record cuts the signed bytes out of the record's own rather than encoding them
    again: the same bytes as `signing_bytes`, whatever the widths before the `sig` entry."""
    rec = make(hlc=Hlc(wall, counter), seq=seq, branch=branch, parents=[P1, P2][:parents])
    m = codec.decode(rec.data)
    sig = m.pop("sig")
    assert _signed_part(m, sig, rec.data) == signing_bytes(m)
    assert decode_record(rec.data) == rec
    other = SigningKey(bytes(32)).sign(signing_bytes(m))  # right bytes, wrong key: still refused
    with pytest.raises(SignatureError):
        decode_record(codec.encode({**m, "sig": other}))
