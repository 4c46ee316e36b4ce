"""Code in a conversation: attachments, snapshots of a working tree, patches, and the review,
decision request and decision records that name them (docs/code.md).

Every helper stores its artifacts and writes its record through the replica's one write path,
so the authority rules (docs/authority.md §4) gate `review` and `decide` as for any record.
Invariant: a record written here names only artifacts stored in the same transaction (or given
by CID), and a patch's `result` is exactly what its `diff` makes of its `base`: a diff that does
not apply, or that holds no hunk (`NotADiffError`), raises `PatchApplyError` before anything is
stored or signed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final, Protocol

from convgraph.artifacts.diff import apply_unified_diff
from convgraph.core.cid import CID
from convgraph.core.record import Record
from convgraph.errors import ChoiceError, NotFoundError, PatchApplyError, WorkingTreeError, WrongTargetError
from convgraph.replica.artifacts import Source
from convgraph.store.base import Store


class Replica(Protocol):
    """What these helpers use of `Replica`: its one write path, its artifacts and its store."""

    @property
    def store(self) -> Store: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def write(self, conv: str, kind: str, payload: dict[str, Any], *, refs: Sequence[CID] = (),
              branch: str | None = None) -> Record: ...
    def get(self, cid: CID) -> Record: ...
    def put(self, source: Source) -> CID: ...
    def get_artifact(self, cid: CID) -> bytes: ...

PathText = str | os.PathLike[str]
Attachment = bytes | bytearray | memoryview | PathText | CID
"""What `say(attachments=…)` takes: bytes, a file's path, or the CID of an artifact (or record)."""

SKIPPED_DIRS: Final = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", ".jj", "CVS", "__pycache__"})
"""Directories a snapshot never enters: version-control state and bytecode caches, not code."""

VERDICTS: Final = ("approve", "request_changes", "comment")
REVIEWABLE: Final = ("code_snapshot", "patch")

_PLUS: Final = re.compile(r"^\+\+\+ (?:b/)?([^\t\n]+)", re.MULTILINE)


@dataclass(frozen=True)
class Skipped:
    """A path under a snapshot's paths that is not in its tree, and why (never followed or read)."""

    path: str
    reason: str


@dataclass(frozen=True)
class Snapshot:
    """A `code_snapshot` written: the record, its tree (relative path → artifact CID) and what
    was left out of it."""

    record: Record
    tree: dict[str, CID]
    skipped: tuple[Skipped, ...]


def attach(replica: Replica, items: Iterable[Attachment]) -> list[CID]:
    """The CIDs to name in `refs`: each item put as an artifact, a CID kept as given (it may
    be an artifact not held yet: `missing_artifacts` reports it). Order kept, repeats dropped."""
    return list(dict.fromkeys(x if isinstance(x, CID) else replica.put(x) for x in items))


def walk(root: Path, paths: Sequence[PathText]) -> tuple[dict[str, Path], list[Skipped]]:
    """The regular files under `paths` (relative to `root`), keyed by their path relative to
    `root` in POSIX form; symlinks, special files and unreadable directories are reported as
    skipped, never followed. `WorkingTreeError` for a path that is missing or outside `root`."""
    files: dict[str, Path] = {}
    skipped: list[Skipped] = []
    for given in paths:
        rel = relative(root, given)
        full = root / rel
        link = _linked_dir(root, rel)
        if link is not None:  # a symlinked directory on the way: it might lead anywhere
            skipped.append(Skipped(rel, f"under {link}, a symlink: not followed"))
        elif rel != "." and full.is_symlink():  # the root itself may be reached through one
            skipped.append(Skipped(rel, f"symlink to {os.readlink(full)}: not followed"))
        elif full.is_dir():
            _walk_dir(full, rel, files, skipped)
        elif full.is_file():
            files[rel] = full
        elif full.exists():
            skipped.append(Skipped(rel, "not a regular file"))
        else:
            raise WorkingTreeError(f"{os.fspath(given)!r} does not exist under {root}")
    return files, skipped


def relative(root: Path, given: PathText) -> str:
    """`given` (relative to `root`, or absolute) as a POSIX path relative to `root`, read
    lexically as git does ("a/../b" is "b"); `WorkingTreeError` when it leads outside `root`."""
    top = os.path.abspath(root)
    rel = os.path.relpath(os.path.normpath(os.path.join(top, given)), top)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        raise WorkingTreeError(f"{os.fspath(given)!r} is outside the snapshot's root {root}")
    return Path(rel).as_posix()


def _linked_dir(root: Path, rel: str) -> str | None:
    """The first directory on the way from `root` to `rel` that is a symlink, if any."""
    parts = Path(rel).parts
    for i in range(1, len(parts)):
        if root.joinpath(*parts[:i]).is_symlink():
            return "/".join(parts[:i])
    return None


def _walk_dir(directory: Path, rel: str, files: dict[str, Path], skipped: list[Skipped]) -> None:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        skipped.append(Skipped(rel, f"unreadable directory: {exc.strerror or exc}"))
        return
    for entry in entries:
        name = entry.name if rel == "." else f"{rel}/{entry.name}"
        if entry.is_symlink():
            skipped.append(Skipped(name, f"symlink to {os.readlink(entry.path)}: not followed"))
        elif entry.is_dir(follow_symlinks=False):
            if entry.name not in SKIPPED_DIRS:
                _walk_dir(Path(entry.path), name, files, skipped)
        elif entry.is_file(follow_symlinks=False):
            files[name] = Path(entry.path)
        else:
            skipped.append(Skipped(name, "not a regular file"))


