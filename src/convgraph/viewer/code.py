"""What a record page shows of the code a record names: a snapshot's files, a patch's diff,
the snapshot or patch a review (or a decision request) is about, the subject of the request
a decision answers, the records naming this one; and the page of a file a record names.

Reads artifacts from the replica's store, each checked against its CID before it is shown;
an artifact not held is marked missing, one that hashes wrong is marked corrupt, and no
file larger than `SHOWN_BYTES` is read whole. Every text shown passes through `safe_text`
(the templates escape the rest). Invariant: nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from convgraph.artifacts.blocks import decode_manifest, verify_block
from convgraph.artifacts.claims import ClaimStatus, check_claim, file_tree
from convgraph.core import safe_text
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.core.record import Record
from convgraph.errors import ArtifactMissingError, ConvgraphError, NotFoundError
from convgraph.replica import Replica
from convgraph.viewer import links

SHOWN_BYTES: Final = 256 * 1024  # a file past this is listed by size and CID, not shown
SHOWN_FILES: Final = 500  # a snapshot's files listed; the rest are counted
MISSING: Final = "missing"
CORRUPT: Final = "corrupt"
TEXT: Final = "text"
BINARY: Final = "binary"
LARGE: Final = "large"
_STYLES: Final = {ClaimStatus.HOLDS: "ok", ClaimStatus.FALSE: "bad"}


@dataclass(frozen=True)
class File:
    """One artifact as the page shows it: `status` is text, binary, large, missing or corrupt;
    `text` is set for text only, `size` when the bytes (or their manifest) are held."""

    path: str
    cid: CID
    status: str
    size: int | None = None
    text: str | None = None


@dataclass(frozen=True)
class DiffLine:
    """A line of a diff and how it reads: added, removed, hunk, header or context."""

    style: str
    text: str


@dataclass(frozen=True)
class Target:
    """The record a review or request names, with its kind when it is held here."""

    cid: CID
    kind: str | None


@dataclass(frozen=True)
class CodeView:
    """The code part of a record page; which fields are set depends on the record's kind."""

    kind: str
    files: tuple[File, ...] = ()
    more_files: int = 0
    diff: tuple[DiffLine, ...] = ()
    base: File | None = None
    result: File | None = None
    claim: str | None = None  # what checking the record's claim found (docs/format.md §18)
    claim_style: str = "ok"  # ok (holds), bad (false), warn (pending or not checkable)
    target: Target | None = None
    subject: Target | None = None  # a decision's: what the request it answers asks about


def view(replica: Replica, record: Record) -> CodeView | None:
    """The code part of `record`'s page, or None for a kind that names no code."""
    p = record.payload
    if record.kind == "code_snapshot":
        tree = file_tree(p) or {}
        names = sorted(tree)
        files = tuple(artifact(replica, tree[n], safe_text.line(n)) for n in names[:SHOWN_FILES])
        claim, style = _claim(replica, record)
        more = max(0, len(names) - SHOWN_FILES)
        return CodeView("code_snapshot", files, more, claim=claim, claim_style=style)
    if record.kind == "patch":
        base = artifact(replica, p["base"], "base", read=False)
        made = p.get("result")
        result = artifact(replica, made, "result", read=False) if isinstance(made, CID) else None
        claim, style = _claim(replica, record)
        return CodeView("patch", diff=diff_lines(p["diff"]), base=base, result=result, claim=claim,
                        claim_style=style)
    named = links.named(record.kind, p)
    if named is None:
        return None
    subject = _subject(replica, named) if record.kind == "decision" else None
    return CodeView(record.kind, target=_target(replica, named), subject=subject)


def mentions(replica: Replica, conv: str, cid: CID) -> tuple[links.Mention, ...]:
    """The records of `conv` naming record `cid` (`links.mentions`), read a page at a time."""
    naming = (r for r in replica.iter_records(conv) if r.kind in links.NAMING)
    return links.mentions(cid, (links.Said(r.cid, r.kind, r.payload) for r in naming))


@dataclass(frozen=True)
class ArtifactView:
    """An artifact's own page: the record naming it (and the name it goes by there) and the file."""

    record: CID
    conv: str
    conv_name: str
    kind: str
    file: File


def artifact_page(replica: Replica, record: CID, cid: CID) -> ArtifactView | None:
    """Artifact `cid` as record `record` names it, or None when the record is not held whole
    or does not name it: a reader reaches an artifact only through a record it may read."""
    try:
        held = replica.get(record)
    except ConvgraphError:
        return None
    name = links.artifacts(held.kind, held.payload, held.refs).get(cid)
    if name is None:
        return None
    return ArtifactView(record, held.conv, safe_text.line(held.conv), safe_text.line(held.kind),
                        artifact(replica, cid, name))


def artifact(replica: Replica, cid: CID, path: str, *, read: bool = True) -> File:
    """`cid` as a file of the page: its size from its block or manifest, its bytes (when `read`
    and at most `SHOWN_BYTES`) shown as text when they are UTF-8 with no NUL."""
    block = replica.store.get_block(cid)
    if block is None:
        return File(path, cid, MISSING)
    try:
        verify_block(cid, block)
        manifest = decode_manifest(block) if cid.codec == DAG_CBOR else None
    except ConvgraphError:
        return File(path, cid, CORRUPT)
    size = len(block) if manifest is None else manifest.size
    if manifest is not None and len(replica.store.has_blocks(manifest.chunks)) < len(set(manifest.chunks)):
        return File(path, cid, MISSING, size)  # a chunk sync has not brought yet
    if not read or size > SHOWN_BYTES:
        return File(path, cid, LARGE if read else BINARY, size)
    try:
        data = replica.get_artifact(cid)
    except ArtifactMissingError:
        return File(path, cid, MISSING, size)
    except ConvgraphError:
        return File(path, cid, CORRUPT, size)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return File(path, cid, BINARY, size)
    if "\x00" in text:
        return File(path, cid, BINARY, size)
    return File(path, cid, TEXT, size, safe_text.block(text))


def diff_lines(diff: str) -> tuple[DiffLine, ...]:
    """Each line of a unified diff with its style; headers before the first hunk are headers."""
    out: list[DiffLine] = []
    in_hunk = False
    for line in diff.splitlines():
        if line.startswith("@@"):
            style, in_hunk = "hunk", True
        elif not in_hunk:
            style = "header"
        elif line.startswith("+"):
            style = "added"
        elif line.startswith("-"):
            style = "removed"
        else:
            style = "context"
        out.append(DiffLine(style, safe_text.line(line)))
    return tuple(out)


def _claim(replica: Replica, record: Record) -> tuple[str | None, str]:
    checked = check_claim(record, replica.store.get_block)
    if checked is None:
        return None, "ok"
    said = f"{checked.status.value}: {safe_text.line(checked.reason)}"
    return said, _STYLES.get(checked.status, "warn")


def _subject(replica: Replica, request: CID) -> Target | None:
    try:
        asked = replica.get(request)
    except ConvgraphError:  # not held, or compacted: the decision's page names the request alone
        return None
    subject = links.named(asked.kind, asked.payload) if asked.kind == "decision_request" else None
    return None if subject is None else _target(replica, subject)


def _target(replica: Replica, cid: CID) -> Target:
    try:
        return Target(cid, safe_text.line(replica.get(cid).kind))
    except NotFoundError:
        return Target(cid, None)
    except ConvgraphError:  # compacted: the header still says what it is
        meta = replica.store.metas([cid]).get(cid)
        return Target(cid, None if meta is None else "record")
