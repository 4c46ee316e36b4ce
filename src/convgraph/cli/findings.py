"""`convgraph findings`: the proofs this replica holds that a peer or an author lied.

Lists each finding (docs/integrity.md §6) with its kind, conversation, id and summary; with
`--save DIR` it also writes each bundle to `DIR/<id>.cgev`, which `convgraph verify-evidence`
checks anywhere, with nothing else. Exits 0 whatever it lists. Registered by `register`.
"""

from __future__ import annotations

from pathlib import Path

import click

from convgraph.cli import journal
from convgraph.cli.shared import _emit, _errors, _replica, conv_option, conversation, json_option, out
from convgraph.core import safe_text
from convgraph.errors import ConvgraphError
from convgraph.integrity.findings import Finding, reason


def finding_line(f: Finding) -> str:
    """One line naming a finding, for listings (foreign text made safe): its kind said once."""
    return safe_text.line(f"{f.kind:20} {f.conv[:48]} {str(f.id)[-12:]}  {reason(f.kind, f.summary)}")


def save_bundles(found: list[Finding], where: Path) -> list[Path]:
    """Write each finding's bundle to `where/<id>.cgev`; returns the paths written."""
    try:
        where.mkdir(parents=True, exist_ok=True)
        paths = []
        for f in found:
            path = where / f"{f.id}.cgev"
            path.write_bytes(f.bundle)
            paths.append(path)
    except OSError as exc:
        raise ConvgraphError(f"cannot write the bundles to {where}: {exc}") from exc
    return paths


def register(cli: click.Group) -> None:
    """Add `findings` to `cli`."""

    @cli.command("findings")
    @conv_option
    @click.option("--save", "save", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="Also write each bundle to DIR/<id>.cgev (for `convgraph verify-evidence`).")
    @json_option
    @click.pass_context
    @_errors
    def findings(ctx: click.Context, conv: str | None, save: Path | None, as_json: bool) -> None:
        """The findings this replica holds (of one conversation with --conv): rollbacks,
        deletions, withholding, split views and record equivocations, each with its proof."""
        target = None if conv is None else conversation(ctx, conv)  # a finding may name one not held
        with _replica(ctx) as r:
            found = r.findings(target)
        saved = save_bundles(found, save) if save is not None else []
        journal.mark_seen(ctx.obj["home"], (str(f.id) for f in found))  # `status` counts the others
        if as_json:
            _emit({"findings": [f.to_json() for f in found]})
            return
        for f in found:
            out.print(finding_line(f))
        out.print(f"{len(found)} finding(s)" + (f", bundles written to {safe_text.line(str(save))}"
                                                 if saved else ""))
