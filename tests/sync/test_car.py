"""The CARv1 codec: round trips, every strictness rule, and what damaged files do."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convgraph import Draft, ManualClock, Replica
from convgraph.core.cid import CID
from convgraph.core.codec import encode
from convgraph.errors import CarError
from convgraph.sync.car import MAX_BLOCK, OtherBlock, read_car, write_car
from convgraph.sync.varint import uvarint as _varint

Blocks = list[tuple[CID, bytes]]


def car(roots: list[CID], blocks: Blocks) -> bytes:
    buf = io.BytesIO()
    assert write_car(buf, roots, blocks) == len(buf.getvalue())
    return buf.getvalue()


def parse(data: bytes, **bounds: int) -> tuple[list[CID], Blocks]:
    roots, blocks = read_car(io.BytesIO(data), **bounds)
    return roots, list(blocks)


def fails(data: bytes, *needles: str, **bounds: int) -> CarError:
    with pytest.raises(CarError) as info:
        parse(data, **bounds)
    for needle in needles:
        assert needle in str(info.value), str(info.value)
    return info.value


def records(convs: dict[str, int]) -> tuple[list[CID], Blocks]:
    r = Replica.in_memory(clock=ManualClock())
    for conv, n in convs.items():
        r.write_many(conv, [Draft("user_message", {"content": f"{conv} {i}"}) for i in range(n)])
    heads = sorted({h for c in convs for h in r.heads(c)})
    return heads, [pair for c in r.conversations() for pair in r.store.records(c)]


ROOTS, BLOCKS = records({"a": 3, "b": 2})
VALID = car(ROOTS, BLOCKS)
HEAD = len(encode({"roots": ROOTS, "version": 1}))  # 99: 17 bytes of keys, 41 per root


def header(value: object) -> bytes:
    data = encode(value)
    return _varint(len(data)) + data


def section(raw_cid: bytes, data: bytes) -> bytes:
    return _varint(len(raw_cid) + len(data)) + raw_cid + data


def block(data: bytes) -> bytes:
    return section(bytes(CID.of_record(data)), data)


OK_HEADER = header({"roots": [], "version": 1})


# ------------------------------------------------------------------ round trips


def test_round_trip_keeps_roots_blocks_and_order() -> None:
    assert parse(VALID) == (ROOTS, BLOCKS)
    assert len(BLOCKS) == 5 and len(ROOTS) == 2


def test_empty_car_round_trips() -> None:
    assert VALID[0] == HEAD == 99  # one-byte varint
    assert parse(car([], [])) == ([], [])


def test_the_header_is_the_canonical_map_and_blocks_are_framed_as_the_spec_says() -> None:
    data = car([ROOTS[0]], BLOCKS[:1])
    head = encode({"roots": [ROOTS[0]], "version": 1})
    cid, body = BLOCKS[0]
    assert data == _varint(len(head)) + head + _varint(36 + len(body)) + bytes(cid) + body


def test_write_streams_block_by_block() -> None:
    buf = io.BytesIO()
    sizes: list[int] = []

    def blocks() -> Iterator[tuple[CID, bytes]]:
        for pair in BLOCKS:
            sizes.append(buf.tell())
            yield pair

    write_car(buf, ROOTS, blocks())
    assert sizes == sorted(set(sizes)) and len(sizes) == len(BLOCKS)  # each written before the next is asked


def test_read_is_lazy_and_yields_what_came_before_a_fault() -> None:
    bad = bytearray(VALID)
    bad[-1] ^= 1  # the last block's data
    roots, blocks = read_car(io.BytesIO(bytes(bad)))
    assert roots == ROOTS
    got = [next(blocks) for _ in range(len(BLOCKS) - 1)]
    assert got == BLOCKS[:-1]
    with pytest.raises(CarError, match="does not hash"):
        next(blocks)


def test_with_on_mismatch_a_tampered_block_is_reported_and_the_rest_still_read() -> None:
    first_cid, first = BLOCKS[0]
    at = VALID.index(first)
    bad = bytearray(VALID)
    bad[at + 5] ^= 1  # inside the first block's data: the frame stays intact
    reported: list[CarError] = []
    roots, blocks = read_car(io.BytesIO(bytes(bad)), on_mismatch=reported.append)
    assert list(blocks) == BLOCKS[1:] and roots == ROOTS
    assert [e.cid for e in reported] == [str(first_cid)] and "does not hash" in reported[0].message


class Trickle(io.RawIOBase):
    """A stream that hands back one byte per read, as a slow pipe may."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        chunk = self.data[self.pos : self.pos + min(1, n)]
        self.pos += len(chunk)
        return chunk


