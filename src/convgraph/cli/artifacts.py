"""The artifact and code-review commands: `put`, `cat`, `snapshot`, `patch`, `review`, `ask`,
`decide` (`say --attach`: cli/conversation.py).

A thin shell over `Replica.put/open_artifact/snapshot/patch/review/ask/decide`; registered on
the main group by `register`. An artifact's CID may be cut short as a record's is, among the
artifacts the replica's records name (one only `put` is named by its whole CID). Errors are
typed and exit 2 like every other command's: `ArtifactMissingError`, `ArtifactTooLargeError`,
`PatchApplyError`, `WorkingTreeError`, `WrongTargetError`, `ChoiceError`.
"""

from __future__ import annotations

import base64
import sys
from typing import BinaryIO

import click

from convgraph.artifacts.blocks import decode_manifest
from convgraph.cli import inputs
from convgraph.cli.shared import (
    TEXT,
    _emit,
    _errors,
    _replica,
    conv_option,
    err,
    error_line,
    json_option,
    out,
    writing,
)
from convgraph.core import safe_text, short_cid
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.replica import Replica
from convgraph.replica.code import VERDICTS


def artifact_cid(r: Replica, text: str) -> CID:
    """The artifact `text` names: a whole CID, or a short one (as `short_cid`) among the
    artifacts some held record names."""
    text = text.strip()
    named: list[CID] = []

    def lookup(head: bytes, tail: bytes, limit: int) -> list[CID]:
        if not named:
            named.extend(sorted({c for conv in r.conversations() for c in r.store.artifact_refs(conv)}))
        return [c for c in named if bytes(c).startswith(head) and bytes(c).endswith(tail)][:limit]

    return short_cid.resolve(text, lookup)


def artifact_size(r: Replica, cid: CID) -> int | None:
    """The artifact's size as its one block or its manifest says; None when not held."""
    block = r.store.get_block(cid)
    if block is None:
        return None
    return decode_manifest(block).size if cid.codec == DAG_CBOR else len(block)


def _stdin() -> BinaryIO:
    return sys.stdin.buffer


def register(cli: click.Group) -> None:
    """Add the artifact commands to `cli`."""

    @cli.command()
    @click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
    @json_option
    @click.pass_context
    @_errors
    def put(ctx: click.Context, file: str, as_json: bool) -> None:
        """Store FILE (- reads stdin) as an artifact, streamed, and print its CID."""
        with _replica(ctx) as r:
            cid = r.put(_stdin() if file == "-" else file)
            size = artifact_size(r, cid)
        _emit({"cid": str(cid), "size": size}) if as_json else out.print(str(cid))

    @cli.command()
    @click.argument("cid")
    @click.option("--json", "as_json", is_flag=True,
                  help="Print {cid, size, base64} instead of the raw bytes (read whole into memory).")
    @click.pass_context
    @_errors
    def cat(ctx: click.Context, cid: str, as_json: bool) -> None:
        """Write the artifact CID's bytes to stdout, streamed, each block checked before it is
        written (a block that fails stops the stream: exit 2 after what was written)."""
        with _replica(ctx) as r:
            found = artifact_cid(r, cid)
            if as_json:
                data = r.get_artifact(found)
                _emit({"cid": str(found), "size": len(data), "base64": base64.b64encode(data).decode()})
                return
            sink = sys.stdout.buffer
            for block in r.open_artifact(found):
                sink.write(block)
            sink.flush()

    @cli.command()
    @click.argument("paths", nargs=-1, required=True, type=click.Path())
    @click.option("--root", type=click.Path(file_okay=False, exists=True), default=None,
                  help="The tree's paths are relative to this directory.  [default: the working directory]")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def snapshot(
        ctx: click.Context, paths: tuple[str, ...], root: str | None, conv: str | None, as_json: bool,
    ) -> None:
        """Snapshot the files under PATHS as a code_snapshot (symlinks are reported, not followed)."""
        with _replica(ctx) as r, writing(ctx, r, conv) as target:
            made = r.snapshot(target, list(paths), root=root)
        if as_json:
            _emit({"cid": str(made.record.cid), "tree": {k: str(v) for k, v in sorted(made.tree.items())},
                   "skipped": [{"path": s.path, "reason": s.reason} for s in made.skipped]})
            return
        for s in made.skipped:
            click.echo(f"skipped {safe_text.line(s.path)}: {safe_text.line(s.reason)}", err=True)
        out.print(str(made.record.cid))

    @cli.command()
    @click.argument("diff", type=click.File("rb"))
    @click.option("--base", required=True, help="CID (or a short one) of the artifact the diff applies to.")
    @click.option("--path", default=None, help="The file's path.  [default: the diff's +++ name]")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def patch(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, diff: BinaryIO, base: str, path: str | None, conv: str | None, as_json: bool,
    ) -> None:
        """Apply the unified DIFF (a file, or - for stdin) to --base and record the patch."""
        text = diff.read()
        with _replica(ctx) as r:
            base_cid = artifact_cid(r, base)
            with writing(ctx, r, conv) as target:
                rec = r.patch(target, base_cid, text, path=path)
        if as_json:
            _emit({"cid": str(rec.cid), "base": str(base_cid), "result": str(rec.payload["result"])})
        else:
            out.print(str(rec.cid))

    _register_review(cli)


