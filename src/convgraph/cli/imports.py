"""`convgraph import-from langgraph | openai-agents | jsonl`: a thin shell over `convgraph.importers`.

The conversation is `--into NAME` (default `langgraph:THREAD`, `openai-agents:SESSION`,
`jsonl:FILENAME`): when NAME is an alias or a conversation id held here, the import continues
that conversation; otherwise a new one is rooted and aliased NAME, under the alias lock, so a
second run finds it and writes nothing. It prints the conversation id on stdout (`--json`: the
report) and on stderr what it wrote and every message it could not map, one line each.
`langgraph --as-thread` moves the whole thread into the conversation `ConvgraphSaver` keeps it
in (no alias); `openai-agents --as-session` appends what a `ConvgraphSession` lacks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from convgraph.cli import aliases
from convgraph.cli.shared import TEXT, _emit, _errors, _replica, err, json_option
from convgraph.core import safe_text, suggestions
from convgraph.core.rooted import is_rooted
from convgraph.errors import AliasError
from convgraph.importers import (
    ImportReport,
    import_jsonl,
    import_langgraph,
    import_langgraph_thread,
    import_openai_agents,
    import_openai_agents_session,
)
from convgraph.importers.formats import FORMATS
from convgraph.replica import Replica

Run = Callable[[Replica, str | None], ImportReport]
"""An import into a conversation id (None: a new one)."""


def register(cli: click.Group) -> None:
    """Add the `import-from` group to `cli`."""

    @cli.group("import-from")
    def import_from() -> None:
        """Import a history kept elsewhere into a conversation (again: only what is new)."""

    into_option = click.option("--into", "into", default=None, type=TEXT,
                               help="Alias or id of the conversation to import into; made when no such "
                                    "alias exists.  [default: SOURCE:ID]")
    title_option = click.option("--title", default=None, type=TEXT, help="Title of a new conversation.")
    source_path = click.argument("db", type=click.Path(path_type=Path, dir_okay=False))

    @import_from.command("langgraph")
    @source_path
    @click.option("--thread", "thread_id", required=True, type=TEXT, help="The LangGraph thread id.")
    @click.option("--channel", default="messages", show_default=True, type=TEXT,
                  help="The state channel holding the messages.")
    @click.option("--as-thread", "as_thread", is_flag=True,
                  help="The whole thread (every checkpoint, write and fork) as a thread ConvgraphSaver "
                       "continues, in the conversation it keeps THREAD in (no --into, --title).")
    @into_option
    @title_option
    @json_option
    @click.pass_context
    @_errors
    def langgraph_cmd(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, db: Path, thread_id: str, channel: str, as_thread: bool, into: str | None,
        title: str | None, as_json: bool,
    ) -> None:
        """The messages of a LangGraph SqliteSaver thread (its latest checkpoint), from database DB;
        with --as-thread, the whole thread."""
        if as_thread:
            if into is not None or title is not None:
                raise click.UsageError("--as-thread moves the thread into the conversation ConvgraphSaver "
                                       "keeps it in: --into and --title do not apply")
            _move_thread(ctx, db, thread_id, channel, as_json)
            return
        _import(ctx, into or f"langgraph:{thread_id}", as_json, lambda r, conv: import_langgraph(
            r, db, thread_id, into=conv, title=title, channel=channel))

    @import_from.command("openai-agents")
    @source_path
    @click.option("--session", "session_id", required=True, type=TEXT, help="The session id.")
    @click.option("--table", default="agent_messages", show_default=True, type=TEXT,
                  help="The SQLiteSession messages table.")
    @click.option("--as-session", "as_session", is_flag=True,
                  help="Append the items the conversation lacks for a ConvgraphSession to continue; "
                       "refused when what it holds is not their start.")
    @into_option
    @title_option
    @json_option
    @click.pass_context
    @_errors
    def agents_cmd(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, db: Path, session_id: str, table: str, as_session: bool, into: str | None,
        title: str | None, as_json: bool,
    ) -> None:
        """The items of an OpenAI Agents SDK SQLiteSession, from database DB."""
        importer = import_openai_agents_session if as_session else import_openai_agents
        _import(ctx, into or f"openai-agents:{session_id}", as_json, lambda r, conv: importer(
            r, db, session_id, into=conv, title=title, messages_table=table))

    @import_from.command("jsonl")
    @click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
    @click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                  help="The file's format.  [default: told from the file]")
    @click.option("--assistant", "assistants", multiple=True, type=TEXT,
                  help="A legacy speaker who is the assistant (besides assistant, agent, ai, bot, model).")
    @into_option
    @title_option
    @json_option
    @click.pass_context
    @_errors
    def jsonl_cmd(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, file: Path, fmt: str | None, assistants: tuple[str, ...], into: str | None,
        title: str | None, as_json: bool,
    ) -> None:
        """Saved messages in FILE: legacy {speaker, text, timestamp} lines, OpenAI Chat or Responses
        messages, or Anthropic messages; as JSON lines or one JSON array."""
        _import(ctx, into or f"jsonl:{file.name}", as_json, lambda r, conv: import_jsonl(
            r, file, into=conv, title=title, fmt=fmt, assistants=assistants))


def _import(ctx: click.Context, name: str, as_json: bool, run: Run) -> None:
    """Run the import into the conversation `name` stands for, rooting it (aliased `name`) when
    none does; then say what happened."""

    home: Path = ctx.obj["home"]
    with _replica(ctx) as r, aliases.editing(home) as table:
        conv = aliases.resolve(table, name)
        if r.heads(conv) or is_rooted(conv):  # an id not held: the import says which are
            report = run(r, conv)
            alias = name if table.get(name) == conv else None
        else:
            try:
                aliases.check_name(name)
            except AliasError as exc:
                raise AliasError(f"cannot name a new conversation {name!r}: {exc}; give --into") from None
            report = run(r, None)
            table[name], alias = report.conv, name
    _report(report, alias)
    if as_json:
        _emit({**report.to_json(), "alias": alias})
    else:
        click.echo(report.conv)


def _move_thread(ctx: click.Context, db: Path, thread_id: str, channel: str, as_json: bool) -> None:
    """Move the whole thread, then say what it wrote and how to go on."""

    with _replica(ctx) as r:
        report = import_langgraph_thread(r, db, thread_id, messages_channels=(channel,))
    what = "a new conversation" if report.created else "conversation"
    err.print(safe_text.line(
        f"moved LangGraph thread {report.origin!r} into {what} {report.conv}: {report.checkpoints} "
        f"checkpoint(s), {report.writes} task write(s), {report.turns} turn(s), {report.forks} fork(s), "
        f"{report.records} record(s); {report.checkpoints_already} checkpoint(s) and "
        f"{report.writes_already} task write(s) held before"), soft_wrap=True)
    err.print(safe_text.line(f"continue it with ConvgraphSaver on this replica and thread_id "
                             f"{report.origin!r}; read it: `{suggestions.TRANSCRIPT(conv=report.conv)}`"),
              soft_wrap=True)
    if as_json:
        _emit(report.to_json())
    else:
        click.echo(report.conv)


def _report(report: ImportReport, alias: str | None) -> None:

    named = f" (alias {safe_text.line(repr(alias))})" if alias else ""
    what = "a new conversation" if report.created else "conversation"
    fmt = f" ({report.format})" if report.format else ""
    origin = safe_text.line(repr(report.origin))
    err.print(f"imported {report.imported} record(s) from {report.source} {origin}{fmt} into {what} "
              f"{report.conv}{named}; {report.already} imported before, {len(report.unmapped)} not mapped")
    for u in report.unmapped:
        kept = " (kept in meta, left out of resume)" if u.kept else ""
        err.print(safe_text.line(f"unmapped {u.key} {u.what}{kept}: {u.reason}"), soft_wrap=True)