def test_short_reads_are_retried() -> None:
    roots, blocks = read_car(Trickle(VALID))  # type: ignore[arg-type]
    assert (roots, list(blocks)) == (ROOTS, BLOCKS)


@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 4), max_size=4),
       st.data())
def test_random_record_sets_round_trip(convs: dict[str, int], data: st.DataObject) -> None:
    heads, blocks = records(convs)
    roots = data.draw(st.lists(st.sampled_from(heads), unique=True) if heads else st.just([]))
    assert parse(car(roots, blocks)) == (roots, blocks)


@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.binary(min_size=32, max_size=32), max_size=3))
def test_arbitrary_blocks_round_trip(bodies: list[bytes], digests: list[bytes]) -> None:
    blocks = [(CID.of_record(b), b) for b in bodies]
    roots = [CID(b"\x01\x71\x12\x20" + d) for d in digests]  # roots need not be in the file
    assert parse(car(roots, blocks)) == (roots, blocks)


# ------------------------------------------------------------------ damaged files


def _parse_or_car_error(data: bytes) -> Blocks | None:
    try:
        return parse(data)[1]
    except CarError:
        return None


@given(st.integers(0, len(VALID) - 1), st.integers(1, 255))
def test_any_single_byte_change_is_a_car_error_or_a_valid_parse(at: int, xor: int) -> None:
    bad = bytearray(VALID)
    bad[at] ^= xor
    blocks = _parse_or_car_error(bytes(bad))
    for cid, body in blocks or ():
        assert hashlib.sha256(body).digest() == cid.digest


def test_every_position_flipped_three_ways_is_a_car_error_or_a_valid_parse() -> None:
    for at in range(len(VALID)):
        for xor in (0x01, 0x80, 0xFF):
            bad = bytearray(VALID)
            bad[at] ^= xor
            _parse_or_car_error(bytes(bad))  # anything but a CarError propagates and fails


@given(st.integers(0, len(VALID) - 1), st.binary(min_size=1, max_size=3))
def test_inserted_or_deleted_bytes_are_a_car_error_or_a_valid_parse(at: int, extra: bytes) -> None:
    for bad in (VALID[:at] + extra + VALID[at:], VALID[:at] + VALID[at + len(extra) :]):
        for cid, body in _parse_or_car_error(bad) or ():
            assert hashlib.sha256(body).digest() == cid.digest


def test_every_truncation_is_a_car_error_or_ends_on_a_block_boundary() -> None:
    ends, pos = {}, len(VALID) - sum(36 + len(b) + len(_varint(36 + len(b))) for _, b in BLOCKS)
    ends[pos] = 0
    for i, (_, body) in enumerate(BLOCKS):
        pos += len(_varint(36 + len(body))) + 36 + len(body)
        ends[pos] = i + 1
    for cut in range(len(VALID)):
        blocks = _parse_or_car_error(VALID[:cut])
        if cut in ends:
            assert blocks == BLOCKS[: ends[cut]]
        else:
            assert blocks is None, cut


