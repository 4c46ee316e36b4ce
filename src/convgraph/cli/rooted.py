"""The rooted-conversation commands: `new`, `migrate`, `conversations` and `alias`.

A thin shell over `Replica.create`, `migration.migrate` and the local alias table
(`cli/aliases.py`); registered on the main group by `register`. What a genesis says (its
title, the name it migrated from) was written by its owner, so it reaches the terminal only
through `safe_text`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click
from rich.table import Column, Table
from rich.text import Text

from convgraph.cli import aliases
from convgraph.cli import home as cli_home
from convgraph.cli.listing import utc, when
from convgraph.cli.shared import TEXT, _emit, _errors, _replica, err, json_option, out
from convgraph.core import safe_text, suggestions
from convgraph.core.hlc import Hlc
from convgraph.core.keys import fingerprint
from convgraph.core.record import load_trusted
from convgraph.core.rooted import is_rooted
from convgraph.errors import AliasError
from convgraph.projections.state import ConvState, Entry, entry_of
from convgraph.replica import Replica
from convgraph.replica.migration import migrate


@dataclass(frozen=True)
class Listed:
    """One conversation as `convgraph conversations` shows it."""

    conv: str
    names: list[str]
    records: int
    genesis: Entry | None
    last: Hlc | None = None  # the newest record's stamp (held with bytes): its last activity

    def to_json(self, shadowed: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"conv": self.conv, "aliases": self.names, "records": self.records,
                                "legacy": not is_rooted(self.conv),
                                "last_activity": None if self.last is None else utc(self.last),
                                "last_hlc": None if self.last is None else list(self.last)}
        if self.genesis is not None:
            body["owner"] = fingerprint(self.genesis.actor)
            for key in ("title", "migrated_from"):
                if key in self.genesis.payload:
                    body[key] = self.genesis.payload[key]
        if shadowed:
            body["shadowed"] = True  # its name is an alias now: `--conv NAME` reaches the alias
        return body


_BESIDE_TITLE = 7 + 12 + 7 + 16 + 10  # the other columns of `conversations` (a short id) and their padding


def genesis(state: ConvState) -> Entry | None:
    """The conversation's genesis (the earliest, should its owner have written two)."""
    found = [e for e in state.entries.values() if e.kind == "genesis"]
    return min(found, key=lambda e: e.order_key) if found else None


def listing(replica: Replica, table: dict[str, str]) -> list[Listed]:
    """Every conversation held or aliased: rooted ones first, each with its aliases and genesis."""
    convs = sorted({*replica.conversations(), *table.values()}, key=lambda c: (not is_rooted(c), c))
    return [
        Listed(c, aliases.names_of(table, c), replica.store.count(c),
               _genesis_of(replica, c) if is_rooted(c) else None, _last(replica, c))
        for c in convs
    ]


def _last(replica: Replica, conv: str) -> Hlc | None:
    newest = replica.store.records(conv, last=1)  # one probe of the order index, from its end
    return load_trusted(newest[0][1], newest[0][0]).hlc if newest else None


def _genesis_of(replica: Replica, conv: str) -> Entry | None:
    # every record of a rooted conversation descends from its genesis (docs/format.md §15),
    # so the genesis comes first in canonical order: one row, not a fold of the history.
    # Only when compaction dropped its bytes is the fold (from the snapshot) needed.
    first = replica.store.first(conv)
    if first is not None:
        record = load_trusted(first[1], first[0])
        if record.kind == "genesis":
            return entry_of(record)
    return genesis(replica.state(conv))


def point(ctx: click.Context, name: str, conv: str) -> None:
    """Make alias `name` name `conv`, saying on stderr which conversation it named before."""

    with aliases.editing(ctx.obj["home"]) as table:
        before, table[name] = table.get(name), conv
    if before is not None and before != conv:
        err.print(f"alias {safe_text.line(repr(name))} named {before} before")


def register(cli: click.Group) -> None:
    """Add the rooted-conversation commands to `cli`."""
    _register_new_and_migrate(cli)
    _register_listings(cli)


