"""The CAR commands: `export` writes conversations to a CARv1 file, `import` ingests one.

Both are thin shells over `convgraph.sync.carfile`: `export` prints what was written, and
`import` prints its summary either way and exits 2 on a malformed CAR (the valid blocks
before the fault are kept), 1 when the summary lists any problem, 0 otherwise. Registered
on the main group by `register`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from convgraph.cli.shared import (
    TEXT,
    _emit,
    _errors,
    _replica,
    conversation,
    err,
    error_line,
    json_option,
    out,
)
from convgraph.core import safe_text
from convgraph.sync.car_summary import ImportSummary
from convgraph.sync.carfile import export_car, import_car

_PROGRESS_FROM: Final = 4 << 20


@contextmanager
def _progress(size: int) -> Iterator[Callable[[int], None]]:
    """A bar on stderr for a big file on a terminal; elsewhere a no-op."""
    if size < _PROGRESS_FROM or not sys.stderr.isatty():
        yield lambda _done: None
        return

    columns = (TextColumn("importing"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("import", total=size)
        yield lambda done: bar.update(task, completed=done)


def _print_import(s: ImportSummary) -> None:

    out.print(f"read {s.blocks} block(s) from {safe_text.line(s.file)}")
    for name in ("accepted", "duplicates", "released", "quarantined", "held", "evicted"):
        out.print(f"  {name:12} {getattr(s, name)}")
    out.print(f"  {'rejected':12} {s.rejected_total}")
    out.print(f"  {'skipped':12} {s.skipped_total}")
    out.print(f"  {'artifacts':12} {s.artifacts} block(s) stored or held, "
              f"{len(s.artifacts_refused)} refused, {len(s.missing_artifacts)} missing")
    for a in s.adopted:
        out.print(f"adopted checkpoint {a['checkpoint']} of {safe_text.line(repr(a['conv']))}, signed by "
                  f"{a['signer']}: {a['covers']} compacted record(s) held on its word", soft_wrap=True)
    for r in s.rejected:
        err.print(error_line("REJECT", f"{r['cid'] or '(no cid)'} {r['rule']}: {r['error'] or ''}"),
                  soft_wrap=True)
    if s.rejected_total > len(s.rejected):
        err.print(f"… and {s.rejected_total - len(s.rejected)} more rejections")
    for k in s.skipped:
        err.print(safe_text.line(f"SKIP {k['cid']}: {k['reason']}"), soft_wrap=True)
    if s.skipped_total > len(s.skipped):
        err.print(f"… and {s.skipped_total - len(s.skipped)} more skipped blocks")
    for a in s.artifacts_refused:
        err.print(error_line("REFUSE", f"{a['cid']} {a['rule']}: {a['error'] or ''}"), soft_wrap=True)
    for c in s.missing_artifacts[:20]:
        out.print(f"  missing artifact block {c} (named by a record; sync may bring it)")
    held = len(s.roots) - len(s.missing_roots)
    out.print(f"roots: {held}/{len(s.roots)} held" + (" (all)" if not s.missing_roots else ""))
    for c in s.missing_roots:
        out.print(f"  missing root {c}")
    problems = "; ".join(s.problems)
    out.print(safe_text.line(f"problems: {problems}") if problems else "ok: every block imported",
              soft_wrap=True)


def register(cli: click.Group) -> None:
    """Add `export` and `import` to `cli`."""

    @cli.command("export")
    @click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
    @click.option("--conv", "convs", multiple=True, type=TEXT,
                  help="Conversation to export: alias, id or legacy name (repeatable; default all).")
    @json_option
    @click.pass_context
    @_errors
    def export(ctx: click.Context, file: Path, convs: tuple[str, ...], as_json: bool) -> None:
        """Write the conversations' records to FILE as a CARv1, their heads as roots."""
        names = tuple(conversation(ctx, c) for c in convs)
        with _replica(ctx) as r:
            result = export_car(r, file, names)
        if as_json:
            _emit(result)
            return
        out.print(f"wrote {result['records']} records, {len(result['roots'])} root(s), "
                  f"{result['bytes']} bytes to {safe_text.line(str(file))}")
        if result["artifact_blocks"]:
            out.print(f"with {result['artifact_blocks']} block(s) of the artifacts their records name")
        if result["compacted"]:
            out.print(f"with {result['checkpoints']} checkpoint(s) and their snapshots, covering "
                      f"{result['compacted']} compacted record(s)")

    @cli.command("import")
    @click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
    @json_option
    @click.pass_context
    @_errors
    def import_(ctx: click.Context, file: Path, as_json: bool) -> None:
        """Verify and ingest the records of the CARv1 FILE (docs/sync.md, CAR files).

        Exits 0 when everything was imported, 1 on any problem the summary lists (a block
        rejected or not a record, a record left waiting, a root missing), 2 on a broken file.
        """
        with _replica(ctx) as r, _progress(file.stat().st_size) as advance:
            summary = import_car(r, file, progress=advance)
        _emit(summary.to_json()) if as_json else _print_import(summary)
        if summary.error is not None:
            err.print(error_line("error:", str(summary.error)), soft_wrap=True)
            err.print(f"the {summary.blocks} valid block(s) read before it were ingested")
            sys.exit(2)
        if summary.problems:
            sys.exit(1)
