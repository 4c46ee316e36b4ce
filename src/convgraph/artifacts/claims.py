"""Claims records make about artifacts, checked (docs/format.md §18.2): a `patch` says its `diff`
takes `base` to `result`; a `code_snapshot` says its `content`, `blob` and `tree` name one file tree.

Pure: the only input besides the record is `get_block`, a CID's stored block bytes or None
(`Store.get_block`); every block is hashed here before it is believed, so a store that rots
makes a claim *pending*, never *false*. Invariant: a `FALSE` answer carries in `blocks`
every block its check read, so `check_claim(record, those blocks)` gives the same answer
anywhere (that is what an evidence bundle replays, docs/integrity.md §6.4).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from convgraph.artifacts.blocks import checked, decode_manifest, split
from convgraph.artifacts.diff import apply_unified_diff
from convgraph.core.cid import CID, RAW
from convgraph.core.record import Record
from convgraph.errors import ArtifactTooLargeError, ManifestError, PatchApplyError

GetBlock = Callable[[CID], bytes | None]
"""A block's bytes as stored, or None when not held (yet); checked against its CID here."""

PATCH_CHECKS: Final = ("base", "apply", "result")
SNAPSHOT_CHECKS: Final = ("content", "path", "blob", "tree")
CHECKED_KINDS: Final = ("patch", "code_snapshot")


class ClaimStatus(enum.Enum):
    """`HOLDS`: checked and true; `FALSE`: checked and false; `PENDING`: a block is not held
    (or held corrupt); `UNCHECKABLE`: a `format` this version cannot apply."""

    HOLDS = "holds"
    FALSE = "false"
    PENDING = "pending"
    UNCHECKABLE = "not_checkable"


@dataclass(frozen=True, slots=True)
class ClaimCheck:
    """The answer for one record: `check` names the rule that failed (one of `PATCH_CHECKS` or
    `SNAPSHOT_CHECKS`) when `FALSE`; `blocks` are the blocks that show it; `missing` the
    blocks a `PENDING` answer waits for."""

    status: ClaimStatus
    record: CID
    kind: str
    reason: str
    check: str = ""
    blocks: tuple[bytes, ...] = ()
    missing: tuple[CID, ...] = ()


@dataclass(frozen=True, slots=True)
class _Read:
    data: bytes | None  # the artifact's bytes, when asked for and every block is held
    used: dict[CID, bytes]  # what shows the answer: every block when whole, the culprits when malformed
    missing: CID | None = None
    malformed: str = ""  # why the held blocks under this CID make no artifact


def _block(cid: CID, get: GetBlock) -> bytes | None:
    return checked(cid, get(cid))  # rot in a store is no claim of the author's


def read_artifact(cid: CID, get: GetBlock, *, keep: bool = True) -> _Read:
    """The artifact `cid` names (docs/format.md §17, §18.2): *malformed* when its root is a
    dag-cbor block that is no manifest or any held chunk has the wrong length (shown by the
    manifest and that chunk alone), else *missing* its first block not held, else whole. With
    `keep` False the bytes are checked but not kept: one chunk is held at a time."""
    root = _block(cid, get)
    if root is None:
        return _Read(None, {}, missing=cid)
    if cid.codec == RAW:
        return _Read(root if keep else None, {cid: root})
    try:
        manifest = decode_manifest(root)
    except ManifestError as exc:
        return _Read(None, {cid: root}, malformed=f"{cid} is not a chunk manifest: {exc.message}")
    parts: dict[CID, bytes] = {}
    absent: CID | None = None
    for i, chunk in enumerate(manifest.chunks):
        data = _block(chunk, get)
        if data is None:
            absent = absent or chunk
            continue
        if len(data) != manifest.chunk_length(i):
            return _Read(None, {cid: root, chunk: data}, malformed=(
                f"chunk {i} of manifest {cid} has {len(data)} bytes; size {manifest.size} "
                f"needs {manifest.chunk_length(i)}"))
        if keep:
            parts[chunk] = data
    if absent is not None:
        return _Read(None, {}, missing=absent)
    if not keep:
        return _Read(None, {})
    return _Read(b"".join(parts[c] for c in manifest.chunks), {cid: root, **parts})


def artifact_cid(data: bytes) -> CID | None:
    """The one CID of these bytes as an artifact; None when too large to be one."""
    try:
        return split(data)[0]
    except ArtifactTooLargeError:
        return None