def test_truncation_names_the_offset() -> None:
    fails(VALID[:1], "truncated", f"header needs {HEAD} bytes at byte 1", "ends at byte 1")
    fails(VALID[:2], "truncated", f"header needs {HEAD} bytes at byte 1", "ends at byte 2")
    fails(VALID[:10], "truncated", f"header needs {HEAD} bytes at byte 1", "ends at byte 10")
    first, vlen = 1 + HEAD, len(_varint(36 + len(BLOCKS[0][1])))
    assert vlen == 2
    fails(VALID[: first + 1], "truncated", f"block length varint at byte {first}", f"ends at byte {first + 1}")
    fails(VALID[: first + vlen + 3], "truncated", "block CID needs 36 bytes", f"byte {first + vlen}")
    fails(VALID[: first + vlen + 40], "truncated", "block data", f"at byte {first + vlen + 36}")


# ------------------------------------------------------------------ the header


def test_carv2_is_refused_by_name() -> None:
    pragma = bytes.fromhex("0aa16776657273696f6e02")
    fails(pragma + bytes(40), "CARv2 is not supported", "byte 1")
    fails(header({"roots": [], "version": 2}), "CARv2 is not supported")


@pytest.mark.parametrize(
    "value",
    [
        {"roots": [], "version": 1.0},
        {"roots": [], "version": True},
        {"roots": [], "version": "1"},
        {"roots": []},
        {"version": 1},
        {"roots": [], "version": 1, "extra": 0},
        {"roots": {}, "version": 1},
        {"roots": [b"\x01\x71"], "version": 1},
        {"roots": [CID.of_raw(b"x")], "version": 1},
        [1],
        "roots",
    ],
)
def test_the_header_must_be_exactly_roots_and_version_1(value: object) -> None:
    fails(header(value), "byte")


def test_the_header_must_be_canonical_dag_cbor() -> None:
    unsorted = b"\xa2" + encode("version") + b"\x01" + encode("roots") + b"\x80"
    fails(_varint(len(unsorted)) + unsorted, "not canonical DAG-CBOR", "byte 1")
    trailing = encode({"roots": [], "version": 1}) + b"\x00"
    fails(_varint(len(trailing)) + trailing, "byte 1")


def test_an_empty_header_is_refused() -> None:
    fails(b"\x00", "not a CAR file: its header length at byte 0 is 0")


@pytest.mark.parametrize(("data", "said"), [
    (b"", "not a CAR file: it is empty"),
    (b"hello, world\n" * 20, "not a CAR file: byte 1 is 0x65, where a CARv1 header (a DAG-CBOR map) starts"),
    (b'{"roots": []}\n', "not a CAR file: byte 1 is 0x22"),
    (b"\x89PNG\r\n\x1a\n" + bytes(64), "not a CAR file: byte 2 is 0x4e"),  # after a 2-byte length
    (b"\x7fELF\x02\x01\x01", "not a CAR file: byte 1 is 0x45"),
    (b"\x02\xff\xff", "not a CAR file: byte 1 is 0xff"),
    (b"\xff\xff\x07\x81", "not a CAR file: byte 3 is 0x81"),  # a length past max_header, then no map
    (header([1]), "not a CAR file"),
    (header("roots"), "not a CAR file"),
])
def test_bytes_that_cannot_open_a_carv1_are_not_a_car_file(data: bytes, said: str) -> None:
    """Whatever the length before it says, a CARv1 header is a DAG-CBOR map: any other first
    byte is no CAR at all, never a CAR "truncated" or too long (issue 27)."""
    err = fails(data, said)
    assert "truncated" not in str(err) and "max_header" not in str(err)


def test_a_car_cut_inside_its_header_is_truncated_not_foreign() -> None:
    for cut in range(1, 1 + HEAD):
        err = fails(VALID[:cut], "truncated CAR: header needs")
        assert "not a CAR" not in str(err)