def snapshot(
    replica: Replica, conv: str, paths: Sequence[PathText] | PathText, *, root: PathText | None,
) -> Snapshot:
    """Store every regular file under `paths` and write one `code_snapshot` whose `tree` maps
    each file's path (relative to `root`, default the working directory) to its artifact CID;
    all in one transaction. A file that cannot be opened is skipped and reported."""
    if isinstance(paths, str | os.PathLike):  # one path, not a sequence of its characters
        paths = [paths]
    base = Path.cwd() if root is None else Path(root)
    if not base.is_dir():
        raise WorkingTreeError(f"the snapshot's root {base} is not a directory")
    if not paths:
        raise WorkingTreeError("no path given: name the files or directories to snapshot")
    found, skipped = walk(base, paths)
    tree: dict[str, CID] = {}
    with replica.transaction():
        for rel, path in sorted(found.items()):
            try:
                f: BinaryIO = path.open("rb")
            except OSError as exc:
                skipped.append(Skipped(rel, f"unreadable: {exc.strerror or exc}"))
                continue
            with f:
                tree[rel] = replica.put(f)
        if not tree:
            raise WorkingTreeError(f"no readable regular file under {', '.join(os.fspath(p) for p in paths)}")
        payload: dict[str, Any] = {"tree": tree}
        if len(paths) == 1:  # the snapshot's entity key (docs/conversation.md): what it is of
            payload["path"] = relative(base, paths[0])
        record = replica.write(conv, "code_snapshot", payload)
    return Snapshot(record, tree, tuple(sorted(skipped, key=lambda s: s.path)))


def diff_text(diff: str | bytes) -> str:
    """The diff as the text a `patch` record carries; `PatchApplyError` when it is not UTF-8."""
    if isinstance(diff, str):
        return diff
    try:
        return diff.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = diff[: exc.start].count(b"\n") + 1
        raise PatchApplyError(f"diff line {line}: not UTF-8 text ({exc.reason})", hunk=0, line=line) from None


def patch(replica: Replica, conv: str, base: CID, diff: str | bytes, *, path: str | None = None) -> Record:
    """Apply `diff` (unified, strict) to artifact `base`, store the result and write a `patch`
    record `{base, diff, result, format: "unified", path}`; `path` defaults to the diff's `+++`
    file. `ArtifactMissingError` when `base` is not held, `WrongTargetError` when it is a record,
    `PatchApplyError` when the diff does not apply, `NotADiffError` when it holds no hunk (so it
    would change nothing): in each case nothing is stored."""
    text = diff_text(diff)
    if replica.store.has(base):  # a record's CID: the file is a value of a snapshot's tree
        raise WrongTargetError(f"a patch's base names record {base}, not a file: give an artifact's CID "
                               "(a snapshot's tree lists its files' CIDs)", cid=base)
    made = apply_unified_diff(replica.get_artifact(base), text)
    if path is None and (m := _PLUS.search(text)) is not None and m.group(1) != "/dev/null":
        path = m.group(1)
    with replica.transaction():
        result = replica.put(made)
        payload: dict[str, Any] = {"base": base, "diff": text, "result": result, "format": "unified"}
        if path is not None:
            payload["path"] = path
        return replica.write(conv, "patch", payload)


def held(replica: Replica, conv: str, cid: CID, kinds: Sequence[str], what: str) -> Record:
    """The record `cid` of `conv`, which must be one of `kinds` (`WrongTargetError` otherwise)."""
    try:
        record = replica.get(cid)
    except NotFoundError:
        raise WrongTargetError(f"{what} names {cid}, which is no record held here: expected a "
                               f"{' or '.join(kinds)} of this conversation", cid=cid) from None
    if record.conv != conv:
        raise WrongTargetError(f"{what} names {cid}, a record of another conversation", cid=cid)
    if kinds and record.kind not in kinds:
        raise WrongTargetError(f"{what} names {cid}, a {record.kind}: expected a {' or '.join(kinds)}",
                               cid=cid)
    return record


def review(
    replica: Replica, conv: str, target: CID, body: str, *, verdict: str = "comment", line: int | None = None,
) -> Record:
    """Write a `review_comment` on the exact `code_snapshot` or `patch` record `target`; its
    `verdict` is one of `VERDICTS` (the schema refuses others)."""
    held(replica, conv, target, REVIEWABLE, "a review")
    payload: dict[str, Any] = {"target": target, "body": body, "verdict": verdict}
    if line is not None:
        payload["line"] = line
    return replica.write(conv, "review_comment", payload)


def ask(
    replica: Replica, conv: str, question: str, *, subject: CID | None = None, options: Sequence[str] = (),
    reviews: int | None = None, reviewers: Iterable[bytes] = (),
) -> Record:
    """Write a `decision_request`: `question` about record `subject` (held in `conv`), with the
    `options` a decision picks from and the reviews it needs first (docs/authority.md §8.4)."""
    payload: dict[str, Any] = {"question": question}
    if subject is not None:
        held(replica, conv, subject, (), "a decision request")
        payload["subject"] = subject
    if options:
        payload["options"] = list(options)
    if reviews is not None:
        payload["reviews"] = reviews
    if chosen := sorted(set(reviewers)):
        payload["reviewers"] = chosen
    return replica.write(conv, "decision_request", payload)


def decide(replica: Replica, conv: str, request: CID, choice: str, *, rationale: str | None = None) -> Record:
    """Write the `decision` of `decision_request` `request`; `ChoiceError` when the request
    lists `options` and `choice` is not one of them."""
    asked = held(replica, conv, request, ("decision_request",), "a decision")
    options = asked.payload.get("options")
    if options and choice not in options:
        raise ChoiceError(f"{choice!r} is not one of the request's options: {', '.join(map(repr, options))}",
                          cid=request)
    payload: dict[str, Any] = {"request": request, "choice": choice}
    if rationale is not None:
        payload["rationale"] = rationale
    return replica.write(conv, "decision", payload)
