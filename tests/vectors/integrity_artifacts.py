"""The integrity vectors of the artifact kinds (docs/integrity.md §6.4): `false_patch` and
`false_snapshot` bundles that prove, that do not, and that are not bundles; and the records
and blocks they use. Loaded by `generate_integrity.py`, whose output these append to.
"""

from __future__ import annotations

from typing import Final

from convgraph.artifacts.blocks import CHUNK_SIZE
from convgraph.artifacts.diff import make_unified_diff
from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import Record, sign_record
from convgraph.integrity.builders import artifact_claim_finding
from convgraph.integrity.evidence import encode_bundle

ALICE = SigningKey(bytes([7]) * 32)
CONV = "c"
T = 1_700_000_000_000
OLD: Final = b"def f():\n    return 1\n"
NEW: Final = b"def f():\n    return 2\n"
FORGED: Final = b"def f():\n    return 3\n"
SHORT: Final = b"short"  # chunk 0 of `manifest`, which must be CHUNK_SIZE bytes long
LAST: Final = b"z"

DESCRIPTION = [
    "artifacts[]: {name, cid, hex}: the blocks (docs/format.md §17) the artifact bundles use: `old`,",
    "  `new` and `forged` are raw blocks of three one-line programs; `manifest` is a chunk manifest",
    "  of size CHUNK_SIZE + 1 whose chunk 0 is the raw block `short` (5 bytes, not CHUNK_SIZE), so it",
    "  names no artifact; `last` is its chunk 1.",
    "records p_* and s_* (alice, seq 5 to 12, each naming the one before, p_ok naming cp_alice_f) are the",
    "  patches and snapshots of docs/integrity.md",
    "  §6.4: p_ok is honest (old to new), p_forged names `forged` as result, p_stale's diff is against",
    "  other text, p_binary has format git-binary; s_ok is honest, s_content's blob is not its content's",
    "  CID, s_path's tree names `new` at its path while its blob is `old`, s_manifest's tree names",
    "  `manifest`. false_patch and false_snapshot bundles carry `blocks`.",
]


def _manifest() -> bytes:
    return codec.encode({"chunks": [CID.of_raw(SHORT), CID.of_raw(LAST)], "size": CHUNK_SIZE + 1,
                         "type": "convgraph/chunks", "v": 1})


def artifacts() -> dict[str, tuple[CID, bytes]]:
    raw = {"old": OLD, "new": NEW, "forged": FORGED, "short": SHORT, "last": LAST}
    out = {n: (CID.of_raw(b), b) for n, b in raw.items()}
    out["manifest"] = (CID.of_record(_manifest()), _manifest())
    return out


def records(previous: Record) -> dict[str, Record]:
    """The patches and snapshots, alice's records after `previous` (her last), each naming the one
    before it (docs/format.md §11.2), so that they ingest."""
    old, new, forged = CID.of_raw(OLD), CID.of_raw(NEW), CID.of_raw(FORGED)
    diff = make_unified_diff(OLD, NEW, "f.py")
    patch = {"base": old, "diff": diff, "result": new, "path": "f.py"}
    payloads = [
        ("p_ok", "patch", patch),
        ("p_forged", "patch", {**patch, "result": forged}),
        ("p_stale", "patch", {**patch, "diff": make_unified_diff(b"other\n", NEW, "f.py")}),
        ("p_binary", "patch", {**patch, "result": forged, "format": "git-binary"}),
        ("s_ok", "code_snapshot", {"content": OLD.decode(), "blob": old, "path": "f.py", "tree": {"f.py": old}}),
        ("s_content", "code_snapshot", {"content": OLD.decode(), "blob": new}),
        ("s_path", "code_snapshot", {"blob": old, "path": "f.py", "tree": {"f.py": new}}),
        ("s_manifest", "code_snapshot", {"tree": {"big.bin": CID.of_record(_manifest()), "f.py": old}}),
    ]
    out: dict[str, Record] = {}
    for name, kind, payload in payloads:
        previous = out[name] = sign_record(ALICE, conv=CONV, seq=previous.seq + 1, hlc=Hlc(T + 100 + previous.seq, 0),
                                           parents=[previous.cid], kind=kind, payload=payload)
    return out


