"""CARv1 files (https://ipld.io/specs/transport/car/carv1/): a strict, streaming codec.

A file is `varint(len(header)) header` then, per block, `varint(len(cid) + len(data)) cid
data`; the header is the canonical DAG-CBOR map `{"roots": [links], "version": 1}` and the
varints are unsigned LEB128. Only CIDv1 / dag-cbor / sha2-256 blocks are yielded, each one
re-hashed; any other well-framed block (raw, CIDv0, identity hash, …) is handed to
`on_other` when given, and every fault is a `CarError` naming its byte offset. Invariant:
`read_car` yields a block only if its CID is the hash of its data, and reads back exactly
what `write_car` wrote under the same bounds.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Final

from convgraph.core.cid import CID, RAW
from convgraph.core.codec import decode, encode
from convgraph.errors import CarError, ConvgraphError
from convgraph.sync.varint import uvarint

MAX_BLOCK: Final = (1 << 20) + 4096  # a record is at most 1 MiB; a CID and headroom on top
MAX_HEADER: Final = 1 << 16
_CID_LEN: Final = 36
_PREFIX: Final = b"\x01\x71\x12\x20"  # CIDv1, dag-cbor, sha2-256, 32-byte digest
_MAX_VARINT: Final = 9  # 63 bits: far past any bound, short enough to refuse a runaway
_READ_CHUNK: Final = 1 << 20  # a lying length never makes us allocate more than what the file holds
_SHA2_256: Final = 0x12
_IDENTITY: Final = 0x00
_CIDV0: Final = b"\x12\x20"  # a bare sha2-256 multihash: CIDv0, dag-pb
_B58: Final = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


@dataclass(frozen=True)
class OtherBlock:
    """A well-framed block that is not CIDv1 / dag-cbor / sha2-256: never a record, so skipped.

    `cid` is its text form (base32 CIDv1, base58btc CIDv0) or, when the CID does not parse,
    the hex of the section's first bytes; `link` is set when a record's `refs` can name it
    (raw, sha2-256), and `checked` says whether its data was found to hash to its CID.
    """

    at: int
    cid: str
    reason: str
    size: int
    checked: bool = False
    link: CID | None = None
    data: bytes = b""  # the block's bytes when `link` is set: an artifact block, kept for import


def write_car(
    out: BinaryIO,
    roots: Sequence[CID],
    blocks: Iterable[tuple[CID, bytes]],
    *,
    max_block: int = MAX_BLOCK,
    max_header: int = MAX_HEADER,
) -> int:
    """Stream a CARv1 of `blocks` under `roots` to `out`; returns the bytes written.

    The caller vouches that each CID names its data. A header or block over the bounds
    raises `CarError` rather than write a file `read_car` with those bounds would refuse.
    """
    header = encode({"roots": list(roots), "version": 1})
    if len(header) > max_header:
        raise CarError(
            f"CAR header of {len(header)} bytes ({len(roots)} roots) exceeds max_header={max_header}"
        )
    written = 0
    for chunk in (uvarint(len(header)), header):
        out.write(chunk)
        written += len(chunk)
    for cid, data in blocks:
        raw = bytes(cid)
        size = len(raw) + len(data)
        if size > max_block:
            raise CarError(f"block {cid} of {size} bytes exceeds max_block={max_block}")
        for chunk in (uvarint(size), raw, data):  # no concatenation: a block is copied once
            out.write(chunk)
            written += len(chunk)
    return written


class _Source:
    """A byte stream that knows its offset, so every error can say where it happened."""

    def __init__(self, src: BinaryIO) -> None:
        self.src = src
        self.pos = 0

    def read(self, n: int, what: str) -> bytes:
        start, parts, got = self.pos, [], 0
        while got < n:  # a pipe or socket may hand back less than asked
            part = self.src.read(min(n - got, _READ_CHUNK))
            if not part:
                break
            parts.append(part)
            got += len(part)
        self.pos += got
        if got < n:
            raise CarError(
                f"truncated CAR: {what} needs {n} bytes at byte {start}, file ends at byte {self.pos}"
            )
        return b"".join(parts)

    def varint(self, what: str, *, eof_ok: bool = False) -> int | None:
        start, value = self.pos, 0
        for i in range(_MAX_VARINT):
            byte = self.src.read(1)
            if not byte:
                if i == 0 and eof_ok:
                    return None
                raise CarError(f"truncated CAR: {what} varint at byte {start} ends at byte {self.pos}")
            self.pos += 1
            b = byte[0]
            value |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                if b == 0 and i > 0:  # a trailing zero group: the same number, longer
                    raise CarError(f"non-minimal {what} varint at byte {start}")
                return value
        raise CarError(f"{what} varint at byte {start} is longer than {_MAX_VARINT} bytes")


def _header_start(src: _Source, size: int, max_header: int) -> bytes:
    """The header's first byte, read alone: a CARv1 header is a DAG-CBOR map (major type 5), so
    any other byte there shows the input is no CAR at all, not a CAR cut short or overlong."""
    at = src.pos
    first = src.src.read(1)
    src.pos += len(first)
    if first and first[0] >> 5 != 5:
        raise CarError(f"not a CAR file: byte {at} is 0x{first[0]:02x}, where a CARv1 header "
                       f"(a DAG-CBOR map) starts with 0xa0-0xbf")
    if size > max_header:
        raise CarError(f"CAR header of {size} bytes at byte {at} exceeds max_header={max_header}")
    return first


def _read_header(src: _Source, max_header: int) -> list[CID]:
    size = src.varint("header length", eof_ok=True)
    if size is None:
        raise CarError("not a CAR file: it is empty")
    if size == 0:
        raise CarError("not a CAR file: its header length at byte 0 is 0, and a CARv1 header is a map")
    at = src.pos
    first = _header_start(src, size, max_header)
    try:
        data = first + src.read(size - len(first), "header")
    except CarError:  # a CAR cut short: said of the whole header, as if read in one go
        raise CarError(f"truncated CAR: header needs {size} bytes at byte {at}, "
                       f"file ends at byte {src.pos}") from None
    try:
        header = decode(data)
    except ConvgraphError as exc:
        raise CarError(f"CAR header at byte {at} is not canonical DAG-CBOR: {exc}") from exc
    if not isinstance(header, dict):
        raise CarError(f"CAR header at byte {at} is not a map")
    version = header.get("version")
    if "version" in header and (type(version) is not int or version != 1):  # not True, not 1.0
        # a CARv2 file opens with the pragma {"version": 2} in this very position
        raise CarError(
            f"CAR version {version!r} at byte {at} is not supported: only CARv1 (CARv2 is not supported)"
        )
    roots = header.get("roots")
    if set(header) != {"roots", "version"} or not isinstance(roots, list):
        raise CarError(
            f"CAR header at byte {at} must hold exactly roots (a list) and version, not {sorted(header)}"
        )
    for root in roots:
        if not isinstance(root, CID) or bytes(root)[:4] != _PREFIX:
            raise CarError(f"CAR root {root!r} at byte {at} is not a CIDv1 dag-cbor sha2-256 link")
    return roots


def _check_prefix(raw: bytes, at: int) -> None:
    if raw[:2] == b"\x12\x20":
        raise CarError(f"block at byte {at} has a CIDv0: only CIDv1 is supported")
    if raw[0] != 0x01:
        raise CarError(f"block at byte {at} has CID version {raw[0]}: only CIDv1 is supported")
    if raw[1] != 0x71:
        raise CarError(f"block at byte {at} has codec 0x{raw[1]:02x}: only dag-cbor (0x71) is supported")
    if raw[:4] != _PREFIX:
        raise CarError(f"block at byte {at} is not hashed with sha2-256 (32 bytes): prefix {raw[:4].hex()}")


def _uvarint_at(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at `buf[pos:]` and the position after it; (-1, len) when it does not end."""
    value = 0
    for i in range(_MAX_VARINT):
        if pos + i >= len(buf):
            break
        value |= (buf[pos + i] & 0x7F) << (7 * i)
        if not buf[pos + i] & 0x80:
            return value, pos + i + 1
    return -1, len(buf)