def test_an_oversize_header_is_refused_without_reading_it() -> None:
    err = fails(_varint(1 << 30), "max_header=65536", "byte")
    assert "truncated" not in str(err)
    assert parse(VALID, max_header=HEAD) == (ROOTS, BLOCKS)
    fails(VALID, f"max_header={HEAD - 1}", max_header=HEAD - 1)


# ------------------------------------------------------------------ varints


def test_non_minimal_varints_are_refused() -> None:
    body = encode({"roots": [], "version": 1})
    fails(bytes([len(body) | 0x80, 0x00]) + body, "non-minimal header length varint at byte 0")
    good = block(b"\xa0")
    bad = bytes([good[0] | 0x80, 0x00]) + good[1:]
    fails(OK_HEADER + bad, f"non-minimal block length varint at byte {len(OK_HEADER)}")
    fails(b"\x80\x00", "non-minimal")


def test_runaway_varints_are_refused() -> None:
    fails(b"\xff" * 12, "longer than 9 bytes", "byte 0")
    fails(OK_HEADER + b"\xff" * 12, "longer than 9 bytes", f"byte {len(OK_HEADER)}")


def test_multi_byte_varints_decode() -> None:
    body = bytes(200)
    blocks = [(CID.of_record(body), body)]
    data = car([], blocks)
    assert data[len(OK_HEADER) : len(OK_HEADER) + 2] == _varint(236) == b"\xec\x01"
    assert parse(data) == ([], blocks)


# ------------------------------------------------------------------ blocks


def test_an_oversize_block_is_refused_without_reading_it() -> None:
    err = fails(OK_HEADER + _varint(1 << 40), f"max_block={MAX_BLOCK}", f"byte {len(OK_HEADER)}")
    assert "truncated" not in str(err)
    big = bytes(1 << 20)
    assert parse(car([], [(CID.of_record(big), big)])) == ([], [(CID.of_record(big), big)])
    fails(car([], BLOCKS[:1]), "max_block=100", max_block=100)


def test_write_refuses_what_read_would() -> None:
    with pytest.raises(CarError, match="max_block=100"):
        write_car(io.BytesIO(), [], BLOCKS[:1], max_block=100)
    with pytest.raises(CarError, match="max_header=10"):
        write_car(io.BytesIO(), ROOTS, [], max_header=10)


def test_a_hash_mismatch_names_the_cid_and_offset() -> None:
    cid = CID.of_record(b"\xa0")
    at = len(OK_HEADER)
    err = fails(OK_HEADER + section(bytes(cid), b"\xa1"), "does not hash", f"byte {at}", str(cid))
    assert err.cid == str(cid) and err.rule == "car"


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"\x12\x20" + bytes(34), "CIDv0"),
        (b"\x02\x71\x12\x20" + bytes(32), "CID version 2"),
        (b"\x01\x55\x12\x20" + hashlib.sha256(b"\xa0").digest(), "codec 0x55"),
        (b"\x01\x70\x12\x20" + hashlib.sha256(b"\xa0").digest(), "codec 0x70"),
        (b"\x01\x71\x13\x40" + bytes(32), "sha2-256"),
        (b"\x01\x71\x12\x1f" + bytes(32), "sha2-256"),
    ],
)
def test_only_cidv1_dag_cbor_sha2_256_blocks_are_read(raw: bytes, needle: str) -> None:
    fails(OK_HEADER + section(raw, b"\xa0"), needle, f"byte {len(OK_HEADER)}")


def test_a_section_shorter_than_a_cid_is_refused() -> None:
    fails(OK_HEADER + b"\x00", "shorter than a 36-byte CIDv1", f"byte {len(OK_HEADER)}")
    fails(OK_HEADER + _varint(35) + bytes(35), "shorter than")


def test_blocks_after_a_good_one_are_checked_too() -> None:
    good = block(b"\xa0")
    at = len(OK_HEADER) + len(good)
    fails(OK_HEADER + good + section(bytes(CID.of_record(b"\xa0")), b"\xf6"), f"byte {at}")


