"""The sync message grammar: one encoding per message, and nothing else gets through.

Round trips both ways (`decode(encode(m)) == m`, and any bytes that decode re-encode to
themselves), and hostile bytes — random, mutated, truncated, oversized — raise only
`ProtocolError`.
"""

from __future__ import annotations

import contextlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph.errors import ProtocolError
from convgraph.sync import wire
from convgraph.sync.keyset import HASH_LEN, INFINITY, RANGE_LEN, STRONG_LEN, Bound
from convgraph.sync.wire import Kind, Message, Mode, Range, Rejected, Section, Want, WireLimits

walls = st.integers(0, 2**48)
prefixes = st.binary(max_size=32)
hashes = st.lists(st.binary(min_size=HASH_LEN, max_size=HASH_LEN), max_size=5).map(tuple)


def increasing(n: int, draw: st.DrawFn) -> list[Bound]:
    ws = sorted(draw(st.lists(walls, min_size=n, max_size=n, unique=True)))
    return [Bound(w, draw(prefixes)) for w in ws]


@st.composite
def sections(draw: st.DrawFn, conv: str) -> Section:
    kw: dict[str, object] = {}
    if draw(st.booleans()):
        kw["count"], kw["strong"] = draw(st.integers(0, 2**40)), draw(st.binary(min_size=STRONG_LEN, max_size=STRONG_LEN))
    if draw(st.booleans()):
        kw["tip"] = (draw(walls), draw(st.binary(min_size=32, max_size=32)))
    if draw(st.booleans()):
        kw["probes"] = tuple((b, draw(st.binary(min_size=RANGE_LEN, max_size=RANGE_LEN)))
                             for b in increasing(draw(st.integers(1, 4)), draw))
    if draw(st.booleans()):
        uppers = [*increasing(draw(st.integers(0, 6)), draw), INFINITY]
        ranges = []
        for u in uppers:
            mode = draw(st.sampled_from(Mode))
            fp = draw(st.binary(min_size=RANGE_LEN, max_size=RANGE_LEN)) if mode is Mode.FINGERPRINT else b""
            ranges.append(Range(u, mode, fp=fp, hashes=draw(hashes) if mode is Mode.IDS else ()))
        kw["ranges"] = tuple(ranges)
    if draw(st.booleans()):
        bounds = increasing(2 * draw(st.integers(1, 3)), draw)
        kw["wants"] = tuple(Want(bounds[i], bounds[i + 1], draw(hashes)) for i in range(0, len(bounds), 2))
    if draw(st.booleans()):
        kw["records"] = tuple(draw(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=3)))
    if draw(st.booleans()):
        kw["gone"] = tuple(draw(st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=2)))
    if draw(st.booleans()):
        kw["accepted"] = draw(st.integers(0, 1000))
        kw["rejected"] = tuple(Rejected(draw(st.binary(min_size=32, max_size=32)), draw(st.sampled_from(["cid", "signature"])))
                               for _ in range(draw(st.integers(0, 2))))
    return Section(conv, **kw)  # type: ignore[arg-type]


@st.composite
def messages(draw: st.DrawFn) -> Message:
    names = sorted(draw(st.sets(st.text(min_size=1, max_size=8), max_size=3)))
    return Message(draw(st.sampled_from(Kind)), draw(st.binary(min_size=8, max_size=8)),
                   tuple(draw(sections(n)) for n in names))


@settings(max_examples=2000 if IN_CI else 200)
@given(messages())
def test_decode_inverts_encode(message: Message) -> None:
    data = wire.encode(message)
    assert wire.decode(data) == message
    assert data[0] == wire.VERSION


@settings(max_examples=4000 if IN_CI else 300)
@given(messages(), st.data())
def test_mutated_bytes_are_refused_or_re_encode_to_themselves(message: Message, data: st.DataObject) -> None:
    good = bytearray(wire.encode(message))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(good) - 1))
        good[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(good)))
    for candidate in (bytes(good), bytes(good[:cut]), bytes(good) + b"\0"):
        try:
            decoded = wire.decode(candidate)
        except ProtocolError:
            continue
        assert wire.encode(decoded) == candidate


