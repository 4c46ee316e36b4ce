"""A replica's artifacts: put streams bytes into blocks, get reads them back checked.

Invariant: `put` stores an artifact whole or not at all (one transaction), and nothing read
back is returned before its block hashed to the CID it was asked under.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from convgraph.artifacts.blocks import CHUNK_SIZE, Builder, decode_manifest, read, verify_block
from convgraph.artifacts.links import artifact_links
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.core.record import Record
from convgraph.errors import ArtifactError, ArtifactMissingError, ConvgraphError
from convgraph.store.base import Store

Source = bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO


def put(store: Store, source: Source, *, limit: int) -> CID:
    """Store `source` (bytes, a path, or a binary file read to its end) as an artifact."""
    if isinstance(source, CID):  # a CID is bytes too: storing its 36 bytes is never what was meant
        raise TypeError(f"put stores content; {source} is already an artifact's name")
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        return _put_stream(store, (data[i : i + CHUNK_SIZE] for i in range(0, len(data), CHUNK_SIZE)), limit)
    # a source failing half way (a disk, a network mount) rolls back like one too large
    name = Path(source) if isinstance(source, str | os.PathLike) else getattr(source, "name", "the stream")
    try:
        if isinstance(source, str | os.PathLike):
            with Path(source).open("rb") as f:
                return _put_stream(store, _pieces(f), limit)
        return _put_stream(store, _pieces(source), limit)
    except OSError as exc:
        raise ArtifactError(f"cannot read {name}: {exc.strerror or exc}") from exc


def _pieces(f: BinaryIO) -> Iterator[bytes]:
    while piece := f.read(CHUNK_SIZE):
        yield piece


def _put_stream(store: Store, pieces: Iterator[bytes], limit: int) -> CID:
    builder = Builder(limit)
    with store.transaction():  # a file too large, or unreadable half-way, leaves nothing
        for piece in pieces:
            if blocks := builder.feed(piece):
                store.put_blocks(blocks)
        cid, blocks = builder.finish()
        store.put_blocks(blocks)
    return cid


def open_artifact(store: Store, cid: CID) -> Iterator[bytes]:
    """The artifact's bytes block by block, each checked (`artifacts.blocks.read`)."""
    return read(cid, store.get_block)


def get(store: Store, cid: CID) -> bytes:
    """The artifact's bytes, whole."""
    return b"".join(open_artifact(store, cid))


def spans(store: Store, conv: str) -> set[CID]:
    """The blocks `conv`'s artifacts span: what its records name that is no record held here,
    and the chunks of the named manifests held (their links, `Store.chunks_of`: no manifest
    is decoded)."""
    refs = store.artifact_refs(conv)
    named = refs - set(store.metas(refs))
    return named.union(*store.chunks_of(c for c in named if c.codec == DAG_CBOR).values())


def missing(store: Store, conv: str) -> list[CID]:
    """The blocks `conv`'s artifacts span that are not held here, in binary CID order."""
    blocks = spans(store, conv)
    return sorted(blocks - store.has_blocks(blocks))


def admit_written(store: Store, records: Iterable[Record]) -> None:
    """Admit, for their conversations, the held blocks that records this replica just wrote
    name, with the held chunks of the named manifests: the writer had the bytes."""
    for record in records:
        links = artifact_links(record)
        if not links:
            continue
        held = store.has_blocks(links)
        chunks = set().union(*store.chunks_of(c for c in held if c.codec == DAG_CBOR).values())
        if held:
            store.admit_blocks(record.conv, held | store.has_blocks(chunks))


def verify_blocks(store: Store) -> tuple[int, list[tuple[CID, ConvgraphError]]]:
    """Re-hash every held block, and decode each under a dag-cbor CID as a manifest: how many
    were checked, and the rotten ones (`ArtifactCorruptError`, `ManifestError`)."""
    checked, failures = 0, []
    for cid in store.block_cids():
        data = store.get_block(cid)
        if data is None:
            continue  # gone since it was listed
        checked += 1
        try:
            verify_block(cid, data)
            if cid.codec == DAG_CBOR:  # the only dag-cbor blocks are manifests (records are not blocks)
                decode_manifest(data)
        except ConvgraphError as exc:
            failures.append((cid, exc))
    return checked, failures


__all__ = ["ArtifactMissingError", "Source", "get", "missing", "open_artifact", "put", "verify_blocks"]