def _register_review(cli: click.Group) -> None:
    """Add `review`, `ask` and `decide` to `cli`."""

    @cli.command()
    @click.argument("target")
    @click.option("--verdict", type=click.Choice(VERDICTS), default="comment", show_default=True)
    @click.option("--body", required=True, type=inputs.CONTENT,
                  help="The review (- reads stdin, @FILE a file).")
    @click.option("--line", type=click.IntRange(min=0), default=None, help="The line it is about.")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def review(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, target: str, verdict: str, body: str, line: int | None, conv: str | None,
        as_json: bool,
    ) -> None:
        """Review TARGET, the exact code_snapshot or patch record (a CID or a short one)."""
        with _replica(ctx) as r:
            where = inputs.existing(ctx.obj["home"], r, conv)
            rec = r.review(where, inputs.cid(r, target), body, verdict=verdict, line=line)
        if as_json:
            _emit({"cid": str(rec.cid), "target": str(rec.payload["target"])})
        else:
            out.print(str(rec.cid))

    @cli.command()
    @click.argument("question", type=inputs.CONTENT)
    @click.option("--subject", default=None, help="CID (or a short one) of the record the question is about.")
    @click.option("--option", "options", multiple=True, type=TEXT, help="A choice the decision may make.")
    @click.option("--reviews", type=click.IntRange(min=0), default=None,
                  help="Distinct reviews of the subject a decision needs first.")
    @click.option("--reviewer", "reviewers", multiple=True, type=TEXT,
                  help="An actor id (or a short one) whose review a decision needs first (repeatable).")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def ask(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, question: str, subject: str | None, options: tuple[str, ...], reviews: int | None,
        reviewers: tuple[str, ...], conv: str | None, as_json: bool,
    ) -> None:
        """Write a decision_request asking QUESTION about --subject (rooted conversations: the
        reviews a decision needs first, docs/authority.md §8.4)."""
        with _replica(ctx) as r:
            where = inputs.existing(ctx.obj["home"], r, conv)
            actors = [inputs.actor(r, x, [where]) for x in reviewers]
            about = None if subject is None else inputs.cid(r, subject)
            rec = r.ask(where, question, subject=about, options=options, reviews=reviews, reviewers=actors)
        _emit({"cid": str(rec.cid)}) if as_json else out.print(str(rec.cid))

    @cli.command()
    @click.argument("request")
    @click.argument("choice", type=TEXT)
    @click.option("--rationale", default=None, type=inputs.CONTENT, help="Why (- reads stdin, @FILE a file).")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def decide(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, request: str, choice: str, rationale: str | None, conv: str | None, as_json: bool,
    ) -> None:
        """Decide REQUEST (a decision_request's CID, or a short one) with CHOICE."""
        with _replica(ctx) as r:
            where = inputs.existing(ctx.obj["home"], r, conv)
            rec = r.decide(where, inputs.cid(r, request), choice, rationale=rationale)
            notes = [f for f in r.authority(where).findings() if f.cid == rec.cid]
        if as_json:
            _emit({"cid": str(rec.cid), "request": str(rec.payload["request"]),
                   "authority": [f.to_json() for f in notes]})
        else:
            out.print(str(rec.cid))
            for f in notes:  # written all the same: the record says what was decided, and when
                err.print(error_line(f.kind.upper(), f.sentence()))
