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
from convgraph.core.cid import CID
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
_MAY = {Kind.INITIATE: {"tip", "probes", "gossip"},
        Kind.CONTINUE: {"ranges", "wants", "records", "base", "needs", "blocks"},
        Kind.REPLY: {"tip", "ranges", "wants", "records", "gone", "report", "base", "statement", "gossip",
                     "needs", "blocks"}}
block_cids = st.builds(lambda raw, d: CID.of_raw(d) if raw else CID.of_record(d), st.booleans(), st.binary(max_size=8))


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
    if "statement" in may:  # a REPLY must carry one; the wire keeps its bytes as they are
        kw["statement"] = draw(st.binary(min_size=1, max_size=40))
    if "gossip" in may and draw(st.booleans()):
        kw["gossip"] = tuple(draw(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=3)))
    if "needs" in may and draw(st.booleans()):
        kw["needs"] = tuple(sorted(draw(st.sets(block_cids, min_size=1, max_size=3))))
    if "blocks" in may and draw(st.booleans()):
        kw["blocks"] = tuple(draw(st.lists(st.tuples(block_cids, st.binary(max_size=40)), min_size=1, max_size=3)))
    return Section(conv, **kw)  # type: ignore[arg-type]


@st.composite
def messages(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(Kind))
    names = sorted(draw(st.sets(st.text(min_size=1, max_size=8), min_size=kind is Kind.CONTINUE, max_size=3)))
    return Message(kind, draw(st.binary(min_size=8, max_size=8)), tuple(draw(sections(n, kind)) for n in names))


@settings(max_examples=1000 if IN_CI else 200)
@given(messages())
def test_decode_inverts_encode(message: Message) -> None:
    data = wire.encode(message)
    assert wire.decode(data) == message
    assert data[0] == wire.VERSION