@settings(max_examples=2000 if IN_CI else 200)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_protocol_errors(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        wire.decode(data)


def _message(*sections: Section) -> bytes:
    return wire.encode(Message(Kind.CONTINUE, b"s" * 8, sections))


@pytest.mark.parametrize(("data", "why"), [
    (b"", "truncated"),
    (b"\x02\x01" + b"s" * 8 + b"\x00", "unsupported sync protocol version 2"),
    (b"\x01\x09" + b"s" * 8 + b"\x00", "unknown message kind 9"),
    (b"\x01\x01" + b"s" * 8 + b"\x80\x00", "non-minimal varint"),
    (b"\x01\x01" + b"s" * 8 + b"\x00\x00", "1 trailing bytes"),
    (b"\x01\x01" + b"s" * 8 + b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", "varint longer than 64 bits"),
    (b"\x01\x01" + b"s" * 8 + b"\x05", "cannot fit"),
    (_message(Section("b"), Section("a")), "sorted by conversation"),
    (_message(Section("a"), Section("a")), "sorted by conversation"),
])
def test_malformed_messages_name_what_is_wrong(data: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        wire.decode(data)


def test_section_rules() -> None:
    bad_cover = Section("c", ranges=(Range(Bound(5, b"\x09"), Mode.SKIP), Range(Bound(5, b"\x01"), Mode.SKIP),
                                     Range(INFINITY, Mode.SKIP)))
    with pytest.raises(ProtocolError, match="must increase"):
        wire.decode(_message(bad_cover))
    open_cover = wire.encode(Message(Kind.CONTINUE, b"s" * 8, (Section("c", ranges=(Range(Bound(5), Mode.SKIP),)),)))
    with pytest.raises(ProtocolError, match="end at infinity"):
        wire.decode(open_cover)
    overlapping = Section("c", wants=(Want(Bound(1), Bound(9, b"\x05"), ()), Want(Bound(9), Bound(12), ())))
    with pytest.raises(ProtocolError, match="sorted and disjoint"):
        wire.decode(_message(overlapping))
    with pytest.raises(ProtocolError, match="empty record"):
        wire.decode(_message(Section("c", records=(b"",))))
    not_utf8 = bytearray(_message(Section("é")))
    not_utf8[12] = 0xFF  # the name's first byte: after version, kind, salt, count, length
    with pytest.raises(ProtocolError, match="not UTF-8"):
        wire.decode(bytes(not_utf8))


def test_limits_are_enforced_before_reading_the_body() -> None:
    limits = WireLimits(max_message=100, max_sections=2, max_records=1, max_hashes=4)
    with pytest.raises(ProtocolError, match="exceeds the limit of 100"):
        wire.decode(b"\x01" * 101, limits)
    with pytest.raises(ProtocolError, match="3 sections exceed the limit of 2"):
        wire.decode(_message(Section("a"), Section("b"), Section("c")), limits)
    with pytest.raises(ProtocolError, match="2 records exceed the limit of 1"):
        wire.decode(_message(Section("a", records=(b"x", b"y"))), limits)
    many = Section("a", ranges=(Range(INFINITY, Mode.IDS, hashes=(b"abc",) * 5),))
    with pytest.raises(ProtocolError, match="limit of 4"):
        wire.decode(_message(many), limits)


def _ids(n: int) -> tuple[bytes, ...]:
    return tuple(bytes((i, i, i)) for i in range(n))


@pytest.mark.parametrize("sections", [
    # two id lists of one section's cover
    (Section("a", ranges=(Range(Bound(5), Mode.IDS, hashes=_ids(3)), Range(INFINITY, Mode.IDS, hashes=_ids(3)))),),
    # an id list and a want
    (Section("a", ranges=(Range(INFINITY, Mode.IDS, hashes=_ids(3)),), wants=(Want(Bound(1), Bound(2), _ids(3)),)),),
    # two wants
    (Section("a", wants=(Want(Bound(1), Bound(2), _ids(3)), Want(Bound(3), Bound(4), _ids(3)))),),
    # two sections
    (Section("a", wants=(Want(Bound(1), Bound(2), _ids(3)),)), Section("b", wants=(Want(Bound(1), Bound(2), _ids(3)),))),
])
def test_the_hash_limit_counts_every_list_of_the_message_together(sections: tuple[Section, ...]) -> None:
    limits = WireLimits(max_hashes=5)
    with pytest.raises(ProtocolError, match="more than 5 hashes in one message"):
        wire.decode(_message(*sections), limits)
    assert wire.decode(_message(*sections), WireLimits(max_hashes=6)).sections == sections


_P, _R, _W, _REC, _GONE, _REP = 4, 8, 16, 32, 64, 128  # section flags (docs/sync.md)
_HEAD = bytes((wire.VERSION, Kind.CONTINUE)) + b"s" * 8  # version, kind, salt


def _raw(body: bytes, name: bytes = b"c") -> bytes:
    """One CONTINUE message with one section: its name, then `body` (flags and fields)."""
    return _HEAD + b"\x01" + bytes([len(name)]) + name + body


def _one(**kw: object) -> bytes:
    return _message(Section("c", **kw))  # type: ignore[arg-type]


_TALL = (1 << 64) - 1  # the largest varint
_MAX_VARINT = b"\xff" * 9 + b"\x01"


@pytest.mark.parametrize(("data", "limits", "why"), [
    (b"", None, "truncated"),
    (_HEAD[:5], None, "truncated: 8 bytes wanted, 3 left"),
    (_raw(bytes([_P, 1, 1, 0x40]) + b"ffff"), None, "a mode on a bound that takes none"),
    (_raw(bytes([_W, 1, 1, 0x40, 2, 0])), None, "a mode on a bound that takes none"),
    (_raw(bytes([_R, 1, 0, 0x01])), None, "a prefix on the infinite bound"),
    (_raw(bytes([_R, 1, 1, 33])), None, "bound prefix of 33 bytes"),
    (_raw(bytes([_R, 1, 0, 0xC0])), None, "unknown range mode 3"),
    (_raw(bytes([_W, 1]) + b"\xff" * 9 + b"\x01\x00\x03\x00"), None, "bound beyond the largest wall time"),
    (_raw(bytes([_P, 1, 0, 0]) + b"ffff"), None, "probes must be finite and increasing"),
    (_raw(bytes([_P, 2, 1, 0]) + b"ffff" + bytes([1, 0]) + b"ffff"), None, "probes must be finite and increasing"),
    (_one(ranges=(Range(Bound(5), Mode.SKIP), Range(Bound(5), Mode.SKIP), Range(INFINITY, Mode.SKIP))), None,
     "range bounds must increase"),
    (_raw(bytes([_W, 1, 5, 0, 1, 0, 0])), None, "wants must be non-empty, sorted and disjoint"),
    (_one(rejected=(Rejected(bytes(32), "x" * 65),), accepted=0), None, "65 rule bytes exceed the limit of 64"),
    (_raw(bytes([_REP, 0, 1]) + bytes(32) + b"\x01\xff"), None, "rule name is not UTF-8"),
    (_one(probes=tuple((Bound(i + 1), b"ffff") for i in range(65))), None, "65 probes exceed the limit of 64"),
    (_one(records=(b"x",)), WireLimits(max_name=0), "1 name bytes exceed the limit of 0"),
    (_one(ranges=(Range(Bound(5), Mode.SKIP), Range(INFINITY, Mode.SKIP))), WireLimits(max_ranges=1),
     "2 ranges exceed the limit of 1"),
    (_one(wants=(Want(Bound(1), Bound(2), ()), Want(Bound(3), Bound(4), ()))), WireLimits(max_ranges=1),
     "2 wants exceed the limit of 1"),
    (_one(ranges=(Range(INFINITY, Mode.IDS, hashes=(b"abc",) * 3),)), WireLimits(max_hashes=2),
     "3 hashes exceed the limit of 2"),
    (_one(gone=(bytes(32), bytes(32))), WireLimits(max_hashes=1), "2 gone digests exceed the limit of 1"),
    (_one(accepted=0, rejected=(Rejected(bytes(32), "a"), Rejected(bytes(32), "b"))), WireLimits(max_records=1),
     "2 rejections exceed the limit of 1"),
    (_one(records=(b"x" * 30,)), WireLimits(max_message=25), None),
    (_raw(bytes([_REC, 1, 50]) + b"x"), WireLimits(max_message=45), "50 record bytes exceed the limit of 45"),
    (_raw(bytes([_P, 0])), None, "an empty list of probes (leave the flag unset instead)"),
    (_raw(bytes([_R, 0])), None, "an empty list of ranges (leave the flag unset instead)"),
    (_raw(bytes([_W, 0])), None, "an empty list of wants (leave the flag unset instead)"),
    (_raw(bytes([_REC, 0])), None, "an empty list of records (leave the flag unset instead)"),
    (_raw(bytes([_GONE, 0])), None, "an empty list of gone digests (leave the flag unset instead)"),
    (_raw(bytes([1, 0]) + b"abc"), None, "truncated: 16 bytes wanted, 3 left"),
    (_HEAD + b"\xff" * 9 + b"\x02", None, "varint longer than 64 bits"),
    (_HEAD + b"\xff" * 10 + b"\x00", None, "varint longer than 64 bits"),
    (_HEAD + _MAX_VARINT, None, f"{_TALL} sections exceed the limit of 1024"),
    (_HEAD + b"\x80\x00", None, "non-minimal varint"),
    (_message(Section("b"), Section("a")), None, "sections must be sorted by conversation, each once"),
    (_one(records=(b"",)), None, "empty record"),
    (_one(ranges=(Range(Bound(5), Mode.SKIP),)), None, "only the last range may, and it must, end at infinity"),
    (_raw(b"\x00", name=b"\xff"), None, "conversation name is not UTF-8"),
])
def test_each_malformed_message_is_refused_saying_exactly_what_is_wrong(
    data: bytes, limits: WireLimits | None, why: str | None
) -> None:
    with pytest.raises(ProtocolError) as caught:
        wire.decode(data, limits or wire.DEFAULT_LIMITS)
    if why is None:  # refused before parsing: the whole message is over the limit
        assert caught.value.message == f"message of {len(data)} bytes exceeds the limit of 25"
        return
    assert re.fullmatch(r"malformed sync message at byte \d+: " + re.escape(why), caught.value.message)


def test_a_message_exactly_at_each_limit_is_accepted() -> None:
    two = _message(Section("a", records=(b"x",)), Section("b", records=(b"y",)))
    limits = WireLimits(max_message=len(two), max_sections=2, max_records=1, max_name=1)
    assert [s.conv for s in wire.decode(two, limits).sections] == ["a", "b"]
    ids = _one(ranges=(Range(INFINITY, Mode.IDS, hashes=(b"abc",) * 3),))
    assert wire.decode(ids, WireLimits(max_hashes=3)).sections[0].ranges[0].hashes == (b"abc",) * 3  # type: ignore[index]
    probes = _one(probes=tuple((Bound(i + 1), b"ffff") for i in range(64)))
    assert len(wire.decode(probes).sections[0].probes) == 64
    rule = _one(accepted=0, rejected=(Rejected(bytes(32), "x" * 64),))
    assert wire.decode(rule).sections[0].rejected[0].rule == "x" * 64
