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
from convgraph.core import codec
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


# ---------------------------------------------------------------- what each error says (§17.3, §17.6, §17.7)

RULE_1 = "not canonical DAG-CBOR: "
MESSAGES = {  # the rule of §17.3 each invalid manifest breaks, in the decoder's words
    "extra_key": "a manifest is a map with exactly chunks, size, type and v",
    "missing_key": "a manifest is a map with exactly chunks, size, type and v",
    "not_a_map": "a manifest is a map with exactly chunks, size, type and v",
    "v_2": "v must be 1 and type 'convgraph/chunks'",
    "v_true": "v must be 1 and type 'convgraph/chunks'",
    "v_float": "v must be 1 and type 'convgraph/chunks'",
    "other_type": "v must be 1 and type 'convgraph/chunks'",
    "size_text": "chunks must be an array of links and size an integer",
    "size_float": "chunks must be an array of links and size an integer",
    "chunk_bytes": "chunks must be an array of links and size an integer",
    "chunks_map": "chunks must be an array of links and size an integer",
    "one_chunk": "a manifest lists 2 to 4096 chunks, not 1",
    "no_chunks": "a manifest lists 2 to 4096 chunks, not 0",
    "dag_cbor_chunk": "every chunk must be a raw (0x55) link",
    "size_fits_one_chunk": "size 262144 does not fit 2 chunks of 262144",
    "size_over_the_chunks": "size 524289 does not fit 2 chunks of 262144",
    "size_negative": "size -1 does not fit 2 chunks of 262144",
}


@pytest.mark.parametrize("case", DATA["invalid_manifests"], ids=lambda c: c["name"])
def test_every_manifest_error_names_the_block_and_the_rule_it_broke(case: dict[str, Any]) -> None:
    """§17.3: the error names the block's dag-cbor CID; §17.7: `str()` ends with it."""
    block = bytes.fromhex(case["hex"])
    with pytest.raises(errors.ManifestError) as caught:
        decode_manifest(block)
    cid = cid_text(b"\x71", block)
    assert caught.value.cid == cid and str(caught.value) == f"{caught.value.message} (artifact {cid})"
    if case["well_formed_dag_cbor"]:
        assert caught.value.message == MESSAGES[case["name"]]
    else:  # rule 1: the codec's own refusal follows
        assert caught.value.message.startswith(RULE_1) and len(caught.value.message) > len(RULE_1)


@pytest.mark.parametrize("case", DATA["invalid_manifests"], ids=lambda c: c["name"])
def test_well_formed_dag_cbor_says_whether_a_strict_generic_decoder_takes_the_bytes(case: dict[str, Any]) -> None:
    """Else a vector meant for rules 2-7 would only test rule 1 (as `extra_key` once did: its
    fifth key was out of length-first order)."""
    block = bytes.fromhex(case["hex"])
    if case["well_formed_dag_cbor"]:
        codec.decode(block)
    else:
        with pytest.raises(errors.DecodeError):
            codec.decode(block)


def test_every_invalid_manifest_has_its_message_here() -> None:
    assert {c["name"] for c in DATA["invalid_manifests"] if c["well_formed_dag_cbor"]} == set(MESSAGES)


BAD_READS = {  # §17.6: which block each failure names, and what it says of it
    "rotten_leaf": (0, "block bytes do not hash to their CID"),
    "short_chunk": (1, "chunk 0 of {root} has 1 bytes"),
    "missing_chunk": ("bafkreiayvq7hgq7qc2eqyuiosp4tkjqrnhm6h5lfinsctaypv4etj5hy4q", "artifact block not held"),
    "missing_root": ("root", "artifact block not held"),
}


@pytest.mark.parametrize("case", DATA["bad_reads"], ids=lambda c: c["name"])
def test_every_bad_read_names_the_block_that_failed(case: dict[str, Any]) -> None:
    held = {CID.parse(c): bytes.fromhex(h) for c, h in case["blocks"].items()}
    which, message = BAD_READS[case["name"]]
    named = case["cid"] if which == "root" else which if isinstance(which, str) else list(case["blocks"])[which]
    with pytest.raises(errors.ArtifactError) as caught:
        b"".join(read(CID.parse(case["cid"]), held.get))
    assert caught.value.cid == named
    assert str(caught.value) == f"{message.format(root=case['cid'])} (artifact {named})"
