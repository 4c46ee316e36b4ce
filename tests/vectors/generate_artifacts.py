"""Generate the artifact vectors (`artifacts.json`, docs/format.md §17): CIDs and manifests of
artifacts at the chunking edges, manifests that must be refused, and reads that must fail.

Run by hand from the repository root after a deliberate change to §17:

    .venv/bin/python tests/vectors/generate_artifacts.py           # rewrite artifacts.json
    .venv/bin/python tests/vectors/generate_artifacts.py --check   # exit 1 if it would change

Every input is fixed (the bytes of an artifact of size n are `bytes(i % 251 for i in
range(n))`), so the output is byte-identical unless §17 changed; `tests/artifacts/
test_artifact_vectors.py` checks that, checks convgraph against every vector, and recomputes
every CID and manifest with hashlib and a few lines of hand-written CBOR.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

from convgraph.artifacts.blocks import CHUNK_SIZE, MAX_CHUNKS, Manifest, encode_manifest, split
from convgraph.core.cid import CID

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path
import writer

HERE = Path(__file__).resolve().parent
ARTIFACTS_FILE = HERE / "artifacts.json"
render = writer.render
SIZES = [("empty", 0), ("one_byte", 1), ("chunk_minus_1", CHUNK_SIZE - 1), ("chunk", CHUNK_SIZE),
         ("chunk_plus_1", CHUNK_SIZE + 1), ("three_chunks_plus_7", 3 * CHUNK_SIZE + 7)]

DESCRIPTION = [
    "Artifact vectors for docs/format.md section 17. All binary values are lower-case hex; CIDs are text.",
    "artifacts[]: {name, size, cid, chunks, manifest_hex?}: the artifact of `size` bytes",
    "bytes(i % 251 for i in range(size)) has CID `cid`; `chunks` lists every raw block in order as",
    "{cid, offset, length}; above one chunk `manifest_hex` is the manifest block and `cid` its CID.",
    "invalid_manifests[]: {name, description, hex, error}: decoding `hex` as a manifest must fail with",
    "`error` (the class name in convgraph.errors); `well_formed_dag_cbor` says whether a strict generic",
    "DAG-CBOR decoder accepts the bytes at all.",
    "bad_reads[]: {name, description, cid, blocks: {cid: hex}, error}: reading artifact `cid` from a store",
    "holding exactly `blocks` must fail with `error`.",
]


def pattern(n: int) -> bytes:
    """The fixed bytes of the vector artifact of size `n`."""
    return bytes(i % 251 for i in range(n))


def _artifact(name: str, size: int) -> dict[str, Any]:
    data = pattern(size)
    cid, blocks = split(data)
    out: dict[str, Any] = {"name": name, "size": size, "cid": str(cid)}
    raws = blocks if size <= CHUNK_SIZE else blocks[:-1]
    out["chunks"] = [{"cid": str(c), "offset": i * CHUNK_SIZE, "length": len(b)} for i, (c, b) in enumerate(raws)]
    if size > CHUNK_SIZE:
        out["manifest_hex"] = blocks[-1][1].hex()
    return out


def _head(major: int, n: int, width: int | None = None) -> bytes:
    """A CBOR head; `width` forces a longer argument than the shortest (non-canonical)."""
    sizes = {0: 0, 1: 1, 2: 2, 4: 4, 8: 8}
    if width is None:
        width = 0 if n < 24 else 1 if n < 256 else 2 if n < 65_536 else 4 if n < 2**32 else 8
    extra = {0: n, 1: 24, 2: 25, 4: 26, 8: 27}[width]
    return bytes([major << 5 | extra]) + (n.to_bytes(sizes[width], "big") if width else b"")


def _text(s: str) -> bytes:
    return _head(3, len(s.encode())) + s.encode()


def _link(cid: CID) -> bytes:
    return b"\xd8\x2a" + _head(2, len(bytes(cid)) + 1) + b"\x00" + bytes(cid)


def _manifest(entries: list[tuple[str, bytes]]) -> bytes:
    """A map of already-encoded values, keys in the order given (so it can be wrong)."""
    return _head(5, len(entries)) + b"".join(_text(k) + v for k, v in entries)


def _chunks(cids: list[CID]) -> bytes:
    return _head(4, len(cids)) + b"".join(_link(c) for c in cids)


C1, C2 = CID.of_raw(pattern(CHUNK_SIZE)), CID.of_raw(b"\x00")
TYPE = _text("convgraph/chunks")


def _invalid() -> list[dict[str, Any]]:
    good = [("v", b"\x01"), ("size", _head(0, CHUNK_SIZE + 1)), ("type", TYPE), ("chunks", _chunks([C1, C2]))]
    assert _manifest(good) == encode_manifest(Manifest((C1, C2), CHUNK_SIZE + 1))

    def but(**changes: bytes) -> bytes:
        return _manifest([(k, changes.get(k, v)) for k, v in good])

    cases: list[tuple[str, str, bytes, bool]] = [
        ("keys_out_of_order", "the keys in bytewise instead of length-first order", _manifest(sorted(good)), False),
        ("size_long_head", "size written with an 8-byte argument", but(size=_head(0, CHUNK_SIZE + 1, 8)), False),
        ("trailing_byte", "a valid manifest followed by one more byte", _manifest(good) + b"\x00", False),
        ("extra_key", "a fifth key, \"name\"", _manifest([good[0], ("name", _text("x")), *good[1:]]), True),
        ("missing_key", "no \"v\"", _manifest(good[1:]), True),
        ("not_a_map", "the chunks array alone", _chunks([C1, C2]), True),
        ("v_2", "v is 2", but(v=b"\x02"), True),
        ("v_true", "v is the simple value true", but(v=b"\xf5"), True),
        ("v_float", "v is the float 1.0", but(v=b"\xfb" + struct.pack(">d", 1.0)), True),
        ("other_type", "type is \"convgraph/chunk\"", but(type=_text("convgraph/chunk")), True),
        ("one_chunk", "a single chunk (an artifact of one chunk is its raw block)",
         but(chunks=_chunks([C1]), size=_head(0, CHUNK_SIZE)), True),
        ("no_chunks", "an empty chunks array, size 0", but(chunks=_chunks([]), size=_head(0, 0)), True),
        ("size_fits_one_chunk", "two chunks but size = CHUNK_SIZE", but(size=_head(0, CHUNK_SIZE)), True),
        ("size_over_the_chunks", "two chunks but size = 2 * CHUNK_SIZE + 1", but(size=_head(0, 2 * CHUNK_SIZE + 1)), True),
        ("size_negative", "size is -1", but(size=_head(1, 0)), True),
        ("size_text", "size is the text \"262145\"", but(size=_text(str(CHUNK_SIZE + 1))), True),
        ("size_float", "size is the float 262145.0", but(size=b"\xfb" + struct.pack(">d", CHUNK_SIZE + 1.0)), True),
        ("dag_cbor_chunk", "the second chunk is a dag-cbor (0x71) link",
         but(chunks=_chunks([C1, CID.of_record(b"\x00")])), True),
        ("chunk_bytes", "a chunk given as a byte string instead of a link",
         but(chunks=_head(4, 2) + _link(C1) + _head(2, 36) + bytes(C2)), True),
        ("chunks_map", "chunks is a map", but(chunks=b"\xa0"), True),
    ]
    return [{"name": n, "description": d, "hex": h.hex(), "error": "ManifestError", "well_formed_dag_cbor": w}
            for n, d, h, w in cases]


def _bad_reads() -> list[dict[str, Any]]:
    short = Manifest((CID.of_raw(b"a"), CID.of_raw(b"b")), CHUNK_SIZE + 1)
    short_block = encode_manifest(short)
    rotten = pattern(10)
    held = split(pattern(CHUNK_SIZE + 1))
    return [
        {"name": "rotten_leaf", "description": "a raw block whose bytes hash to another CID",
         "cid": str(CID.of_raw(rotten)), "blocks": {str(CID.of_raw(rotten)): (b"X" + rotten[1:]).hex()},
         "error": "ArtifactCorruptError"},
        {"name": "short_chunk", "description": "a valid manifest whose first chunk is 1 byte, not CHUNK_SIZE",
         "cid": str(CID.of_record(short_block)),
         "blocks": {str(CID.of_record(short_block)): short_block.hex(), **{str(c): d.hex() for c, d in
                    ((short.chunks[0], b"a"), (short.chunks[1], b"b"))}},
         "error": "ArtifactCorruptError"},
        {"name": "missing_chunk", "description": "a manifest held without its last chunk",
         "cid": str(held[0]), "blocks": {str(c): d.hex() for c, d in held[1][:1] + held[1][2:]},
         "error": "ArtifactMissingError"},
        {"name": "missing_root", "description": "nothing held", "cid": str(CID.of_raw(b"")), "blocks": {},
         "error": "ArtifactMissingError"},
    ]


def build() -> dict[str, Any]:
    return {
        "description": DESCRIPTION,
        "chunk_size": CHUNK_SIZE,
        "max_chunks": MAX_CHUNKS,
        "artifacts": [_artifact(n, s) for n, s in SIZES],
        "invalid_manifests": _invalid(),
        "bad_reads": _bad_reads(),
    }


def main(argv: list[str] | None = None) -> int:
    return writer.main(__doc__, build, ARTIFACTS_FILE, "generate_artifacts.py", argv)


if __name__ == "__main__":
    sys.exit(main())
