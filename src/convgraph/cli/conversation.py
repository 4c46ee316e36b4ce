"""The conversation commands: `say`, `system`, `transcript`, `branch`, `merge` (`checkpoint`:
cli/witness.py).

A thin shell over `Replica.say/set_system/system/transcript/resume/request/branch/merge`;
registered on the main group by `register`. Provider formats print the exact JSON list a
request would carry (`messages`, `input` or `contents`); `--request` the whole request's
kwargs, system prompt placed.
"""

from __future__ import annotations

import json
from typing import Any

import click

from convgraph.cli import inputs, listing
from convgraph.cli.shared import TEXT, _emit, _errors, _replica, conv_option, err, json_option, out, writing
from convgraph.core import safe_text, suggestions
from convgraph.core.cid import CID
from convgraph.core.codec import from_json, to_json
from convgraph.core.keys import fingerprint
from convgraph.errors import NotFoundError
from convgraph.projections.resume import PROVIDERS, to_provider
from convgraph.projections.turn import Role, ToolCall, Turn
from convgraph.replica import Replica


def _turn_json(t: Turn) -> dict[str, Any]:
    body: dict[str, Any] = {
        "op": str(t.op), "role": t.role.value, "content": to_json(list(t.content)),
        "author": fingerprint(t.author), "hlc": [t.hlc.wall_ms, t.hlc.counter],
        "conversation": t.conversation,
    }
    if t.tool_calls:
        body["tool_calls"] = [{"id": c.id, "name": c.name, "input": to_json(c.input)} for c in t.tool_calls]
    if t.tool_use_id is not None:
        body["tool_use_id"] = t.tool_use_id
    if t.branch is not None:
        body["branch"] = t.branch
    return body


_WIDTHS = (10, 8, 9)


def _cells(t: Turn) -> tuple[str, str, str, str]:
    """A turn's row; its content keeps its line breaks, which `listing.rows` indents."""
    calls = "".join(f" → {safe_text.line(c.name)}({json.dumps(to_json(c.input))})" for c in t.tool_calls)
    answer = f"[{safe_text.line(t.tool_use_id)}] " if t.tool_use_id else ""
    return str(t.op)[-10:], fingerprint(t.author)[:8], t.role.value, answer + safe_text.block(t.text) + calls


def _tool_call(text: str) -> ToolCall:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"--tool-call is not JSON: {exc}") from exc
    shaped = isinstance(raw, dict) and {"id", "name"} <= raw.keys()
    if not (shaped and isinstance(raw.get("input", {}), dict)):
        raise click.BadParameter('--tool-call must be {"id": …, "name": …, "input": {…}}')
    return ToolCall(str(raw["id"]), str(raw["name"]), from_json(raw.get("input", {})))


def _held(r: Replica, conv: str, text: str) -> CID:
    """The record `text` names, which must be one of `conv`'s (`NotFoundError` otherwise)."""
    cid = inputs.cid(r, text)
    meta = r.store.metas([cid]).get(cid)
    if meta is None:
        raise NotFoundError(f"this replica holds no record {cid}: expected one of the conversation's "
                            f"records (`{suggestions.LOG_CONV(conv=conv)}` lists them)")
    if meta.conv != conv:
        there, here = safe_text.line(meta.conv), safe_text.line(conv)
        raise NotFoundError(f"record {cid} belongs to conversation {there}, not to {here}: give "
                            f"--conv {there}, or a record of {here}")
    return cid