def _other(section: bytes, at: int) -> tuple[OtherBlock, bool]:
    """Describe a block that is no record candidate; the flag is False when its hash is wrong."""
    if section[:2] == _CIDV0:
        fields, end = [0, 0x70, _SHA2_256, 32], 34
    else:
        fields, end = [], 0
        for _ in range(4):  # version, codec, multihash code, digest length
            value, end = _uvarint_at(section, end)
            fields.append(value)
        end += max(fields[3], 0)
    version, codec, code, length = fields
    if min(fields) < 0 or end > len(section) or version not in (0, 1):
        why = "its CID does not parse" if version in (0, 1) else f"CID version {version} is not supported"
        return OtherBlock(at, section[:_CID_LEN].hex(), why, len(section)), True
    raw, data = section[:end], section[end:]
    text = _base58(raw) if version == 0 else "b" + base64.b32encode(raw).decode().lower().rstrip("=")
    digest = raw[end - length :]
    checked = (code == _SHA2_256 and length == 32) or code == _IDENTITY
    ok = not checked or digest == (data if code == _IDENTITY else hashlib.sha256(data).digest())
    kind = "CIDv0" if version == 0 else "identity hash" if code == _IDENTITY else f"codec 0x{codec:02x}"
    why = f"{kind}: not a dag-cbor sha2-256 block" + ("" if checked else f" (hash 0x{code:02x} not checked)")
    link = CID(raw) if version == 1 and codec == RAW and checked and code == _SHA2_256 else None
    return OtherBlock(at, text, why, len(section), checked, link, data if link is not None else b""), ok


