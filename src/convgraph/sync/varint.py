"""Unsigned LEB128 varints, the length prefix of the sync messages and of CAR files."""

from __future__ import annotations


def uvarint(n: int) -> bytes:
    """`n` (non-negative) in the minimal unsigned LEB128 form. Precondition: `n >= 0`."""
    if n < 0:
        raise ValueError(f"a varint cannot hold {n}")
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
