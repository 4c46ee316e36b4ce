"""What every command of `convgraph` shares: the consoles, the error shell, opening the replica,
naming the conversation, the record summaries, JSON output and the common options.

The command modules (`main` and the ones `commands.LAZY` loads) import this module; it imports
none of them, so the command group is assembled in one direction. Invariant: text others
wrote reaches the terminal only through `safe_text` and consoles that read no markup.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import wraps
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click
from rich.console import Console
from rich.text import Text

from convgraph.cli import aliases, hints, home, inputs
from convgraph.core import safe_text, suggestions
from convgraph.core.codec import to_json
from convgraph.core.hlc import Hlc
from convgraph.core.keys import actor_text, fingerprint
from convgraph.core.record import Record, load_trusted
from convgraph.core.rooted import is_rooted
from convgraph.core.text import check_text
from convgraph.errors import ConvgraphError, InvalidTextError

if TYPE_CHECKING:  # the replica is imported when a command opens one, not for --help
    from convgraph.replica import Replica

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _console(**options: Any) -> Console:
    """A console that reads COLUMNS when it prints, not when this module is imported (rich keeps
    the value it saw at construction), so a command run in-process sees its own environment."""
    made = Console(**options)
    made._width = None  # rich has no public way to unpin it
    return made


# no markup or emoji codes: "[bold]" or ":smile:" in a record's text is printed as written
out = _console(highlight=False, soft_wrap=True, markup=False, emoji=False)
# soft_wrap: an error and its hint (a command to copy) are never broken across lines
err = _console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)


def error_line(label: str, message: str) -> Text:
    """`label` in red, then `message` (which may quote foreign text) made safe for one line."""
    return Text.assemble((label, "red"), " ", safe_text.line(message))


def _errors(fn: Callable[_P, _T]) -> Callable[_P, _T]:
    @wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return fn(*args, **kwargs)
        except ConvgraphError as exc:
            err.print(error_line("error:", str(exc)))
            then = hints.hint(exc)
            if then is not None:
                err.print(error_line("hint:", then))
            sys.exit(2)

    return run


@contextmanager
def _replica(ctx: click.Context) -> Iterator[Replica]:
    """The replica in the command's home, which must be there (`NoReplicaError` otherwise)."""
    with home.opened(ctx) as replica:
        yield replica


def conversation(ctx: click.Context, name: str | None) -> str:
    """The conversation `--conv name` stands for, to read: with no name, the alias `default`,
    or the legacy conversation `default` an older replica wrote when there is no such alias."""
    table = aliases.load(ctx.obj["home"])
    return aliases.resolve(table, aliases.DEFAULT if name is None else name, lambda: _held(ctx))


def _held(ctx: click.Context) -> list[str]:
    """The conversations the command's replica holds (read only to resolve a short id)."""
    with home.opened(ctx) as replica:
        return replica.conversations()


@contextmanager
def writing(ctx: click.Context, replica: Replica, name: str | None) -> Iterator[str]:
    """The conversation to write in, as `conversation(name)`; except that with no name and no
    `default` alias it roots a new conversation and aliases it `default`, together with the
    caller's write: if that fails, neither the conversation nor the alias is left behind."""
    if name is not None or aliases.DEFAULT in aliases.load(ctx.obj["home"]):
        yield inputs.existing(ctx.obj["home"], replica, name)  # a write never starts a named one
        return
    with aliases.editing(ctx.obj["home"]) as table:
        if aliases.DEFAULT in table:  # another process made it while we waited for the lock
            yield table[aliases.DEFAULT]
            return
        orphan = _unaliased_default(replica, table)
        if orphan is not None:  # a crash came between its genesis and the alias file
            table[aliases.DEFAULT] = orphan
            err.print(f"alias {aliases.DEFAULT!r} names {orphan} again (it was lost before it was saved)")
            yield orphan
            return
        with replica.store.transaction():
            conv = table[aliases.DEFAULT] = replica.create(aliases.DEFAULT)
            yield conv
    err.print(f"created conversation {conv}, alias {aliases.DEFAULT!r}")
    if replica.heads(aliases.DEFAULT):
        err.print(f"the legacy conversation {aliases.DEFAULT!r} is left as it was: "
                  f"`{suggestions.MIGRATE(conv=aliases.DEFAULT)}` copies it into a rooted one")


def _unaliased_default(replica: Replica, table: Mapping[str, str]) -> str | None:
    """The conversation `writing` rooted for the alias `default` whose alias was never saved:
    owned by this key, titled `default`, named by no alias (the earliest, if several)."""
    named = set(table.values())
    found: list[tuple[Hlc, str]] = []
    for conv in replica.store.conversations():
        first = replica.store.first(conv) if is_rooted(conv) and conv not in named else None
        if first is None:
            continue
        genesis = load_trusted(first[1], first[0])
        if (genesis.kind == "genesis" and genesis.actor == replica.actor
                and genesis.payload.get("title") == aliases.DEFAULT):
            found.append((genesis.hlc, conv))
    return min(found)[1] if found else None


def record_json(r: Record) -> dict[str, Any]:
    """A record as JSON: its fields in DAG-JSON form plus `cid` and the actor's fingerprint."""
    body = to_json(r.to_map())
    body["actor"] = actor_text(r.actor)
    body["sig"] = r.sig.hex()
    return {"cid": str(r.cid), "fingerprint": fingerprint(r.actor), **body}


_SUMMARY_FIELDS = ("content", "text", "body", "question", "name", "title")


def summary(r: Record, width: int = 60) -> str:
    """One line saying what a record holds, for listings."""
    p = r.payload
    raw: Any
    if r.kind in ("grant", "revocation") and "rights" in p:  # whom it concerns, not a text
        raw = f"{fingerprint(p['grantee'])[:8]} {', '.join(p['rights'])}"
    else:
        raw = next((p[f] for f in _SUMMARY_FIELDS if f in p), "")
    if not isinstance(raw, str):
        raw = json.dumps(to_json(raw), separators=(",", ":"))
    text = safe_text.line(" ".join(raw.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def _kind(r: Record) -> str:
    return r.kind + (f" [{safe_text.line(r.branch)}]" if r.branch else "")


def _label(r: Record) -> str:
    return f"{str(r.cid)[-10:]} {fingerprint(r.actor)[:8]}#{r.seq} {_kind(r)}  {summary(r)}"


def _emit(data: Any) -> None:
    click.echo(safe_text.json_text(data))


def _emit_stream(head: dict[str, Any], name: str, items: Iterable[Any]) -> None:
    """`_emit({**head, name: list(items)})` written item by item: the same JSON value, in
    memory bounded by one item. `head` is not empty and `name` sorts after its keys."""
    opening = safe_text.json_text(head)  # '{\n  "a": 1,\n  "b": 2\n}'
    click.echo(f"{opening[:-2]},\n  {json.dumps(name)}: [", nl=False)
    first = True
    for item in items:
        body = safe_text.json_text(item).replace("\n", "\n    ")
        click.echo(("\n    " if first else ",\n    ") + body, nl=False)
        first = False
    click.echo("]\n}" if first else "\n  ]\n}")


class _Text(click.types.StringParamType):
    """Text that can be written: an argument that is not UTF-8 is a usage error (exit 2)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return check_text(super().convert(value, param, ctx), "the value")
        except InvalidTextError as exc:
            self.fail(exc.message, param, ctx)


TEXT = _Text()
conv_option = click.option(
    "--conv", default=None, type=TEXT,
    help="Conversation: an alias, a rooted id or a legacy name.  [default: the alias 'default']",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