def _base58(raw: bytes) -> str:
    n, out = int.from_bytes(raw, "big"), ""
    while n:
        n, digit = divmod(n, 58)
        out = _B58[digit] + out
    return "1" * (len(raw) - len(raw.lstrip(b"\0"))) + out


def _blocks(
    src: _Source, max_block: int, on_mismatch: Callable[[CarError], None] | None,
    on_other: Callable[[OtherBlock], None] | None,
) -> Iterator[tuple[CID, bytes]]:
    while True:
        at = src.pos
        size = src.varint("block length", eof_ok=True)
        if size is None:
            return
        if size > max_block:  # refused before a byte of the body is read
            raise CarError(f"block at byte {at} of {size} bytes exceeds max_block={max_block}")
        if size < _CID_LEN and (on_other is None or size == 0):
            raise CarError(f"block at byte {at} of {size} bytes is shorter than a {_CID_LEN}-byte CIDv1")
        raw = src.read(min(size, _CID_LEN), "block CID")
        if raw[:4] != _PREFIX or len(raw) < _CID_LEN:
            if on_other is None:
                _check_prefix(raw, at)
            other, ok = _other(raw + src.read(size - len(raw), "block data"), at)
            if not ok:
                _mismatch(CarError(f"block at byte {at}: its data does not hash to its CID",
                                   cid=other.cid), on_mismatch)
            elif on_other is not None:
                on_other(other)
            continue
        data = src.read(size - _CID_LEN, "block data")
        cid = CID(raw)
        if hashlib.sha256(data).digest() != cid.digest:
            error = CarError(f"block at byte {at}: its data does not hash to its CID", cid=cid)
            _mismatch(error, on_mismatch)
            continue
        yield cid, data


def _mismatch(error: CarError, on_mismatch: Callable[[CarError], None] | None) -> None:
    if on_mismatch is None:
        raise error
    on_mismatch(error)  # the framing is intact: report this block and read on


def read_car(
    src: BinaryIO, *, max_block: int = MAX_BLOCK, max_header: int = MAX_HEADER,
    on_mismatch: Callable[[CarError], None] | None = None,
    on_other: Callable[[OtherBlock], None] | None = None,
) -> tuple[list[CID], Iterator[tuple[CID, bytes]]]:
    """Read the header of a CARv1 now and return its roots and a lazy iterator of blocks.

    The iterator raises `CarError` at the first fault, after yielding every block before it,
    so a caller can keep what was good; `max_block` bounds `len(cid) + len(data)`. With
    `on_mismatch`, a block whose data does not hash to its CID is handed to it and skipped
    instead, and reading goes on: one tampered block does not hide the rest. With
    `on_other`, so is every well-framed block that is not CIDv1 / dag-cbor / sha2-256
    (its hash checked when it is sha2-256 or identity); without it, such a block is a
    `CarError`. Only a broken frame always ends the reading.
    """
    source = _Source(src)
    roots = _read_header(source, max_header)
    return roots, _blocks(source, max_block, on_mismatch, on_other)
