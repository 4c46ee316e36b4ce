"""The sync message grammar: one encoding per message, and nothing else gets through.

Round trips both ways (`decode(encode(m)) == m`, and any bytes that decode re-encode to
themselves), and hostile bytes — random, mutated, truncated, oversized — raise only
`ProtocolError`.
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import IN_CI
from convgraph.errors import ProtocolError
from convgraph.sync import wire
from convgraph.sync.keyset import HASH_LEN, INFINITY, RANGE_LEN, STRONG_LEN, Bound
from convgraph.sync.wire import Base, Fate, Kind, Message, Mode, Range, Reported, Section, Want, WireLimits

walls = st.integers(0, 2**48)
prefixes = st.binary(max_size=32)
hashes = st.lists(st.binary(min_size=HASH_LEN, max_size=HASH_LEN), max_size=5).map(tuple)


def increasing(n: int, draw: st.DrawFn) -> list[Bound]:
    ws = sorted(draw(st.lists(walls, min_size=n, max_size=n, unique=True)))
    return [Bound(w, draw(prefixes)) for w in ws]


digests = st.binary(min_size=32, max_size=32)


@st.composite
def entries(draw: st.DrawFn) -> Reported:
    fate = draw(st.sampled_from(Fate))
    if fate is Fate.REJECTED_AT:
        return Reported(fate, index=draw(st.integers(0, 2**20)), rule=draw(st.sampled_from(["size", "forbidden"])))
    if fate is Fate.REJECTED:
        return Reported(fate, draw(digests), rule=draw(st.sampled_from(["cid", "signature"])))
    if fate is Fate.QUARANTINED:
        return Reported(fate, draw(digests), parents=tuple(draw(st.lists(digests, min_size=1, max_size=3))))
    if fate is Fate.HELD:
        return Reported(fate, draw(digests), retry_ms=draw(walls))
    return Reported(fate, draw(digests))


# which parts each kind may carry (docs/sync.md, *Parts of a section*)
_MAY = {Kind.INITIATE: {"tip", "probes"}, Kind.CONTINUE: {"ranges", "wants", "records", "base"},
        Kind.REPLY: {"tip", "ranges", "wants", "records", "gone", "report", "base"}}


@st.composite
def sections(draw: st.DrawFn, conv: str, kind: Kind) -> Section:
    kw: dict[str, object] = {}
    may = _MAY[kind]
    if kind is not Kind.CONTINUE:
        kw["count"], kw["strong"] = draw(st.integers(0, 2**40)), draw(st.binary(min_size=STRONG_LEN, max_size=STRONG_LEN))
    if "tip" in may and (kw["count"] != 0 if kind is Kind.INITIATE else draw(st.booleans())):
        kw["tip"] = (draw(walls), draw(st.binary(min_size=32, max_size=32)))
    if "probes" in may and draw(st.booleans()):
        kw["probes"] = tuple((b, draw(st.binary(min_size=RANGE_LEN, max_size=RANGE_LEN)))
                             for b in increasing(draw(st.integers(1, 4)), draw))
    if "ranges" in may and draw(st.booleans()):
        uppers = [*increasing(draw(st.integers(0, 6)), draw), INFINITY]
        ranges = []
        for u in uppers:
            mode = draw(st.sampled_from(Mode))
            fp = draw(st.binary(min_size=RANGE_LEN, max_size=RANGE_LEN)) if mode is Mode.FINGERPRINT else b""
            ranges.append(Range(u, mode, fp=fp, hashes=draw(hashes) if mode is Mode.IDS else ()))
        kw["ranges"] = tuple(ranges)
    if "wants" in may and draw(st.booleans()):
        bounds = increasing(2 * draw(st.integers(1, 3)), draw)
        kw["wants"] = tuple(Want(bounds[i], bounds[i + 1], draw(hashes)) for i in range(0, len(bounds), 2))
    if "records" in may and (draw(st.booleans()) or (kind is Kind.CONTINUE and not kw)):
        kw["records"] = tuple(draw(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=3)))
    if "gone" in may and draw(st.booleans()):
        kw["gone"] = tuple(draw(st.lists(digests, min_size=1, max_size=2)))
    if "report" in may and draw(st.booleans()):
        kw["report"] = tuple(draw(st.lists(entries(), min_size=1, max_size=4)))
    if "base" in may and draw(st.booleans()):
        parts = st.binary(min_size=1, max_size=40)
        kw["base"] = Base(draw(parts), draw(parts), draw(parts))
    return Section(conv, **kw)  # type: ignore[arg-type]


@st.composite
def messages(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(Kind))
    names = sorted(draw(st.sets(st.text(min_size=1, max_size=8), min_size=kind is Kind.CONTINUE, max_size=3)))
    return Message(kind, draw(st.binary(min_size=8, max_size=8)), tuple(draw(sections(n, kind)) for n in names))


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


def _some(conv: str) -> Section:
    return Section(conv, records=(b"x",))


@pytest.mark.parametrize(("data", "why", "reason"), [
    (b"", "truncated", "malformed"),
    (b"\x01\x01" + b"s" * 8 + b"\x00", "unsupported sync protocol version 1", "version"),
    (b"\x02\x09" + b"s" * 8 + b"\x00", "unknown message kind 9", "kind"),
    (b"\x02\x01" + b"s" * 8 + b"\x80\x00", "non-minimal varint", "malformed"),
    (b"\x02\x01" + b"s" * 8 + b"\x00\x00", "1 trailing bytes", "malformed"),
    (b"\x02\x01" + b"s" * 8 + b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", "varint longer than 64 bits", "malformed"),
    (b"\x02\x01" + b"s" * 8 + b"\x05", "cannot fit", "malformed"),
    (_message(_some("b"), _some("a")), "sorted by conversation", "malformed"),
    (_message(_some("a"), _some("a")), "sorted by conversation", "malformed"),
])
def test_malformed_messages_name_what_is_wrong(data: bytes, why: str, reason: str) -> None:
    with pytest.raises(ProtocolError, match=why) as caught:
        wire.decode(data)
    assert caught.value.reason == reason


_SUMMARY = {"count": 1, "strong": b"x" * STRONG_LEN}
_TIP = {"tip": (5, b"d" * 32)}


@pytest.mark.parametrize(("kind", "section"), [
    (Kind.INITIATE, Section("c")),  # no summary
    (Kind.INITIATE, Section("c", **_SUMMARY)),  # a count but no tip  # type: ignore[arg-type]
    (Kind.INITIATE, Section("c", 0, b"x" * STRONG_LEN, **_TIP)),  # a tip for an empty set  # type: ignore[arg-type]
    (Kind.INITIATE, Section("c", **_SUMMARY, **_TIP, records=(b"x",))),  # type: ignore[arg-type]
    (Kind.INITIATE, Section("c", **_SUMMARY, **_TIP, ranges=(Range(INFINITY, Mode.SKIP),))),  # type: ignore[arg-type]
    (Kind.CONTINUE, Section("c")),  # nothing to continue
    (Kind.CONTINUE, Section("c", **_SUMMARY, records=(b"x",))),  # type: ignore[arg-type]
    (Kind.CONTINUE, Section("c", records=(b"x",), report=(Reported(Fate.ACCEPTED, b"d" * 32),))),
    (Kind.CONTINUE, Section("c", records=(b"x",), gone=(b"d" * 32,))),
    (Kind.REPLY, Section("c", records=(b"x",))),  # no summary
    (Kind.REPLY, Section("c", **_SUMMARY, probes=((Bound(3), b"f" * RANGE_LEN),))),  # type: ignore[arg-type]
])
def test_a_part_its_kind_does_not_allow_or_requires_is_refused(kind: Kind, section: Section) -> None:
    with pytest.raises(ProtocolError) as caught:
        wire.decode(wire.encode(Message(kind, b"s" * 8, (section,))))
    assert caught.value.reason == "part"


def test_a_continue_must_carry_a_section() -> None:
    with pytest.raises(ProtocolError) as caught:
        wire.decode(wire.encode(Message(Kind.CONTINUE, b"s" * 8)))
    assert caught.value.reason == "part"
    assert wire.decode(wire.encode(Message(Kind.INITIATE, b"s" * 8))).sections == ()


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
    not_utf8 = bytearray(_message(_some("é")))
    not_utf8[12] = 0xFF  # the name's first byte: after version, kind, salt, count, length
    with pytest.raises(ProtocolError, match="not UTF-8"):
        wire.decode(bytes(not_utf8))


def test_limits_are_enforced_before_reading_the_body() -> None:
    limits = WireLimits(max_message=100, max_sections=2, max_records=1, max_hashes=4)
    with pytest.raises(ProtocolError, match="exceeds the limit of 100"):
        wire.decode(b"\x01" * 101, limits)
    with pytest.raises(ProtocolError, match="3 sections exceed the limit of 2"):
        wire.decode(_message(_some("a"), _some("b"), _some("c")), limits)
    with pytest.raises(ProtocolError, match="2 records exceed the limit of 1"):
        wire.decode(_message(Section("a", records=(b"x", b"y"))), limits)
    many = Section("a", ranges=(Range(INFINITY, Mode.IDS, hashes=(b"abc",) * 5),))
    with pytest.raises(ProtocolError, match="limit of 4"):
        wire.decode(_message(many), limits)


class _Refused(Exception):
    pass


def test_admit_sees_each_name_before_its_section_is_read() -> None:
    seen: list[str] = []
    message = Message(Kind.REPLY, b"s" * 8, (Section("a", count=1, strong=b"x" * STRONG_LEN),
                                              Section("b", count=0, strong=b"y" * STRONG_LEN)))
    assert wire.decode(wire.encode(message), admit=seen.append) == message
    assert seen == ["a", "b"]


def test_a_refused_name_ends_decoding_before_the_rest_of_the_message() -> None:
    """What follows the refused name is never read: garbage there is not even noticed."""
    good = _message(_some("ok"), Section("secret", ranges=(Range(INFINITY, Mode.SKIP),)))
    name_end = good.index(b"secret") + len(b"secret")
    hostile = good[:name_end] + b"\xff" * 1000  # a flags byte and then nothing that parses

    def admit(conv: str) -> None:
        if conv != "ok":
            raise _Refused(conv)

    with pytest.raises(ProtocolError):
        wire.decode(hostile)
    with pytest.raises(_Refused, match="secret"):
        wire.decode(hostile, admit=admit)


def test_flags_are_a_varint_and_the_base_is_the_ninth_bit() -> None:
    """Flags under 128 keep their one byte; the report's (128) and the base's (256) take two."""
    def reply(s: Section) -> bytes:
        return wire.encode(Message(Kind.REPLY, b"s" * 8, (s,)))

    reported = reply(Section("c", 0, bytes(STRONG_LEN), report=(Reported(Fate.ACCEPTED, b"d" * 32),)))
    assert reported.startswith(b"\x02\x02" + b"s" * 8 + b"\x01\x01c\x81\x01")  # summary + report: 129
    assert reply(Section("c", 0, bytes(STRONG_LEN), gone=(b"d" * 32,))).startswith(
        b"\x02\x02" + b"s" * 8 + b"\x01\x01c\x41")  # summary + gone: 65, one byte
    based = _message(Section("c", base=Base(b"k", b"ss", b"vvv")))
    assert based.endswith(b"\x01c\x80\x02\x01k\x02ss\x03vvv")
    assert wire.decode(based).sections[0].base == Base(b"k", b"ss", b"vvv")
    with pytest.raises(ProtocolError, match="parts 0x200 it may not carry"):
        wire.decode(based.replace(b"c\x80\x02", b"c\x80\x06"))
    with pytest.raises(ProtocolError, match="empty list of base bytes"):
        wire.decode(based.replace(b"\x01k\x02ss", b"\x00\x02ss"))
