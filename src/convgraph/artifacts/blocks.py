"""Artifacts as blocks: raw CIDv1 leaves and, above one block, a DAG-CBOR chunk manifest.

An artifact of at most `CHUNK_SIZE` bytes (the empty one included) is one raw block, named
`CID.of_raw(bytes)`. A larger one is cut into `CHUNK_SIZE` chunks, each a raw block, and named
by its **manifest**: the canonical DAG-CBOR map `{"chunks": [link…], "size": n, "type":
"convgraph/chunks", "v": 1}` (docs/format.md §17). Invariant: one byte string has exactly one
artifact CID, and every block, manifest included, is at most `CHUNK_SIZE` bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from convgraph.core import codec
from convgraph.core.cid import CID, DAG_CBOR, RAW
from convgraph.errors import (
    ArtifactCorruptError,
    ArtifactMissingError,
    ArtifactTooLargeError,
    DecodeError,
    ManifestError,
)

CHUNK_SIZE: Final = 262_144
"""256 KiB: Kubo's default chunk, so an artifact of one block has the CID `ipfs add
--cid-version 1` gives it."""

MAX_CHUNKS: Final = 4_096
"""A manifest lists at most this many chunks (about 168 KB, under one block)."""

MAX_ARTIFACT_SIZE: Final = CHUNK_SIZE * MAX_CHUNKS
"""1 GiB: the largest artifact one manifest can name."""

MANIFEST_TYPE: Final = "convgraph/chunks"
_KEYS: Final = frozenset({"chunks", "size", "type", "v"})


@dataclass(frozen=True, slots=True)
class Manifest:
    """The chunks of an artifact larger than one block, in order, and its total size."""

    chunks: tuple[CID, ...]
    size: int

    def chunk_length(self, i: int) -> int:
        """The exact length chunk `i` must have: `CHUNK_SIZE`, except for the last."""
        return CHUNK_SIZE if i < len(self.chunks) - 1 else self.size - CHUNK_SIZE * (len(self.chunks) - 1)


def encode_manifest(manifest: Manifest) -> bytes:
    """The manifest's canonical DAG-CBOR bytes; `ManifestError` when it breaks a §17 rule."""
    _check(manifest)
    value = {"chunks": list(manifest.chunks), "size": manifest.size, "type": MANIFEST_TYPE, "v": 1}
    return codec.encode(value)


def decode_manifest(data: bytes) -> Manifest:
    """Read a manifest block strictly: canonical DAG-CBOR with exactly the §17 keys and values."""
    try:
        value: Any = codec.decode(data)
    except DecodeError as exc:
        raise ManifestError(f"not canonical DAG-CBOR: {exc}", cid=str(CID.of_record(data))) from exc
    cid = str(CID.of_record(data))
    if type(value) is not dict or set(value) != _KEYS:
        raise ManifestError("a manifest is a map with exactly chunks, size, type and v", cid=cid)
    # `type(...) is int`: true and 1.0 equal 1 in Python, and would give one artifact two CIDs
    if type(value["v"]) is not int or value["v"] != 1 or value["type"] != MANIFEST_TYPE:
        raise ManifestError(f"v must be 1 and type {MANIFEST_TYPE!r}", cid=cid)
    chunks, size = value["chunks"], value["size"]
    if type(chunks) is not list or not all(isinstance(c, CID) for c in chunks) or type(size) is not int:
        raise ManifestError("chunks must be an array of links and size an integer", cid=cid)
    manifest = Manifest(tuple(chunks), size)
    _check(manifest, cid)
    return manifest


def _check(m: Manifest, cid: str | None = None) -> None:
    n = len(m.chunks)
    if not 2 <= n <= MAX_CHUNKS:
        raise ManifestError(f"a manifest lists 2 to {MAX_CHUNKS} chunks, not {n}", cid=cid)
    if any(c.codec != RAW for c in m.chunks):
        raise ManifestError("every chunk must be a raw (0x55) link", cid=cid)
    if not CHUNK_SIZE * (n - 1) < m.size <= CHUNK_SIZE * n:
        raise ManifestError(f"size {m.size} does not fit {n} chunks of {CHUNK_SIZE}", cid=cid)


def verify_block(cid: CID, data: bytes) -> None:
    """Raise `ArtifactCorruptError` unless `data` hashes to `cid` (raw, or a manifest's dag-cbor)."""
    if checked(cid, data) is None:
        raise ArtifactCorruptError("block bytes do not hash to their CID", cid=str(cid))


def checked(cid: CID, data: bytes | None) -> bytes | None:
    """`data` when it hashes to `cid`, else None: a block not held and one that rotted are
    both absent to a reader that must never pass on wrong bytes."""
    if data is None:
        return None
    made = CID.of_raw(data) if cid.codec == RAW else CID.of_record(data)
    return data if made == cid else None


class Builder:
    """Cuts a stream into blocks as it arrives: at most one chunk is held at a time.

    `feed` returns the blocks it completed, to store before feeding more; `finish` the last
    ones and the artifact's CID. Feeding past `limit` bytes raises `ArtifactTooLargeError`.
    """

    def __init__(self, limit: int = MAX_ARTIFACT_SIZE) -> None:
        self._limit = min(limit, MAX_ARTIFACT_SIZE)
        self._full: bytes | None = None  # a whole chunk, held until a byte after it arrives
        self._buffer = bytearray()  # a partial chunk
        self._chunks: list[CID] = []
        self.size = 0

    def feed(self, data: bytes) -> list[tuple[CID, bytes]]:
        self.size += len(data)
        if self.size > self._limit:
            raise ArtifactTooLargeError(f"artifact over the limit of {self._limit} bytes", size=self.size)
        out: list[tuple[CID, bytes]] = []
        view = memoryview(data)
        while view:
            if self._full is not None:  # more bytes follow it: it is not the last chunk
                out += self._emit(self._full)
                self._full = None
            if not self._buffer and len(view) >= CHUNK_SIZE:  # aligned: one copy at most
                # none for a read of exactly one chunk (immutable bytes: kept as they are)
                whole = len(view) == len(data) == CHUNK_SIZE and isinstance(data, bytes)
                self._full = data if whole else bytes(view[:CHUNK_SIZE])
                view = view[CHUNK_SIZE:]
                continue
            take = CHUNK_SIZE - len(self._buffer)
            self._buffer += view[:take]
            view = view[take:]
            if len(self._buffer) == CHUNK_SIZE:
                self._full = bytes(self._buffer)
                self._buffer.clear()
        return out

    def finish(self) -> tuple[CID, list[tuple[CID, bytes]]]:
        last = self._full if self._full is not None else bytes(self._buffer)
        self._full = None
        self._buffer.clear()
        if not self._chunks:  # one block: the artifact is its raw leaf
            cid = CID.of_raw(last)
            return cid, [(cid, last)]
        out = self._emit(last)
        block = encode_manifest(Manifest(tuple(self._chunks), self.size))
        cid = CID.of_record(block)
        return cid, [*out, (cid, block)]

    def _emit(self, chunk: bytes) -> list[tuple[CID, bytes]]:
        # `feed` cuts only while more bytes follow, so an emitted chunk is never the only one
        cid = CID.of_raw(chunk)
        self._chunks.append(cid)
        return [(cid, chunk)]


def split(data: bytes, limit: int = MAX_ARTIFACT_SIZE) -> tuple[CID, list[tuple[CID, bytes]]]:
    """The artifact CID of `data` and every block that stores it (manifest last)."""
    builder = Builder(limit)
    blocks = [b for i in range(0, len(data), CHUNK_SIZE) for b in builder.feed(data[i : i + CHUNK_SIZE])]
    cid, rest = builder.finish()
    return cid, blocks + rest


def is_artifact_cid(cid: CID) -> bool:
    """Whether `cid` can name an artifact at all: a raw leaf or a dag-cbor manifest."""
    return cid.codec in (RAW, DAG_CBOR)


def read(cid: CID, get: Callable[[CID], bytes | None]) -> Iterator[bytes]:
    """The artifact's bytes, block by block, each checked against its CID as it is read.

    Raises `ArtifactMissingError` naming the first block `get` does not have, and
    `ArtifactCorruptError` for a block that hashes differently or a chunk of the wrong length.
    """
    root = _block(cid, get)
    if cid.codec == RAW:
        yield root
        return
    manifest = decode_manifest(root)
    for i, chunk in enumerate(manifest.chunks):
        data = _block(chunk, get)
        if len(data) != manifest.chunk_length(i):
            raise ArtifactCorruptError(f"chunk {i} of {cid} has {len(data)} bytes", cid=str(chunk))
        yield data


def _block(cid: CID, get: Callable[[CID], bytes | None]) -> bytes:
    data = get(cid)
    if data is None:
        raise ArtifactMissingError("artifact block not held", cid=str(cid))
    verify_block(cid, data)
    return data
