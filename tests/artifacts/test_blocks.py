"""`Builder` and `split` (docs/format.md §17.2): however the bytes arrive, the same blocks and
the same CID; every block within `CHUNK_SIZE`; what `read` gives back is what went in."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convgraph.artifacts import (
    CHUNK_SIZE,
    MAX_CHUNKS,
    Builder,
    Manifest,
    decode_manifest,
    encode_manifest,
    read,
    split,
)
from convgraph.artifacts.blocks import is_artifact_cid
from convgraph.core.cid import CID, RAW
from convgraph.errors import ManifestError

# sizes around the chunk edges, random bytes (cheap: os.urandom), cut at random points
sizes = st.sampled_from([0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 2 * CHUNK_SIZE, 3 * CHUNK_SIZE + 7]) | \
    st.integers(0, 4 * CHUNK_SIZE)


@given(sizes, st.lists(st.integers(0, 2 * CHUNK_SIZE + 3), max_size=12), st.sampled_from([bytes, bytearray]))
def test_any_feeding_gives_the_blocks_of_split(size: int, cuts: list[int], kind: type) -> None:
    data = os.urandom(size)
    points = sorted({min(c, size) for c in cuts} | {0, size})
    builder = Builder()
    blocks = []
    for a, b in itertools.pairwise(points):
        blocks += builder.feed(kind(data[a:b]))
    cid, rest = builder.finish()
    assert (cid, blocks + rest) == split(data)
    assert all(len(b) <= CHUNK_SIZE for _, b in blocks + rest)
    leaves = [b for c, b in blocks + rest if c.codec == RAW]
    assert b"".join(leaves) == data and all(len(b) == CHUNK_SIZE for b in leaves[:-1])
    assert b"".join(read(cid, dict(blocks + rest).get)) == data


def test_a_buffer_fed_then_changed_does_not_change_the_blocks() -> None:
    buffer = bytearray(os.urandom(CHUNK_SIZE))
    builder = Builder()
    builder.feed(buffer)
    want = split(bytes(buffer) + b"x")
    buffer[:] = bytes(CHUNK_SIZE)  # a reader reusing its buffer, as readinto does
    assert builder.feed(b"x") + builder.finish()[1] == want[1]


def test_equal_chunks_share_one_block() -> None:
    data = bytes(3 * CHUNK_SIZE)  # three chunks of zeros, one of them the last
    cid, blocks = split(data)
    assert len({c for c, _ in blocks if c.codec == RAW}) == 1
    assert b"".join(read(cid, dict(blocks).get)) == data


@given(st.integers(2, MAX_CHUNKS))
def test_a_manifest_of_k_chunks_holds_exactly_the_sizes_k_chunks_can_hold(k: int) -> None:
    """§17.3 rule 7, for every k: `(k-1)·CHUNK_SIZE < size ≤ k·CHUNK_SIZE`, by encoder and decoder."""
    chunks = (CID.of_raw(b"x"),) * k
    for size in ((k - 1) * CHUNK_SIZE + 1, k * CHUNK_SIZE):
        assert decode_manifest(encode_manifest(Manifest(chunks, size))) == Manifest(chunks, size)
    for size in ((k - 1) * CHUNK_SIZE, k * CHUNK_SIZE + 1):
        with pytest.raises(ManifestError, match=f"^size {size} does not fit {k} chunks of {CHUNK_SIZE}$"):
            encode_manifest(Manifest(chunks, size))


def test_both_codecs_a_cid_can_have_name_possible_artifacts() -> None:
    """§17.6: a raw CID names a one-block artifact, a dag-cbor CID a manifest (a CID of another
    codec is not an artifact, and `CID` holds no other)."""
    assert is_artifact_cid(CID.of_raw(b"x")) and is_artifact_cid(CID.of_record(b"x"))