@settings(max_examples=1500 if IN_CI else 300)
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
    (b"\x02\x01" + b"s" * 8 + b"\x00", "unsupported sync protocol version 2", "version"),
    (b"\x03\x09" + b"s" * 8 + b"\x00", "unknown message kind 9", "kind"),
    (b"\x03\x01" + b"s" * 8 + b"\x80\x00", "non-minimal varint", "malformed"),
    (b"\x03\x01" + b"s" * 8 + b"\x00\x00", "1 trailing bytes", "malformed"),
    (b"\x03\x01" + b"s" * 8 + b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", "varint longer than 64 bits", "malformed"),
    (b"\x03\x01" + b"s" * 8 + b"\x05", "cannot fit", "malformed"),
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
    (Kind.REPLY, Section("c", **_SUMMARY)),  # no statement  # type: ignore[arg-type]
    (Kind.INITIATE, Section("c", 0, b"x" * STRONG_LEN, statement=b"s")),  # a statement in an INITIATE
    (Kind.CONTINUE, Section("c", records=(b"x",), gossip=(b"s",))),  # gossip in a CONTINUE
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
    message = Message(Kind.REPLY, b"s" * 8, (Section("a", count=1, strong=b"x" * STRONG_LEN, statement=b"s"),
                                              Section("b", count=0, strong=b"y" * STRONG_LEN, statement=b"t")))
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
    """Flags under 128 keep their one byte; the report's (128), the base's (256), the statement's
    (512, in every REPLY section) and the gossip's (1024) take two."""
    def reply(s: Section) -> bytes:
        return wire.encode(Message(Kind.REPLY, b"s" * 8, (s,)))

    reported = reply(Section("c", 0, bytes(STRONG_LEN), report=(Reported(Fate.ACCEPTED, b"d" * 32),),
                             statement=b"s"))
    assert reported.startswith(bytes((wire.VERSION, 2)) + b"s" * 8 + b"\x01\x01c\x81\x05")  # summary + report + statement: 641
    assert reported.endswith(b"\x01s")  # the statement comes last, as a part
    assert reply(Section("c", 0, bytes(STRONG_LEN), gone=(b"d" * 32,), statement=b"s")).startswith(
        bytes((wire.VERSION, 2)) + b"s" * 8 + b"\x01\x01c\xc1\x04")  # summary + gone + statement: 577
    gossiped = wire.encode(Message(Kind.INITIATE, b"s" * 8, (Section("c", 0, bytes(STRONG_LEN), gossip=(b"g", b"hh")),)))
    assert gossiped.endswith(b"\x01c\x81\x08" + bytes(1 + STRONG_LEN) + b"\x02\x01g\x02hh")  # 1025
    based = _message(Section("c", base=Base(b"k", b"ss", b"vvv")))
    assert based.endswith(b"\x01c\x80\x02\x01k\x02ss\x03vvv")
    assert wire.decode(based).sections[0].base == Base(b"k", b"ss", b"vvv")
    with pytest.raises(ProtocolError, match="parts 0x200 it may not carry"):
        wire.decode(based.replace(b"c\x80\x02", b"c\x80\x06"))
    with pytest.raises(ProtocolError, match="empty list of base bytes"):
        wire.decode(based.replace(b"\x01k\x02ss", b"\x00\x02ss"))
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


_S, _P, _R, _W, _REC, _GONE = 1, 4, 8, 16, 32, 64  # section flags (docs/sync.md); the report's is 128
_REP = b"\x81\x05"  # summary + report + statement (641) as a varint: two bytes
_NONE = bytes(STRONG_LEN)  # an empty set's strong fingerprint, for the summaries INITIATE and REPLY must carry


def _head(kind: Kind = Kind.CONTINUE) -> bytes:
    return bytes((wire.VERSION, kind)) + b"s" * 8  # version, kind, salt


_HEAD = _head()


def _raw(body: bytes, name: bytes = b"c", kind: Kind = Kind.CONTINUE) -> bytes:
    """One message of `kind` with one section: its name, then `body` (flags and fields)."""
    return _head(kind) + b"\x01" + bytes([len(name)]) + name + body


def _probing(body: bytes) -> bytes:
    """An INITIATE of an empty set (count 0, so no tip) whose probes part is `body`."""
    return _raw(bytes([_S | _P, 0]) + _NONE + body, kind=Kind.INITIATE)


def _reporting(entry: bytes) -> bytes:
    """A REPLY of an empty set whose report is the one `entry` (fate byte and fields)."""
    return _raw(_REP + bytes([0]) + _NONE + b"\x01" + entry, kind=Kind.REPLY)


def _one(kind: Kind = Kind.CONTINUE, **kw: object) -> bytes:
    if kind is not Kind.CONTINUE:
        kw = {"count": 0, "strong": _NONE, **kw}
    if kind is Kind.REPLY:
        kw = {"statement": b"s", **kw}
    return wire.encode(Message(kind, b"s" * 8, (Section("c", **kw),)))  # type: ignore[arg-type]


def _rejected(rule: str) -> Reported:
    return Reported(Fate.REJECTED, bytes(32), rule=rule)


_TALL = (1 << 64) - 1  # the largest varint
_MAX_VARINT = b"\xff" * 9 + b"\x01"


@pytest.mark.parametrize(("data", "limits", "why"), [
    (b"", None, "truncated"),
    (_HEAD[:5], None, "truncated: 8 bytes wanted, 3 left"),
    (_probing(bytes([1, 1, 0x40]) + b"ffff"), None, "a mode on a bound that takes none"),
    (_raw(bytes([_W, 1, 1, 0x40, 2, 0])), None, "a mode on a bound that takes none"),
    (_raw(bytes([_R, 1, 0, 0x01])), None, "a prefix on the infinite bound"),
    (_raw(bytes([_R, 1, 1, 33])), None, "bound prefix of 33 bytes"),
    (_raw(bytes([_R, 1, 0, 0xC0])), None, "unknown range mode 3"),
    (_raw(bytes([_W, 1]) + b"\xff" * 9 + b"\x01\x00\x03\x00"), None, "bound beyond the largest wall time"),
    (_probing(bytes([1, 0, 0]) + b"ffff"), None, "probes must be finite and increasing"),
    (_probing(bytes([2, 1, 0]) + b"ffff" + bytes([1, 0]) + b"ffff"), None, "probes must be finite and increasing"),
    (_one(ranges=(Range(Bound(5), Mode.SKIP), Range(Bound(5), Mode.SKIP), Range(INFINITY, Mode.SKIP))), None,
     "range bounds must increase"),
    (_raw(bytes([_W, 1, 5, 0, 1, 0, 0])), None, "wants must be non-empty, sorted and disjoint"),
    (_one(Kind.REPLY, report=(_rejected("x" * 65),)), None, "65 rule bytes exceed the limit of 64"),
    (_reporting(bytes([Fate.REJECTED]) + bytes(32) + b"\x01\xff"), None, "rule name is not UTF-8"),
    (_reporting(bytes([9])), None, "unknown fate 9 in a report"),
    (_reporting(bytes([Fate.REJECTED]) + bytes(32) + b"\x00"), None,
     "an empty list of rule bytes (leave the flag unset instead)"),
    (_reporting(bytes([Fate.QUARANTINED]) + bytes(32) + b"\x00"), None,
     "an empty list of parents (leave the flag unset instead)"),
    (_one(Kind.INITIATE, probes=tuple((Bound(i + 1), b"ffff") for i in range(65))), None,
     "65 probes exceed the limit of 64"),
    (_one(records=(b"x",)), WireLimits(max_name=0), "1 name bytes exceed the limit of 0"),
    (_one(ranges=(Range(Bound(5), Mode.SKIP), Range(INFINITY, Mode.SKIP))), WireLimits(max_ranges=1),
     "2 ranges exceed the limit of 1"),
    (_one(wants=(Want(Bound(1), Bound(2), ()), Want(Bound(3), Bound(4), ()))), WireLimits(max_ranges=1),
     "2 wants exceed the limit of 1"),
    (_one(ranges=(Range(INFINITY, Mode.IDS, hashes=(b"abc",) * 3),)), WireLimits(max_hashes=2),
     "3 hashes exceed the limit of 2"),
    (_one(Kind.REPLY, gone=(bytes(32), bytes(32))), WireLimits(max_hashes=1), "2 gone digests exceed the limit of 1"),
    (_one(Kind.REPLY, report=(_rejected("a"), _rejected("b"), _rejected("c"))), WireLimits(max_records=1),
     "3 report entries exceed the limit of 2"),  # the records' own, plus one for the base's
    (_one(records=(b"x" * 30,)), WireLimits(max_message=25), None),
    (_raw(bytes([_REC, 1, 50]) + b"x"), WireLimits(max_message=45), "50 record bytes exceed the limit of 45"),
    (_probing(bytes([0])), None, "an empty list of probes (leave the flag unset instead)"),
    (_raw(bytes([_R, 0])), None, "an empty list of ranges (leave the flag unset instead)"),
    (_raw(bytes([_W, 0])), None, "an empty list of wants (leave the flag unset instead)"),
    (_raw(bytes([_REC, 0])), None, "an empty list of records (leave the flag unset instead)"),
    (_raw(b"\xc1\x04\x00" + _NONE + bytes([0]), kind=Kind.REPLY), None,
     "an empty list of gone digests (leave the flag unset instead)"),
    (_raw(b"\x81\x04\x00" + b"abc", kind=Kind.REPLY), None, "truncated: 16 bytes wanted, 3 left"),
    (_raw(b"\x81\x04\x00" + _NONE + b"\x00", kind=Kind.REPLY), None,
     "an empty list of statement bytes (leave the flag unset instead)"),
    (_one(Kind.INITIATE, gossip=(b"g",) * 17), None, "17 gossiped statements exceed the limit of 16"),
    (_HEAD + b"\xff" * 9 + b"\x02", None, "varint longer than 64 bits"),
    (_HEAD + b"\xff" * 10 + b"\x00", None, "varint longer than 64 bits"),
    (_HEAD + _MAX_VARINT, None, f"{_TALL} sections exceed the limit of 1024"),
    (_HEAD + b"\x80\x00", None, "non-minimal varint"),
    (_message(_some("b"), _some("a")), None, "sections must be sorted by conversation, each once"),
    (_one(records=(b"",)), None, "empty record"),
    (_one(ranges=(Range(Bound(5), Mode.SKIP),)), None, "only the last range may, and it must, end at infinity"),
    (_raw(b"\x00", name=b"\xff"), None, "conversation name is not UTF-8"),
    (_one(ranges=(Range(INFINITY, Mode.IDS, hashes=_ids(2)),), wants=(Want(Bound(1), Bound(2), _ids(2)),)),
     WireLimits(max_hashes=3), "more than 3 hashes in one message"),
    (_raw(_REP + b"\x00" + _NONE + b"\x00", kind=Kind.REPLY), None,
     "an empty list of report entries (leave the flag unset instead)"),
    (_HEAD + b"\x00", None, "a CONTINUE with no section"),
    (_raw(b"\x00"), None, "CONTINUE section without a part it must carry"),
    (_raw(bytes([_S, 1]) + _NONE, kind=Kind.INITIATE), None,
     "an INITIATE section carries its tip when, and only when, its count is not 0"),
])
def test_each_malformed_message_is_refused_saying_exactly_what_is_wrong(
    data: bytes, limits: WireLimits | None, why: str | None
) -> None:
    with pytest.raises(ProtocolError) as caught:
        wire.decode(data, limits or wire.DEFAULT_LIMITS)
    if why is None:  # refused before parsing: the whole message is over the limit
        assert caught.value.message == f"message of {len(data)} bytes exceeds the limit of 25"
        assert caught.value.reason == "limit"
        return
    reason = "limit" if "exceed" in why or why.startswith("more than") else "malformed"
    reason = "part" if "CONTINUE" in why or "INITIATE" in why else reason
    pattern = rf"sync message refused at byte \d+ \({reason}\): " + re.escape(why)
    assert re.fullmatch(pattern, caught.value.message)
    assert caught.value.reason == reason


def test_a_message_exactly_at_each_limit_is_accepted() -> None:
    two = _message(Section("a", records=(b"x",)), Section("b", records=(b"y",)))
    limits = WireLimits(max_message=len(two), max_sections=2, max_records=1, max_name=1)
    assert [s.conv for s in wire.decode(two, limits).sections] == ["a", "b"]
    ids = _one(ranges=(Range(INFINITY, Mode.IDS, hashes=(b"abc",) * 3),))
    assert wire.decode(ids, WireLimits(max_hashes=3)).sections[0].ranges[0].hashes == (b"abc",) * 3  # type: ignore[index]
    probes = _one(Kind.INITIATE, probes=tuple((Bound(i + 1), b"ffff") for i in range(64)))
    assert len(wire.decode(probes).sections[0].probes) == 64
    rule = _one(Kind.REPLY, report=(_rejected("x" * 64),))
    assert wire.decode(rule).sections[0].report == (_rejected("x" * 64),)
    entries = (_rejected("a"), _rejected("b"))  # max_records + 1: a base's entry besides the records'
    assert wire.decode(_one(Kind.REPLY, report=entries), WireLimits(max_records=1)).sections[0].report == entries


def test_a_base_counts_the_bytes_of_all_three_of_its_parts() -> None:
    assert Base(b"k", b"ss", b"vvvv").size() == 7
