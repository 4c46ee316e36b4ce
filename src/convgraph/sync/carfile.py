"""Conversations to and from CARv1 files: `export_car` writes them, `import_car` ingests one.

An export holds, per conversation, the cover, snapshot and checkpoint of its latest
compaction (if any) and then every record that still has its bytes, in canonical order;
the roots are the heads. An import streams the blocks into `Replica.ingest` in batches,
adopts each checkpoint whose cover and snapshot it met (`Replica.adopt`), skips and reports
blocks that are no records, and ends only at a broken frame. Invariant: an export of a
replica, imported into an empty one, rebuilds every conversation's records, heads and
folded state (`docs/sync.md`, CAR files).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, Final

from convgraph.artifacts.blocks import decode_manifest
from convgraph.artifacts.links import artifact_links
from convgraph.core import codec
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.core.keys import actor_text
from convgraph.core.record import load_trusted
from convgraph.errors import CarError, ConvgraphError, CoverError, NotFoundError
from convgraph.replica import Replica, artifact_checks
from convgraph.replica.adoption import Compaction, compaction_of, cover_checkpoint, role
from convgraph.replica.artifacts import missing
from convgraph.replica.ingest import IngestReport
from convgraph.sync.artifact_scope import export_blocks, named_scope, take_named
from convgraph.sync.car import OtherBlock, read_car, write_car
from convgraph.sync.car_summary import MAX_SHOWN, ImportSummary

BATCH: Final = 1000
MAX_HEADER: Final = 1 << 22  # one ~40-byte root per conversation: room for ~100k of them
MAX_BLOCK: Final = 1 << 28  # a record is at most 1 MiB; a big conversation's snapshot or cover is not
_ARTIFACT_BATCH: Final = 64  # artifact blocks stored at a time: at most 16 MiB held
_MANIFEST_HEAD: Final = b"\xa4av\x01"  # a chunk manifest's first bytes (docs/format.md §17)


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def export_car(replica: Replica, path: Path, convs: Sequence[str] = ()) -> dict[str, Any]:
    """Write `convs` (default: all) of `replica` to the CAR file `path`; returns the summary."""
    chosen = sorted(set(convs)) if convs else replica.conversations()
    for conv in chosen:
        if replica.store.count(conv) == 0:
            raise NotFoundError(f"no conversation {conv!r} in this replica")
    # heads before records: a record written meanwhile only adds blocks, never loses a root
    roots = sorted({h for conv in chosen for h in replica.store.heads(conv)})
    tally = {"records": 0, "compacted": 0, "checkpoints": 0, "artifact_blocks": 0}
    seen: set[CID] = set()

    def blocks() -> Iterator[tuple[CID, bytes]]:
        for conv in chosen:
            yield from conv_blocks(conv)
            # after the records that name them: an importer knows their scope when they arrive
            for cid, data in export_blocks(replica.store, conv, seen):
                tally["artifact_blocks"] += 1
                yield cid, data

    def conv_blocks(conv: str) -> Iterator[tuple[CID, bytes]]:
        compaction = compaction_of(replica.store, conv)
        if compaction is not None:  # first what a fresh replica adopts, so nothing waits for it
            tally["compacted"] += compaction.count
            tally["checkpoints"] += 1
            tally["records"] += 1
            yield from _compaction_blocks(compaction)
        for cid, data in replica.store.records(conv):  # canonical order; compacted ones have no bytes
            if compaction is None or cid != compaction.checkpoint:
                tally["records"] += 1
                yield cid, data

    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    except OSError as exc:
        raise ConvgraphError(f"cannot write {path}: {exc}") from exc
    try:
        os.fchmod(fd, _new_file_mode())  # mkstemp's 0600 is for secrets; this is an ordinary file
        with os.fdopen(fd, "wb") as fh:
            size = write_car(fh, roots, blocks(), max_header=MAX_HEADER, max_block=MAX_BLOCK)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ConvgraphError(f"cannot write {path}: {exc}") from exc
        raise
    return {"file": str(path), **tally, "roots": [str(c) for c in roots], "bytes": size}


def _compaction_blocks(c: Compaction) -> Iterator[tuple[CID, bytes]]:
    yield CID.of_record(c.cover), c.cover
    yield CID.of_record(c.snapshot), c.snapshot
    yield c.checkpoint, c.record


class _Import:
    """The state of one import: the batch, the blocks kept for adoption, what is waiting."""

    def __init__(self, replica: Replica, summary: ImportSummary) -> None:
        self.replica, self.summary = replica, summary
        self.batch: list[tuple[bytes, CID]] = []
        self.snapshots: dict[CID, bytes] = {}
        self.covers: dict[CID, tuple[CID, bytes]] = {}  # checkpoint -> (cover block, cover)
        self.waiting: set[CID] = set()  # records of the file quarantined or held along the way
        self.named: set[CID] = set()  # artifact links of the file's records (not rejected)
        self.convs: set[str] = set()  # conversations of the file's records
        self.chunks: set[CID] = set()  # chunks of the manifests stored by this import
        self.stored: list[CID] = []  # artifact blocks this import stored: what claims wait on
        self.artifacts: list[tuple[CID, bytes]] = []  # in scope, to store with the next batch
        self.later: dict[CID, bytes] = {}  # no record read so far names them: judged at the end
        self.skipped_raw: dict[CID, OtherBlock] = {}

    def block(self, cid: CID, data: bytes) -> None:
        self.summary.blocks += 1
        kind = role(data)
        if data.startswith(_MANIFEST_HEAD):  # a 4-entry map led by v: 1, which no record is
            self.artifact(cid, data)
        elif kind == "snapshot":
            self.snapshots[cid] = data
        elif kind == "cover":
            checkpoint = cover_checkpoint(data)
            if checkpoint is None:
                self.summary.reject(cid, CoverError("not a well-formed cover", checkpoint=None))
            elif checkpoint in self.covers:
                self.summary.skip(str(cid), f"a second cover of checkpoint {checkpoint}")
            else:
                self.covers[checkpoint] = (cid, data)
        elif cid in self.covers and self._snapshot_for(data) is not None:
            self.flush()  # what came before may be what the checkpoint's children wait for
            if not self._adopt(cid, data):
                self.batch.append((data, cid))
        else:
            self.batch.append((data, cid))
        if len(self.batch) >= BATCH:
            self.flush()

    def other(self, block: OtherBlock) -> None:
        self.summary.blocks += 1
        if block.link is None:
            self.summary.skip(block.cid, block.reason)
            return
        self.skipped_raw[block.link] = block
        self.artifact(block.link, block.data)

    def artifact(self, cid: CID, data: bytes) -> None:
        """An artifact block: stored once a record of the file names it (or a manifest it
        named lists it), checked by `take_named`; till then it waits for the end of the file."""
        self.flush()  # the records before it may be what names it
        if cid in self.named or cid in self.chunks:
            self.artifacts.append((cid, data))
            if cid.codec == DAG_CBOR and cid in self.named:
                # its chunks follow it in the file: in scope from now, or each would wait for the
                # end of the file in `later` (a 100 MB artifact held whole); `take_named`
                # still checks the manifest and every chunk against what it stored
                with contextlib.suppress(ConvgraphError):
                    self.chunks.update(decode_manifest(data).chunks)
            if len(self.artifacts) >= _ARTIFACT_BATCH:
                self._store_artifacts()
        else:
            self.later[cid] = data

    def _store_artifacts(self, final: bool = False) -> None:
        outcome = take_named(self.replica.store, self.named, self.artifacts, where="in the file")
        self.artifacts = []
        for conv in sorted(self.convs):  # the file carried the bytes for the conversations naming them
            self.replica.store.admit_blocks(conv, named_scope(self.replica.store, conv, outcome.accepted))
        self.summary.artifacts += len(outcome.accepted)
        self.stored += outcome.stored
        for cid in outcome.stored:
            self.skipped_raw.pop(cid, None)
        for cid, rule, why in outcome.refused:
            other = self.skipped_raw.pop(cid, None)
            if rule == "artifact_scope" and final:  # named by nothing in the file: as before, skipped
                self.summary.skip(other.cid if other else str(cid), other.reason if other else why)
            elif len(self.summary.artifacts_refused) < MAX_SHOWN:
                self.summary.artifacts_refused.append({"cid": str(cid), "rule": rule, "error": why})

    def tampered(self, error: CarError) -> None:
        self.summary.blocks += 1
        self.summary.reject(error.cid, error, "cid")

    def flush(self) -> None:
        if not self.batch:
            return
        report = self.replica.ingest(self.batch)
        self._note(report)
        refused = {r.cid for r in report.rejected}
        for data, cid in self.batch:
            if cid not in refused:  # a valid record (or a stored one): it names artifacts
                record = load_trusted(data, cid)  # ingest verified it
                self.named |= artifact_links(record)
                self.convs.add(record.conv)
        self.batch = []

    def _note(self, report: IngestReport) -> None:
        self.summary.add(report)
        self.waiting.update(report.quarantined, report.held)
        if report.duplicates and self.replica.store.pending_stats()[0]:  # already waiting before
            self.waiting.update(self.replica.store.pending_get(report.duplicates))

    def _snapshot_for(self, checkpoint: bytes) -> bytes | None:
        """The snapshot block a checkpoint names, if the file brought it (decoded loosely:
        `Replica.adopt` checks everything)."""
        with suppress(ConvgraphError, KeyError, TypeError):
            link = codec.decode(checkpoint)["payload"]["snapshot"]
            return self.snapshots.get(link) if type(link) is CID else None
        return None

    def _adopt(self, checkpoint: CID, data: bytes) -> bool:
        """Adopt `checkpoint` with its cover and snapshot; False (and reported) if refused."""
        cover_cid, cover = self.covers.pop(checkpoint)
        snapshot = self._snapshot_for(data)
        try:
            if snapshot is None:
                raise CoverError("its checkpoint names a snapshot the file does not hold",
                                 checkpoint=checkpoint)
            report = self.replica.adopt(data, snapshot, cover)
        except ConvgraphError as exc:
            self.summary.reject(cover_cid, exc)
            return False
        self.snapshots.pop(CID.of_record(snapshot), None)
        self._note(report)
        if report.adopted:
            record = self.replica.get(checkpoint)
            self.summary.adopted.append({
                "checkpoint": str(checkpoint), "conv": record.conv, "signer": actor_text(record.actor),
                "covers": record.payload["count"],
            })
        return True

    def finish(self) -> None:
        """Adopt what waited for the end of the file, then count what is still missing."""
        self.flush()
        store = self.replica.store
        for checkpoint in list(self.covers):  # its checkpoint came before its snapshot, or never
            waiting = store.pending_get([checkpoint]).get(checkpoint)
            data = store.get(checkpoint) or (waiting.data if waiting else None)
            if data is None:
                error = CoverError("its checkpoint is neither in the file nor held", checkpoint=checkpoint)
                self.summary.reject(self.covers.pop(checkpoint)[0], error)
            else:
                self._adopt(checkpoint, data)
        for cid in self.snapshots:
            self.summary.skip(str(cid), "a snapshot no adopted checkpoint names")
        self._store_artifacts()
        self.artifacts, self.later = sorted(self.later.items()), {}  # what came before what names it
        self._store_artifacts(final=True)
        if self.stored:  # claims that waited for these blocks (docs/integrity.md §6.4)
            for conv in sorted(self.convs):
                artifact_checks.check_conversation(store, conv, self.stored, self.replica.clock())
        self.summary.missing_artifacts = sorted({c for conv in self.convs for c in missing(store, conv)
                                                 if c in self.named or c in self.chunks})
        left = store.pending_get(self.waiting) if self.waiting and store.pending_stats()[0] else {}
        self.summary.held = sum(1 for p in left.values() if p.reason == "clock")
        self.summary.quarantined = len(left) - self.summary.held
        self.summary.missing_roots = [c for c in self.summary.roots if not store.has(c)]


def import_car(
    replica: Replica, path: Path, *, progress: Callable[[int], None] | None = None
) -> ImportSummary:
    """Ingest the CAR file `path`. A tampered block is rejected, a block that is no record is
    skipped, and the reading goes on; a broken frame (`CarError`, kept in `.error`) ends it
    after every valid block before it was ingested. `progress` hears the bytes read so far."""
    summary = ImportSummary(str(path))
    state = _Import(replica, summary)
    try:
        with path.open("rb") as fh:
            try:
                summary.roots, blocks = read_car(fh, max_header=MAX_HEADER, max_block=MAX_BLOCK,
                                                 on_mismatch=state.tampered, on_other=state.other)
                for cid, data in blocks:
                    state.block(cid, data)
                    if progress is not None and not state.batch:
                        progress(fh.tell())
            except CarError as exc:
                summary.error = exc
            state.finish()
    except OSError as exc:
        raise ConvgraphError(f"cannot read {path}: {exc}") from exc
    return summary
