"""The CAR commands: `export` writes conversations to a CARv1 file, `import` ingests one.

`export` writes the heads of the chosen conversations as roots and every stored record as
a block, through a temp file renamed into place, so a failed export leaves no half file.
`import` streams the blocks (each re-hashed) into `Replica.ingest` in batches; it exits 2
on a malformed CAR, keeping the valid blocks before the fault, 1 when a record was
rejected, 0 otherwise. Registered on the main group by `register`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from convgraph.cli import safe_text
from convgraph.core.cid import CID
from convgraph.errors import CarError, ConvgraphError, NotFoundError
from convgraph.ingest import IngestReport
from convgraph.replica import Replica
from convgraph.sync.car import read_car, write_car

BATCH: Final = 1000
MAX_HEADER: Final = 1 << 22  # one ~40-byte root per conversation: room for ~100k of them
MAX_REJECTIONS_SHOWN: Final = 1000  # past this only the count grows: memory stays bounded
_PROGRESS_FROM: Final = 4 << 20


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
    tally = {"records": 0, "skipped": 0}

    def blocks() -> Iterator[tuple[CID, bytes]]:
        for conv in chosen:
            total = replica.store.count(conv)
            held = replica.store.records(conv)  # canonical order; compacted records are left out
            tally["records"] += len(held)
            tally["skipped"] += max(0, total - len(held))
            yield from held

    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    except OSError as exc:
        raise ConvgraphError(f"cannot write {path}: {exc}") from exc
    try:
        os.fchmod(fd, _new_file_mode())  # mkstemp's 0600 is for secrets; this is an ordinary file
        with os.fdopen(fd, "wb") as fh:
            size = write_car(fh, roots, blocks(), max_header=MAX_HEADER)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ConvgraphError(f"cannot write {path}: {exc}") from exc
        raise
    return {
        "file": str(path), "records": tally["records"], "roots": [str(c) for c in roots], "bytes": size,
        "skipped_compacted": tally["skipped"],
    }


@dataclass
class ImportSummary:
    """What one `import` did: counts over every batch, the first rejections, the roots."""

    file: str
    blocks: int = 0
    accepted: int = 0
    duplicates: int = 0
    quarantined: int = 0
    released: int = 0
    held: int = 0
    rejected_total: int = 0
    rejected: list[dict[str, str | None]] = field(default_factory=list)
    roots: list[CID] = field(default_factory=list)
    missing_roots: list[CID] = field(default_factory=list)
    error: CarError | None = None

    def add(self, report: IngestReport) -> None:
        self.accepted += len(report.accepted)
        self.duplicates += len(report.duplicates)
        self.quarantined += len(report.quarantined)
        self.released += len(report.released)
        self.held += len(report.held)
        self.rejected_total += len(report.rejected)
        for r in report.rejected[: max(0, MAX_REJECTIONS_SHOWN - len(self.rejected))]:
            self.rejected.append({"cid": None if r.cid is None else str(r.cid), "rule": r.rule,
                                  "error": r.error.message})

    def tampered(self, error: CarError) -> None:
        """A block whose bytes do not hash to its CID: rejected, and the import reads on."""
        self.blocks += 1
        self.rejected_total += 1
        if len(self.rejected) < MAX_REJECTIONS_SHOWN:
            self.rejected.append({"cid": error.cid, "rule": "cid", "error": error.message})

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file, "blocks": self.blocks, "accepted": self.accepted,
            "duplicates": self.duplicates, "quarantined": self.quarantined, "released": self.released,
            "held": self.held, "rejected_total": self.rejected_total, "rejected": self.rejected,
            "roots": [str(c) for c in self.roots], "roots_held": not self.missing_roots,
            "missing_roots": [str(c) for c in self.missing_roots],
            "error": None if self.error is None else str(self.error),
        }


@contextmanager
def _progress(size: int) -> Iterator[Callable[[int], None]]:
    """A bar on stderr for a big file on a terminal; elsewhere a no-op."""
    if size < _PROGRESS_FROM or not sys.stderr.isatty():
        yield lambda _done: None
        return
    from convgraph.cli.main import err  # noqa: PLC0415 - main imports this module

    columns = (TextColumn("importing"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("import", total=size)
        yield lambda done: bar.update(task, completed=done)


def import_car(replica: Replica, path: Path) -> ImportSummary:
    """Ingest the CAR file `path` in batches of `BATCH`. A block that does not hash to its CID
    is rejected and the rest still read; a broken frame (`CarError`, kept in `.error`) ends
    the reading after every valid block before it was ingested."""
    summary = ImportSummary(str(path))
    batch: list[tuple[bytes, CID]] = []
    try:
        with path.open("rb") as fh, _progress(os.fstat(fh.fileno()).st_size) as advance:
            try:
                summary.roots, blocks = read_car(fh, max_header=MAX_HEADER, on_mismatch=summary.tampered)
                for cid, data in blocks:
                    batch.append((data, cid))
                    summary.blocks += 1
                    if len(batch) == BATCH:
                        summary.add(replica.ingest(batch))
                        batch = []
                        advance(fh.tell())
            except CarError as exc:
                summary.error = exc
            if batch:
                summary.add(replica.ingest(batch))
    except OSError as exc:
        raise ConvgraphError(f"cannot read {path}: {exc}") from exc
    summary.missing_roots = [c for c in summary.roots if not replica.store.has(c)]
    return summary


def _print_import(s: ImportSummary) -> None:
    from convgraph.cli.main import err, error_line, out  # noqa: PLC0415 - main imports this module

    out.print(f"read {s.blocks} block(s) from {safe_text.line(s.file)}")
    for name in ("accepted", "duplicates", "quarantined", "released", "held"):
        out.print(f"  {name:12} {getattr(s, name)}")
    out.print(f"  {'rejected':12} {s.rejected_total}")
    for r in s.rejected:
        err.print(error_line("REJECT", f"{r['cid'] or '(no cid)'} {r['rule']}: {r['error'] or ''}"),
                  soft_wrap=True)
    if s.rejected_total > len(s.rejected):
        err.print(f"… and {s.rejected_total - len(s.rejected)} more rejections")
    held = len(s.roots) - len(s.missing_roots)
    out.print(f"roots: {held}/{len(s.roots)} held" + (" (all)" if not s.missing_roots else ""))
    for c in s.missing_roots:
        out.print(f"  missing root {c}")


def register(cli: click.Group) -> None:
    """Add `export` and `import` to `cli`."""
    from convgraph.cli.main import TEXT, _emit, _errors, _replica, err, error_line, json_option, out  # noqa: PLC0415

    @cli.command("export")
    @click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
    @click.option("--conv", "convs", multiple=True, type=TEXT,
                  help="Conversation to export (repeatable; default all).")
    @json_option
    @click.pass_context
    @_errors
    def export(ctx: click.Context, file: Path, convs: tuple[str, ...], as_json: bool) -> None:
        """Write the conversations' records to FILE as a CARv1, their heads as roots."""
        with _replica(ctx) as r:
            result = export_car(r, file, convs)
        if as_json:
            _emit(result)
            return
        out.print(f"wrote {result['records']} records, {len(result['roots'])} root(s), "
                  f"{result['bytes']} bytes to {safe_text.line(str(file))}")
        if result["skipped_compacted"]:
            out.print(f"skipped {result['skipped_compacted']} compacted record(s): only headers are kept")

    @cli.command("import")
    @click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
    @json_option
    @click.pass_context
    @_errors
    def import_(ctx: click.Context, file: Path, as_json: bool) -> None:
        """Verify and ingest the records of the CARv1 FILE; exits 1 if any is rejected."""
        with _replica(ctx) as r:
            summary = import_car(r, file)
        _emit(summary.to_json()) if as_json else _print_import(summary)
        if summary.error is not None:
            err.print(error_line("error:", str(summary.error)), soft_wrap=True)
            err.print(f"the {summary.blocks} valid block(s) read before it were ingested")
            sys.exit(2)
        if summary.rejected_total:
            sys.exit(1)