def _register_new_and_migrate(cli: click.Group) -> None:

    @cli.command()
    @click.argument("title", required=False, type=TEXT)
    @click.option("--alias", "alias", default=None, type=TEXT, help="A local name for it (never synced).")
    @json_option
    @click.pass_context
    @_errors
    def new(ctx: click.Context, title: str | None, alias: str | None, as_json: bool) -> None:
        """Start a rooted conversation owned by this replica's key and print its id."""
        if alias is not None:
            aliases.check_name(alias)  # before anything is written
        with _replica(ctx) as r:
            conv = r.create(title)
        if alias is not None:
            point(ctx, alias, conv)
        if as_json:
            _emit({"conv": conv, "title": title, "alias": alias})
        else:
            out.print(conv)

    @cli.command("migrate")
    @click.argument("old", type=TEXT)
    @click.option("--alias", "alias", default=None, type=TEXT,
                  help="Alias for the new conversation.  [default: OLD]")
    @json_option
    @click.pass_context
    @_errors
    def migrate_cmd(ctx: click.Context, old: str, alias: str | None, as_json: bool) -> None:
        """Copy legacy conversation OLD (its literal name) into a rooted one owned by this key.

        OLD is left as it was. Run again, it continues the same copy with what is new.
        """
        name = aliases.check_name(old if alias is None else alias)
        with _replica(ctx) as r:
            result = migrate(r, old)
        point(ctx, name, result.conv)
        if as_json:
            _emit({"conv": result.conv, "from": old, "alias": name, "created": result.created,
                   "copied": result.copied, "already": result.already})
            return
        out.print(result.conv)
        what = "started" if result.created else "continued"
        err.print(f"{what} a rooted copy of {safe_text.line(repr(old))}: {result.copied} turn(s) copied now, "
                  f"{result.already} before; alias {safe_text.line(repr(name))}; the legacy conversation "
                  "is left as it was")



def _register_listings(cli: click.Group) -> None:

    @cli.command()
    @json_option
    @click.pass_context
    @_errors
    def conversations(ctx: click.Context, as_json: bool) -> None:
        """Every conversation held here: aliases, title, record count and last activity (UTC)."""
        with _replica(ctx) as r:
            table = aliases.load(ctx.obj["home"])
            listed = listing(r, table)
        if as_json:
            _emit({"conversations": [x.to_json(x.conv in table) for x in listed]})
            return
        # fits 80 columns: a rooted id is cut short as --conv takes it back (--json: whole), the
        # title gives way, the last activity is to the minute
        title = max(4, out.width - _BESIDE_TITLE)
        view = Table(Column("alias", min_width=7, max_width=16, overflow="fold"),
                     Column("conversation", no_wrap=True, min_width=aliases.SHORT_CHARS),
                     Column("title", no_wrap=True, max_width=title, overflow="ellipsis"),
                     Column("records", no_wrap=True), Column("last (UTC)", no_wrap=True), box=None)
        for x in listed:
            shown = Text(safe_text.line(aliases.short(x.conv)))
            view.add_row(Text(safe_text.line(", ".join(x.names)) or "-"), shown,
                         _title(x, shadowed=x.conv in table), str(x.records),
                         when(x.last)[:16] if x.last else "-")
        out.print(view)
        if not listed:
            out.print(f"no conversations yet: `{suggestions.NEW}` starts one")

    @cli.command("alias")
    @click.argument("name", required=False, type=TEXT)
    @click.argument("conv", required=False, type=TEXT)
    @click.option("--remove", is_flag=True, help="Forget the alias NAME.")
    @json_option
    @click.pass_context
    @_errors
    def alias_cmd(
        ctx: click.Context, name: str | None, conv: str | None, remove: bool, as_json: bool
    ) -> None:
        """List the aliases, point NAME at CONV (an alias or a rooted id), or --remove NAME."""
        home = cli_home.required(ctx)
        if name is None:
            table = aliases.load(home)
            if as_json:
                _emit(table)
            else:
                for alias, target in sorted(table.items()):
                    out.print(Text(f"{safe_text.line(alias)}  {target}"))
            return
        aliases.check_name(name)
        if conv is None and remove:
            with aliases.editing(home) as table:
                if table.pop(name, None) is None:
                    raise AliasError(f"no alias {name!r}")
        elif conv is not None and not remove:
            target = aliases.resolve(aliases.load(home), conv)
            if not is_rooted(target):
                raise AliasError(f"an alias names a rooted conversation id, and {conv[:64]!r} is not one")
            point(ctx, name, target)
        else:
            raise click.UsageError("give NAME and CONV, or NAME and --remove")


def _title(x: Listed, *, shadowed: bool) -> Text:
    if x.genesis is None:
        note = ": its name is an alias now" if shadowed else ""
        return Text(f"legacy{note}", "yellow")
    p = x.genesis.payload
    title = safe_text.line(p["title"]) if "title" in p else ""
    if "migrated_from" in p:
        title = f"{title} (migrated from {safe_text.line(repr(p['migrated_from']))})".strip()
    return Text(title)
