"""CIDv1 content identifiers, restricted to the two forms convgraph accepts.

A record is named by CIDv1 / dag-cbor (0x71) / sha2-256; an artifact may also be raw (0x55).
Binary form: `0x01 codec 0x12 0x20 digest[32]` (all four varints are one byte); text form:
multibase base32 lower-case, prefix `b`, no padding. Ordering is by the binary form, which
is what `parents` sorts by. Invariant: a `CID` instance is always one of the two valid forms.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

from convgraph.errors import DecodeError

DAG_CBOR: Final = 0x71
RAW: Final = 0x55
_SHA2_256: Final = 0x12
_PREFIXES: Final = {
    bytes((0x01, DAG_CBOR, _SHA2_256, 0x20)): DAG_CBOR,
    bytes((0x01, RAW, _SHA2_256, 0x20)): RAW,
}
_LEN: Final = 36
_TEXT_LEN: Final = 59  # 'b' + ceil(36 * 8 / 5)


class CID(bytes):
    """An immutable, hashable, totally ordered CIDv1 over sha2-256.

    A `bytes` subclass holding the binary form, so hashing, equality and ordering (the binary
    order `parents` sorts by) run in C: ingest hashes a CID about fifteen times a record. A CID
    equals the plain bytes of its binary form; code telling a link from a byte string asks
    `isinstance(x, CID)` (or `type(x) is bytes`) first.
    """

    __slots__ = ()

    def __new__(cls, raw: bytes) -> CID:
        if type(raw) is not bytes:  # a bytearray's or memoryview's slice is no dict key
            raw = bytes(raw)
        if len(raw) != _LEN or raw[:4] not in _PREFIXES:
            raise DecodeError(f"not a CIDv1 dag-cbor/raw sha2-256 link: {raw[:8]!r}…")
        return super().__new__(cls, raw)

    @classmethod
    def of_record(cls, data: bytes) -> CID:
        """The CID naming these DAG-CBOR bytes."""
        return bytes.__new__(cls, b"\x01\x71\x12\x20" + hashlib.sha256(data).digest())

    @classmethod
    def of_raw(cls, data: bytes) -> CID:
        """The CID naming these bytes as a raw (0x55) block, e.g. an artifact."""
        return bytes.__new__(cls, b"\x01\x55\x12\x20" + hashlib.sha256(data).digest())

    @classmethod
    def parse(cls, text: str) -> CID:
        """Parse the base32 text form (`bafy…` / `bafk…`)."""
        if len(text) != _TEXT_LEN or not text.startswith("b") or text != text.lower():
            raise DecodeError(f"not a base32 CIDv1 text: {text[:80]!r}")
        try:
            raw = base64.b32decode(text[1:].upper() + "=" * (-(len(text) - 1) % 8))
        except ValueError as exc:
            raise DecodeError(f"not a base32 CIDv1 text: {text[:80]!r}") from exc
        cid = cls(raw)
        if str(cid) != text:  # reject non-zero padding bits: one CID, one text
            raise DecodeError(f"non-canonical CID text: {text!r}")
        return cid

    @classmethod
    def _trusted(cls, raw: bytes) -> CID:
        return bytes.__new__(cls, raw)

    @property
    def codec(self) -> int:
        """The multicodec of the named block: `DAG_CBOR` or `RAW`."""
        return self[1]

    @property
    def digest(self) -> bytes:
        """The sha2-256 digest of the named block."""
        return self[4:]  # a slice of a bytes subclass is plain bytes

    def __str__(self) -> str:
        return "b" + base64.b32encode(self).decode("ascii").lower().rstrip("=")

    def __repr__(self) -> str:
        return f"CID({self})"

    def __reduce__(self) -> tuple[type[CID], tuple[bytes]]:
        return (CID, (bytes(self),))
