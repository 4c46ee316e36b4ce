"""The artifact vectors (tests/vectors/artifacts.json, docs/format.md §17), three ways.

* the committed file is what the generator writes (nothing changed by accident);
* convgraph against every vector: `split` gives the CIDs and the manifest, `decode_manifest`
  refuses each invalid manifest with its error, `read` fails each bad read with its error;
* every CID and manifest recomputed independently, from the spec alone: `hashlib` for the
  digests, base32 for the text, and the manifest's CBOR written out by hand below (no
  convgraph code, no CBOR library).
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from convgraph import errors
from convgraph.artifacts import CHUNK_SIZE, decode_manifest, read, split
from convgraph.artifacts.blocks import MAX_CHUNKS, Manifest, encode_manifest
from convgraph.core.cid import CID
from vectors.loader import generator

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
DATA = json.loads((VECTORS / "artifacts.json").read_text("utf-8"))
CHUNK = 262_144  # the spec's number, not the module's


def pattern(n: int) -> bytes:
    return bytes(i % 251 for i in range(n))


# ---------------------------------------------------------------- the independent path


def cid_text(prefix: bytes, block: bytes) -> str:
    """CIDv1 (0x01), codec, sha2-256 multihash (0x12 0x20), base32 lower without padding."""
    raw = prefix + b"\x12\x20" + hashlib.sha256(block).digest()
    return "b" + base64.b32encode(b"\x01" + raw).decode("ascii").lower().rstrip("=")


def raw_cid_bytes(block: bytes) -> bytes:
    return b"\x01\x55\x12\x20" + hashlib.sha256(block).digest()


def head(major: int, n: int) -> bytes:
    """The shortest CBOR head (RFC 8949 §3, as DAG-CBOR requires)."""
    if n < 24:
        return bytes([major << 5 | n])
    for extra, width in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * width):
            return bytes([major << 5 | extra]) + n.to_bytes(width, "big")
    raise ValueError(n)


def manifest_by_hand(chunks: list[bytes], size: int) -> bytes:
    """{"v": 1, "size": n, "type": "convgraph/chunks", "chunks": [links]} in length-first key order."""
    links = b"".join(b"\xd8\x2a" + head(2, 37) + b"\x00" + raw_cid_bytes(c) for c in chunks)
    return (
        b"\xa4"
        + b"\x61v" + b"\x01"
        + b"\x64size" + head(0, size)
        + b"\x64type" + b"\x70convgraph/chunks"
        + b"\x66chunks" + head(4, len(chunks)) + links
    )


def independent(size: int) -> tuple[str, list[str], bytes | None]:
    """The artifact CID, the chunk CIDs and the manifest (if any) of `pattern(size)`, by the spec."""
    data = pattern(size)
    if size <= CHUNK:
        return cid_text(b"\x55", data), [cid_text(b"\x55", data)], None
    chunks = [data[i : i + CHUNK] for i in range(0, size, CHUNK)]
    manifest = manifest_by_hand(chunks, size)
    return cid_text(b"\x71", manifest), [cid_text(b"\x55", c) for c in chunks], manifest


# ---------------------------------------------------------------- the tests


def test_the_committed_file_is_what_the_generator_writes() -> None:
    gen = generator("generate_artifacts.py")
    assert gen.render(gen.build()) == (VECTORS / "artifacts.json").read_text("utf-8")


def test_the_vectors_cover_the_chunking_edges() -> None:
    assert DATA["chunk_size"] == CHUNK == CHUNK_SIZE and DATA["max_chunks"] == MAX_CHUNKS
    assert [a["size"] for a in DATA["artifacts"]] == [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7]


@pytest.mark.parametrize("case", DATA["artifacts"], ids=lambda c: c["name"])
def test_every_cid_matches_an_independent_computation(case: dict[str, Any]) -> None:
    cid, chunks, manifest = independent(case["size"])
    assert case["cid"] == cid
    assert [c["cid"] for c in case["chunks"]] == chunks
    assert [(c["offset"], c["length"]) for c in case["chunks"]] == [
        (i * CHUNK, min(CHUNK, case["size"] - i * CHUNK)) for i in range(len(chunks))
    ]
    assert case.get("manifest_hex") == (manifest.hex() if manifest is not None else None)


@pytest.mark.parametrize("case", DATA["artifacts"], ids=lambda c: c["name"])
def test_convgraph_gives_every_vector(case: dict[str, Any]) -> None:
    cid, blocks = split(pattern(case["size"]))
    assert str(cid) == case["cid"]
    held = dict(blocks)
    if "manifest_hex" in case:
        assert held[cid].hex() == case["manifest_hex"]
        manifest = decode_manifest(held[cid])
        assert [str(c) for c in manifest.chunks] == [c["cid"] for c in case["chunks"]]
        assert encode_manifest(manifest) == held[cid]
    assert b"".join(read(cid, held.get)) == pattern(case["size"])


@pytest.mark.parametrize("case", DATA["invalid_manifests"], ids=lambda c: c["name"])
def test_every_invalid_manifest_is_refused_with_its_error(case: dict[str, Any]) -> None:
    error = getattr(errors, case["error"])
    with pytest.raises(error):
        decode_manifest(bytes.fromhex(case["hex"]))


@pytest.mark.parametrize("case", DATA["bad_reads"], ids=lambda c: c["name"])
def test_every_bad_read_fails_with_its_error(case: dict[str, Any]) -> None:
    held = {CID.parse(c): bytes.fromhex(h) for c, h in case["blocks"].items()}
    with pytest.raises(getattr(errors, case["error"])):
        b"".join(read(CID.parse(case["cid"]), held.get))


def test_the_chunk_count_bounds() -> None:
    """Built rather than stored (a 4,097-chunk manifest is 168 KB of hex)."""
    leaf = CID.of_raw(b"x")
    most = encode_manifest(Manifest((leaf,) * MAX_CHUNKS, CHUNK * MAX_CHUNKS))
    assert len(most) <= CHUNK and decode_manifest(most).size == CHUNK * MAX_CHUNKS
    too_many = manifest_by_hand([b"x"] * (MAX_CHUNKS + 1), CHUNK * MAX_CHUNKS + 1)
    with pytest.raises(errors.ManifestError):
        decode_manifest(too_many)
    assert manifest_by_hand([b"x"] * MAX_CHUNKS, CHUNK * MAX_CHUNKS) == most
