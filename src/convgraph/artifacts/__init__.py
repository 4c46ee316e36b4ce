"""Artifacts: the files a conversation speaks about, stored as content-addressed blocks."""

from convgraph.artifacts.blocks import (
    CHUNK_SIZE,
    MAX_ARTIFACT_SIZE,
    Builder,
    Manifest,
    decode_manifest,
    encode_manifest,
    read,
    split,
    verify_block,
)
from convgraph.artifacts.links import artifact_links

__all__ = [
    "CHUNK_SIZE", "MAX_ARTIFACT_SIZE", "Builder", "Manifest", "artifact_links", "decode_manifest",
    "encode_manifest", "read", "split", "verify_block",
]
