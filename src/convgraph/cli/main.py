"""The `convgraph` command: a thin shell over `Replica` (argument parsing and output only).

Every command takes `--home DIR` (or `CONVGRAPH_HOME`, default `./.convgraph`): only `init`
creates a replica there, any other command on a directory with none exits 2 saying so
(`cli/home.py`). Where it concerns one conversation, `--conv C`: a local alias, a rooted
conversation id, or the literal name of a legacy conversation (`aliases.resolve`). Without
it, the conversation is the alias `default`; the first write with no such alias creates a
rooted conversation and aliases it `default`. `--json` prints machine output on stdout;
content and payloads may come from `-` (stdin) or `@FILE`, and a CID may be cut short as
`log` prints it (`cli/inputs.py`). A `ConvgraphError` exits 2 with its message (and a hint,
`cli/hints.py`); `verify` exits 1 when any stored record fails or two equivocate. Text that
others wrote (record content, names, a server's words) reaches the terminal only through
`safe_text`, and the consoles read no Rich markup, so no control sequence or "[style]" in it
acts on the terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click
from rich.highlighter import JSONHighlighter
from rich.text import Text

from convgraph.cli import commands, compacted, graph_view, home, inputs, listing
from convgraph.cli.shared import (
    TEXT,
    _emit,
    _emit_stream,
    _errors,
    _kind,
    _label,
    _replica,
    conv_option,
    err,
    error_line,
    json_option,
    out,
    record_json,
    summary,
    writing,
)
from convgraph.core import safe_text, suggestions
from convgraph.core.codec import from_json
from convgraph.core.keys import actor_text, fingerprint
from convgraph.core.kinds import KINDS
from convgraph.core.record import Record
from convgraph.core.rooted import is_rooted
from convgraph.errors import CompactedError
from convgraph.replica.home import DB_FILE, replace_lost_key

if TYPE_CHECKING:  # the replica is imported when a command opens one, not for --help
    pass

@click.group(cls=commands.LazyGroup)
@click.option(
    "--home", envvar="CONVGRAPH_HOME", default=".convgraph", show_default=True,
    type=click.Path(path_type=Path), help=home.HELP,
)
@click.option("--no-pager", "pager", is_flag=True, flag_value=False, default=True,
              help=f"Print long listings straight through (else paged on a terminal: ${listing.PAGER_ENV}, "
                   "$PAGER or less).")
@click.version_option(package_name="convgraph")
@click.pass_context
def cli(ctx: click.Context, home: Path, pager: bool) -> None:
    """convgraph: signed, content-addressed causal transcripts for agent conversations."""
    ctx.ensure_object(dict)
    ctx.obj["home"] = home
    ctx.obj["pager"] = pager


@cli.command()
@click.option("--new-key", is_flag=True,
              help="Only when the key is gone and the store is not: go on as a new author with a new key.")
@json_option
@click.pass_context
@_errors
def init(ctx: click.Context, new_key: bool, as_json: bool) -> None:
    """Create the replica (store and device key) in --home; one that exists is left as it is."""
    where: Path = ctx.obj["home"]
    created = not (where / DB_FILE).exists()
    if new_key:
        replace_lost_key(where)
    with home.opened(ctx, create=True) as r:
        info: dict[str, Any] = {"home": str(where), "actor": actor_text(r.actor),
                                "fingerprint": fingerprint(r.actor), "created": created}
    if as_json:
        _emit(info)
    else:
        out.print(f"replica  {safe_text.line(str(where))}{' (created)' if created else ''}\n"
                  f"actor    {info['actor']}\nprint    {info['fingerprint']}")


@cli.command()
@click.argument("kind", type=click.Choice(sorted({*KINDS, "system_prompt"})))  # genesis: `new` writes it
@click.argument("payload", type=inputs.CONTENT)
@click.option("--ref", "refs", multiple=True, help="CID of an artifact the record speaks about.")
@click.option("--branch", default=None, type=TEXT, help="Branch the record belongs to.")
@conv_option
@json_option
@click.pass_context
@_errors
def append(  # noqa: PLR0917 - click passes options positionally
    ctx: click.Context, kind: str, payload: str, refs: tuple[str, ...], branch: str | None,
    conv: str | None, as_json: bool,
) -> None:
    """Append a record of KIND with PAYLOAD (a DAG-JSON object; - reads stdin, @FILE a file)."""
    try:
        body = from_json(json.loads(payload))
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"payload is not JSON ({exc}): expected a JSON object such as "
                                 '\'{"content": "hi"}\'', param_hint="PAYLOAD") from exc
    if not isinstance(body, dict):
        raise click.BadParameter(f"expected a JSON object, got a {type(body).__name__}", param_hint="PAYLOAD")
    with _replica(ctx) as r, writing(ctx, r, conv) as target:
        rec = r.write(target, kind, body, refs=[inputs.cid(r, x) for x in refs], branch=branch)
    if as_json:
        _emit(record_json(rec))
    else:
        out.print(str(rec.cid))


@cli.command()
@conv_option
@click.option("--graph", is_flag=True, help="Draw the DAG.")
@click.option("--last", type=click.IntRange(min=0), default=None, help="Only the final N records.")
@json_option
@click.pass_context
@_errors
def log(ctx: click.Context, conv: str | None, graph: bool, last: int | None, as_json: bool) -> None:
    """The conversation's records in canonical order, streamed (paged on a terminal).

    A time is the record's hybrid logical clock stamp: the wall clock in UTC to the millisecond,
    then, when the clock had not moved past an earlier stamp, a counter that orders the records
    stamped in that millisecond: `12:03:04.120Z c2` is counter 2 (--json keeps `hlc` as
    [wall_ms, counter]). The counter is not a time zone.
    """
    with _replica(ctx) as r:
        target = inputs.existing(ctx.obj["home"], r, conv)
        heads = r.heads(target)
        records = r.iter_records(target) if last is None else iter(r.records(target, last=last))
        if as_json:
            _emit_stream({"conv": target, "heads": [str(h) for h in heads]}, "records",
                         (record_json(x) for x in records))
            return
        with listing.paged(ctx.obj["pager"]) as write:
            if graph:
                for line in graph_view.render(list(records), _label):
                    write(line)
                return
            count = 0
            write(_LOG_HEADER)
            for line in listing.rows(_log_cells(records), _LOG_WIDTHS):
                count += 1
                write(line)
            write(f"{count} records, {len(heads)} head(s)")


_LOG_WIDTHS: Final = (10, 8, 6, 26, 16)
_LOG_HEADER: Final = next(listing.rows([("cid", "author", "seq", "time (UTC)", "kind", "content")],
                                       _LOG_WIDTHS))


def _log_cells(records: Iterable[Record]) -> Iterator[tuple[str, ...]]:
    for x in records:
        yield (str(x.cid)[-10:], fingerprint(x.actor)[:8], str(x.seq), listing.when(x.hlc), _kind(x),
               summary(x))


@cli.command()
@click.argument("cid")
@json_option
@click.pass_context
@_errors
def show(ctx: click.Context, cid: str, as_json: bool) -> None:
    """One record by CID (or a short one, as `log` prints it)."""
    with _replica(ctx) as r:
        found = inputs.cid(r, cid)
        try:
            rec = r.get(found)
        except CompactedError:
            compacted.show(r, found, as_json=as_json)
            return
        notes = [f for f in r.authority(rec.conv).findings() if f.cid == rec.cid] \
            if is_rooted(rec.conv) else []
    body = record_json(rec)
    if notes:  # a stale decision, or one that omitted a review (docs/authority.md §8)
        body["authority"] = [f.to_json() for f in notes]
    if as_json:
        _emit(body)
        return
    for f in notes:
        err.print(error_line(f.kind.upper(), f.sentence()))
    for key in ("cid", "conv", "kind", "branch", "actor", "fingerprint", "seq", "hlc", "parents", "refs"):
        if key in body:
            value = body[key]
            if key in ("parents", "refs"):
                value = ", ".join(v["/"] for v in value) or "-"
            out.print(Text.assemble((f"{key:11}", "bold"), " ", safe_text.line(str(value))))
    out.print(Text("payload", "bold"))
    out.print(JSONHighlighter()(Text(safe_text.json_text(body["payload"]))))


@cli.command()
@json_option
@click.option("--repair", is_flag=True,
              help="First rebuild the turn index (a cache of the records) wherever it disagrees with them.")
@click.pass_context
@_errors
def verify(ctx: click.Context, as_json: bool, repair: bool) -> None:
    """Re-hash and re-verify every stored record, and list the findings held; exits 1 on any
    failure or when two records by one author share a seq (a record equivocation)."""
    from convgraph.cli.findings import finding_line  # noqa: PLC0415 - it imports this module

    with _replica(ctx) as r:
        repaired = r.repair_index() if repair else []
        report = r.verify()
        found = r.findings()
        pairs = r.store.equivocations()
    failures = [{"cid": str(c), "rule": e.rule, "error": str(e)} for c, e in report.failures]
    if as_json:
        _emit({"checked": report.checked, "ok": report.ok and not pairs, "failures": failures,
               **({"repaired": repaired} if repair else {}),
               "headers_only": report.headers_only, "blocks_checked": report.blocks_checked,
               "missing_artifacts": {c: [str(x) for x in m] for c, m in report.missing_artifacts.items()},
               "findings": [f.to_json() for f in found],
               "equivocations": [[str(a), str(b)] for a, b in pairs]})
    else:
        for conv in repaired:
            out.print(f"rebuilt the turn index of {safe_text.line(conv)} from its records")
        for f in failures:
            err.print(error_line("FAIL", f"{f['cid']} {f['rule']}: {f['error']}"))
        out.print(f"{report.checked} records checked, {len(failures)} failed")
        if report.blocks_checked:
            out.print(f"{report.blocks_checked} artifact block(s) re-hashed")
        for conv, missing in report.missing_artifacts.items():  # not a failure: sync may bring them
            out.print(f"{safe_text.line(conv)}: {len(missing)} artifact(s) its records name are not held "
                      f"here (first {missing[0]})")
        if report.headers_only:
            out.print(f"{report.headers_only} compacted record(s) held as headers only: their signatures "
                      "cannot be re-checked, their checkpoint's snapshot and cover were")
        for a, b in pairs:
            err.print(error_line("EQUIVOCATION", f"records {a} and {b}: one author, one seq"))
        for finding in found:
            out.print(finding_line(finding))
        if found or pairs:
            out.print(f"{len(found)} finding(s), {len(pairs)} record equivocation(s); "
                      f"`{suggestions.FINDINGS_SAVE}` writes their proofs")
    if not report.ok or pairs:
        sys.exit(1)


@cli.command()
@click.option("--dir", "where", type=click.Path(path_type=Path), default=None,
              help="Keep the demo's replicas in DIR, the conversation aliased 'trip' in each "
                   "(else they are made in a temporary directory and deleted at the end).")
@json_option
@_errors
def demo(where: Path | None, as_json: bool) -> None:
    """Two replicas write concurrently, exchange records, verify and print the DAG."""
    from convgraph.cli.demo import run  # noqa: PLC0415 - only the demo needs it

    summary = run(err if as_json else out, where)  # with --json the story goes to stderr
    if as_json:
        _emit(summary)


home.add_everywhere(cli)  # the commands above; `commands.load` gives the others theirs