# ------------------------------------------------------------------ blocks that are not records


def _read_all(data: bytes) -> tuple[Blocks, list[OtherBlock], list[CarError]]:
    others: list[OtherBlock] = []
    tampered: list[CarError] = []
    _, blocks = read_car(io.BytesIO(data), on_other=others.append, on_mismatch=tampered.append)
    return list(blocks), others, tampered


def _cidv1(codec: int, code: int, digest: bytes) -> bytes:
    return bytes([1, codec, code, len(digest)]) + digest


ART = b"an artifact, raw bytes"
FOREIGN = [  # (section, what the reason says, checked, a link a record's refs can hold)
    (section(_cidv1(0x55, 0x12, hashlib.sha256(ART).digest()), ART), "codec 0x55", True, True),
    (section(b"\x12\x20" + hashlib.sha256(b"\x0a\x02pb").digest(), b"\x0a\x02pb"), "CIDv0", True, False),
    (section(_cidv1(0x55, 0x00, b"tiny"), b"tiny"), "identity hash", True, False),
    (section(_cidv1(0x71, 0x00, b"\xa0"), b"\xa0"), "identity hash", True, False),
    (section(_cidv1(0x55, 0x13, bytes(64)), b"sha2-512, unchecked"), "hash 0x13 not checked", False, False),
    (section(b"\x02\x71\x12\x20" + bytes(32), b"x"), "CID version 2", False, False),
    (section(b"\x01\x71\x12\x7f" + bytes(40), b""), "does not parse", False, False),
]


@pytest.mark.parametrize(("raw_section", "needle", "checked", "is_link"), FOREIGN)
def test_with_on_other_a_block_that_is_no_record_is_reported_and_the_rest_still_read(
    raw_section: bytes, needle: str, checked: bool, is_link: bool
) -> None:
    first, rest = block(BLOCKS[0][1]), b"".join(block(b) for _, b in BLOCKS[1:])
    data = header({"roots": ROOTS, "version": 1}) + first + raw_section + rest
    got, others, tampered = _read_all(data)
    assert got == BLOCKS and tampered == []
    (other,) = others
    assert other.at == len(header({"roots": ROOTS, "version": 1})) + len(first)
    assert needle in other.reason and other.checked == checked and (other.link is not None) == is_link
    assert other.size == len(raw_section) - len(_varint(other.size))
    fails(data, "byte")  # without on_other it stays a CarError


def test_other_blocks_are_named_as_multiformats_names_them() -> None:
    raw = _cidv1(0x55, 0x12, hashlib.sha256(ART).digest())
    v0 = b"\x12\x20" + hashlib.sha256(b"x").digest()
    _, others, _ = _read_all(OK_HEADER + section(raw, ART) + section(v0, b"x"))
    assert others[0].cid == str(CID.of_raw(ART)) and others[0].link == CID.of_raw(ART)
    assert others[1].cid == "QmRQ353oFNqt8zfZ9X1HgRUszwv9RkEEwmMZZkbkYEsybn"  # as npm multiformats prints it


def test_a_tampered_block_that_is_no_record_goes_to_on_mismatch() -> None:
    wrong = [section(_cidv1(0x55, 0x12, hashlib.sha256(ART).digest()), ART + b"!"),
             section(b"\x12\x20" + bytes(32), b"x"), section(_cidv1(0x55, 0x00, b"tiny"), b"tinY")]
    for bad in wrong:
        got, others, tampered = _read_all(OK_HEADER + bad + block(b"\xa0"))
        assert got == [(CID.of_record(b"\xa0"), b"\xa0")] and others == []
        assert len(tampered) == 1 and "does not hash" in tampered[0].message and tampered[0].cid


def test_with_on_other_an_empty_section_is_still_broken_framing() -> None:
    with pytest.raises(CarError, match="0 bytes is shorter"):
        _read_all(OK_HEADER + b"\x00" + block(b"\xa0"))