def check_claim(record: Record, get: GetBlock) -> ClaimCheck | None:
    """The check of a `patch` or `code_snapshot` record; None for any other kind."""
    if record.kind == "patch":
        return check_patch(record, get)
    if record.kind == "code_snapshot":
        return check_snapshot(record, get)
    return None


def _answer(record: Record, status: ClaimStatus, reason: str, check: str = "", *,
            used: dict[CID, bytes] | None = None, missing: tuple[CID, ...] = ()) -> ClaimCheck:
    blocks = tuple(sorted(set((used or {}).values()))) if status is ClaimStatus.FALSE else ()
    return ClaimCheck(status, record.cid, record.kind, reason, check, blocks, missing)


def check_patch(record: Record, get: GetBlock) -> ClaimCheck:
    """§18.2 for a `patch`: `base` is an artifact, `diff` applies to it exactly, and the bytes it
    gives have the CID `result` (when the record names one). `result` itself is never read."""
    p: dict[str, Any] = record.payload
    fmt = p.get("format", "unified")
    if fmt != "unified":
        return _answer(record, ClaimStatus.UNCHECKABLE, f"format {fmt[:64]!r} is not one this version checks")
    base = read_artifact(p["base"], get)
    if base.missing is not None:
        return _answer(record, ClaimStatus.PENDING, f"block {base.missing} of the base is not held",
                       missing=(base.missing,))
    if base.malformed or base.data is None:
        return _answer(record, ClaimStatus.FALSE, f"the base is no artifact: {base.malformed}", "base",
                       used=base.used)
    try:
        # a record's diff without hunks claims "the base, unchanged", which is true (§18.1)
        made = apply_unified_diff(base.data, p["diff"], allow_empty=True)
    except PatchApplyError as exc:
        return _answer(record, ClaimStatus.FALSE, f"the diff does not apply to the base: {exc}", "apply",
                       used=base.used)
    if "result" in p and artifact_cid(made) != p["result"]:
        return _answer(record, ClaimStatus.FALSE, f"the diff applied to the base gives {artifact_cid(made)}, "
                       f"not the result {p['result']}", "result", used=base.used)
    return _answer(record, ClaimStatus.HOLDS, "the diff applies to the base" + (
        " and gives the result" if "result" in p else ""))


def file_tree(payload: dict[str, Any]) -> dict[str, CID] | None:
    """The snapshot's `tree` when it is a file tree (every value a link), else None: a tree of
    other values is application state (docs/integrations.md), which claims nothing about files."""
    tree = payload.get("tree")
    if type(tree) is not dict or not all(isinstance(v, CID) for v in tree.values()):
        return None
    return tree


def check_snapshot(record: Record, get: GetBlock) -> ClaimCheck:
    """§18.2 for a `code_snapshot`, its checks in order: `content` (the CID of the UTF-8 of
    `content` is `blob`), `path` (`tree[path]` is `blob`, or the CID of `content` without a
    `blob`), then `blob` and `tree` (each names an artifact: its blocks make one)."""
    p: dict[str, Any] = record.payload
    text = p.get("content")
    named = artifact_cid(text.encode("utf-8")) if isinstance(text, str) else None
    blob = p.get("blob")
    if text is not None and blob is not None and named != blob:
        return _answer(record, ClaimStatus.FALSE, f"blob {blob} is not the CID of content ({named})",
                       "content")
    tree = file_tree(p)
    path = p.get("path")
    file = blob if blob is not None else named
    if tree is not None and path in tree and file is not None and tree[path] != file:
        return _answer(record, ClaimStatus.FALSE, f"tree names {tree[path]} at path {path!r}, "
                       f"the snapshot's file there is {file}", "path")
    pending: list[CID] = []
    named_files = [("blob", blob)] if blob is not None else []
    named_files += [("tree", tree[k]) for k in sorted(tree)] if tree is not None else []
    for rule, cid in named_files:
        got = read_artifact(cid, get, keep=False)
        if got.missing is not None:
            pending.append(got.missing)
        elif got.malformed:
            return _answer(record, ClaimStatus.FALSE, f"{rule} names no artifact: {got.malformed}", rule,
                           used=got.used)
    if pending:
        return _answer(record, ClaimStatus.PENDING, f"{len(pending)} named artifacts not held",
                       missing=tuple(sorted(set(pending))))
    return _answer(record, ClaimStatus.HOLDS, "content, blob, path and tree agree")
