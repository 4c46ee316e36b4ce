"""`GET /v1/artifacts/{cid}`: an artifact's bytes to a key that may read a conversation naming it.

A key may fetch an artifact (or, with `?block=1`, one block of it) when some conversation it
may read was *admitted* the block (`sync.artifact_scope.in_scope`: its bytes came here for
that conversation, or the server wrote a record of it naming them), found by one look-up. Every
other case, unknown, not held whole, or named only where the key may not read, is the same
404, so an answer never tells a guesser whether a CID exists. Invariant: no byte goes out
before the block it belongs to hashed to its CID.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from convgraph.artifacts.blocks import checked, decode_manifest, read
from convgraph.core.cid import CID, DAG_CBOR, RAW
from convgraph.errors import ConvgraphError
from convgraph.store.base import Store

RAW_TYPE = "application/vnd.ipld.raw"
MANIFEST_TYPE = "application/vnd.ipld.dag-cbor"
ARTIFACT_TYPE = "application/octet-stream"


def readable(store: Store, cid: CID, can_read: Callable[[str], bool]) -> bool:
    """Whether `cid` was admitted here for a conversation `can_read` allows (its bytes came
    for that conversation: `sync.artifact_scope.in_scope`), found by one look-up, whatever
    else the server holds."""
    return any(can_read(conv) for conv in sorted(store.admitting([cid])))


def block(store: Store, cid: CID) -> bytes | None:
    """One block, checked; None when not held or rotten (a rotten block is never served)."""
    return checked(cid, store.get_block(cid))


def whole(store: Store, cid: CID) -> tuple[int, Iterator[bytes]] | None:
    """The artifact's size and its bytes block by block (each checked as it is read), or None
    when a block of it is not held: a response is only begun for an artifact held whole."""
    root = block(store, cid)
    if root is None:
        return None
    if cid.codec == RAW:
        return len(root), iter((root,))
    try:
        manifest = decode_manifest(root)
    except ConvgraphError:
        return None
    if store.has_blocks(manifest.chunks) != set(manifest.chunks):
        return None
    return manifest.size, read(cid, store.get_block)


def media_type(cid: CID) -> str:
    return MANIFEST_TYPE if cid.codec == DAG_CBOR else RAW_TYPE


__all__ = ["ARTIFACT_TYPE", "block", "media_type", "readable", "whole"]