def register(cli: click.Group) -> None:
    """Add the conversation commands to `cli`."""

    @cli.command()
    @click.argument("text", type=inputs.CONTENT)
    @click.option("--role", type=click.Choice([r.value for r in Role]), default="user", show_default=True)
    @click.option("--tool-call", "tool_calls", multiple=True, type=TEXT,
                  help='Assistant only: {"id","name","input"}.')
    @click.option("--tool-use-id", default=None, type=TEXT, help="Tool only: the call this result answers.")
    @click.option("--error", "is_error", is_flag=True, help="Tool only: the call failed.")
    @click.option("--branch", default=None, type=TEXT, help="Say it on this branch.")
    @click.option("--attach", "attachments", multiple=True, type=click.Path(dir_okay=False, exists=True),
                  help="A file to store as an artifact and name in the turn's refs (repeatable).")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def say(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, text: str, role: str, tool_calls: tuple[str, ...], tool_use_id: str | None,
        is_error: bool, branch: str | None, attachments: tuple[str, ...], conv: str | None, as_json: bool,
    ) -> None:
        """Append one turn (TEXT; - reads stdin, @FILE a file) to the conversation as --role."""
        calls = [_tool_call(c) for c in tool_calls]
        with _replica(ctx) as r, writing(ctx, r, conv) as target:
            rec = r.say(target, role, text, tool_calls=calls, tool_use_id=tool_use_id, is_error=is_error,
                        branch=branch, attachments=attachments)
        if as_json:
            _emit({"cid": str(rec.cid), **({"refs": [str(c) for c in rec.refs]} if attachments else {})})
        else:
            out.print(str(rec.cid))

    _register_system(cli)

    @cli.command()
    @click.option("--format", "fmt", type=click.Choice(["text", "json", *PROVIDERS]), default="text",
                  show_default=True, help="Plain text, turns as JSON, or a provider's request messages.")
    @click.option("--last", type=click.IntRange(min=0), default=None, help="Only the final N turns.")
    @click.option("--branch", default=None, type=TEXT, help="The branch's transcript (main when absent).")
    @click.option("--request", "request", type=click.Choice(PROVIDERS), default=None,
                  help="Print the whole request's kwargs for this provider, system prompt placed.")
    @conv_option
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output (as --format json).")
    @click.pass_context
    @_errors
    def transcript(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, fmt: str, last: int | None, branch: str | None, request: str | None,
        conv: str | None, as_json: bool,
    ) -> None:
        """The conversation's transcript: turns in canonical order, repaired for a provider."""
        if as_json and fmt == "text":
            fmt = "json"
        with _replica(ctx) as r:
            target = inputs.existing(ctx.obj["home"], r, conv)
            if request is not None:
                if last == 0:
                    raise click.BadParameter("a resume window holds at least one turn", param_hint="--last")
                _emit(to_json(r.request(target, request, last=last, branch=branch)))
                return
            if fmt in PROVIDERS:
                if last == 0:
                    raise click.BadParameter("a resume window holds at least one turn", param_hint="--last")
                window = r.resume_window(target, last=last, branch=branch)
                if window.widened:
                    err.print(f"note: widened --last {last} by {window.widened} turn(s) to start on a user "
                              "turn with text, as every provider requires")
                _emit(to_json(to_provider(window.turns, fmt)))
                return
            turns = r.transcript(target, branch=branch, last=last)
        if fmt == "json":
            _emit({"conv": target, "branch": branch, "turns": [_turn_json(t) for t in turns]})
            return
        with listing.paged(ctx.obj["pager"]) as write:
            for line in listing.rows([("op", "author", "role", "content"), *map(_cells, turns)], _WIDTHS):
                write(line)
            write(f"{len(turns)} turns")

    @cli.command()
    @click.argument("name", type=TEXT)
    @click.option("--at", "at", required=True, help="CID (or a short one) of the record to fork from.")
    @click.option("--purpose", default=None, type=TEXT)
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def branch(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, name: str, at: str, purpose: str | None, conv: str | None, as_json: bool
    ) -> None:
        """Fork the conversation at record --at as branch NAME (then `say --branch NAME`)."""
        with _replica(ctx) as r:
            target = inputs.existing(ctx.obj["home"], r, conv)
            rec = r.branch(target, name, _held(r, target, at), purpose=purpose)
        _emit({"cid": str(rec.cid)}) if as_json else out.print(str(rec.cid))

    @cli.command()
    @click.argument("name", type=TEXT)
    @click.option("--accept", "accepted", multiple=True,
                  help="CID (or a short one) of a branch turn main accepts.")
    @click.option("--summary", default=None, type=inputs.CONTENT,
                  help="The synthesis main shows, as text (- reads stdin, @FILE a file).")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def merge(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, name: str, accepted: tuple[str, ...], summary: str | None, conv: str | None,
        as_json: bool,
    ) -> None:
        """Merge branch NAME into main: join every head, recording what was accepted."""
        with _replica(ctx) as r:
            target = inputs.existing(ctx.obj["home"], r, conv)
            rec = r.merge(target, name, accepted=[_held(r, target, c) for c in accepted], content=summary)
        _emit({"cid": str(rec.cid)}) if as_json else out.print(str(rec.cid))


def _register_system(cli: click.Group) -> None:
    """Add `system` to `cli`: the conversation's system prompt, set or shown."""

    @cli.command()
    @click.argument("text", type=inputs.CONTENT, required=False)
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def system(ctx: click.Context, text: str | None, conv: str | None, as_json: bool) -> None:
        """Set the conversation's system prompt to TEXT ("" clears it); without TEXT, print it."""
        if text is None:
            with _replica(ctx) as r:
                target = inputs.existing(ctx.obj["home"], r, conv)
                prompt = r.system(target)
            if as_json:
                _emit({"conv": target, "system": prompt})
            elif prompt is None:
                err.print("no system prompt")
            else:
                out.print(safe_text.block(prompt))
            return
        with _replica(ctx) as r, writing(ctx, r, conv) as target:
            rec = r.set_system(target, text)
        _emit({"cid": str(rec.cid)}) if as_json else out.print(str(rec.cid))