def bundles(r: dict[str, Record]) -> list[tuple[str, str, str, bytes, str]]:
    held = dict(artifacts().values())

    def built(name: str) -> bytes:
        finding = artifact_claim_finding(r[name].data, held.get, 0)
        assert finding is not None  # the builder proves what the store holds
        return finding.bundle

    def made(kind: str, name: str, check: str, blocks: list[bytes]) -> bytes:
        return encode_bundle(kind, CONV, [], [r[name].data], {"record": r[name].cid, "check": check},
                             blocks=blocks)

    proving = [
        ("false_patch_result", "p_forged: its diff takes old to new, not to its result forged", "false_patch",
         built("p_forged")),
        ("false_patch_apply", "p_stale: its diff's removed line is not old's line 1", "false_patch",
         built("p_stale")),
        ("false_snapshot_content", "s_content: its blob is not the CID of its content; no block needed",
         "false_snapshot", built("s_content")),
        ("false_snapshot_path", "s_path: tree[path] is new, blob is old", "false_snapshot", built("s_path")),
        ("false_snapshot_tree", "s_manifest: manifest's chunk 0 has 5 bytes, not CHUNK_SIZE", "false_snapshot",
         built("s_manifest")),
    ]
    flipped = OLD[:-2] + b"2\n"  # old with one byte changed: its digest names nothing the record names
    not_proving = [
        ("false_patch_honest", "p_ok: its diff gives its result", "false_patch", made("false_patch", "p_ok",
                                                                                       "result", [OLD])),
        ("false_patch_missing_base", "p_forged without old: the claim is pending", "false_patch",
         made("false_patch", "p_forged", "result", [])),
        ("false_patch_tampered_block", "p_forged with old's last line changed: base not held", "false_patch",
         made("false_patch", "p_forged", "result", [flipped])),
        ("false_patch_wrong_check", "p_forged claimed as apply: its diff applies", "false_patch",
         made("false_patch", "p_forged", "apply", [OLD])),
        ("false_patch_not_checkable", "p_binary: format git-binary is not checkable", "false_patch",
         made("false_patch", "p_binary", "result", [OLD])),
        ("false_patch_duplicate_block", "old twice", "false_patch",
         codec.encode({**codec.decode(proving[0][3]), "blocks": [OLD, OLD]})),
        ("false_snapshot_honest", "s_ok claimed as content", "false_snapshot",
         made("false_snapshot", "s_ok", "content", [OLD])),
        ("false_snapshot_of_a_patch", "the claim names p_forged, a patch", "false_snapshot",
         made("false_snapshot", "p_forged", "content", [OLD])),
        ("false_snapshot_missing_chunk", "s_manifest without short: pending", "false_snapshot",
         made("false_snapshot", "s_manifest", "tree", [_manifest()])),
    ]
    good = codec.decode(proving[0][3])
    not_bundles = [
        ("false_patch_without_blocks", "an artifact kind's bundle has the key blocks", "",
         codec.encode({k: v for k, v in good.items() if k != "blocks"})),
        ("blocks_wrong_kind", "blocks belong to false_patch and false_snapshot only", "",
         codec.encode({**good, "kind": "record_equivocation", "claim": {}})),
        ("false_patch_snapshot_check", "content is a check of false_snapshot, not of false_patch", "",
         codec.encode({**good, "claim": {**good["claim"], "check": "content"}})),
        ("false_patch_claim_index", "claim record is a link, not an index", "",
         codec.encode({**good, "claim": {**good["claim"], "record": 0}})),
        ("blocks_not_bytes", "blocks is an array of byte strings", "", codec.encode({**good, "blocks": ["old"]})),
    ]
    return ([(n, note, kind, data, "proves") for n, note, kind, data in proving]
            + [(n, note, kind, data, "does_not_prove") for n, note, kind, data in not_proving]
            + [(n, note, kind, data, "not_a_bundle") for n, note, kind, data in not_bundles])


def artifacts_json() -> list[dict[str, str]]:
    return [{"name": n, "cid": str(cid), "hex": data.hex()} for n, (cid, data) in artifacts().items()]
