"""Where a command's replica lives, and that it is there: `--home DIR` on every command.

The group's `--home` (or `CONVGRAPH_HOME`, default `./.convgraph`) names the replica's
directory; each command takes `--home` too (`convgraph init --home X`), and the nearer one
wins. Only `init` creates a replica: every other command on a directory with none stops with
`NoReplicaError` (exit 2), naming the path and the `init` command, so a mistyped `--home`
never makes a new store and a new signing key. A replica whose `actor.key` is lost can still
be read: the commands in `READ_ONLY` open it, saying once on stderr that writes need the key;
any other stops with `MissingKeyError`. Invariant: no command but `init` creates a file in a
home that holds no replica, and none outside `READ_ONLY` runs without the key.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from convgraph.core import safe_text, suggestions
from convgraph.replica import home as replica_home
from convgraph.replica.home import KEY_FILE

if TYPE_CHECKING:  # imported by `opened`: `--help` and completion never open a replica
    from convgraph.replica import Replica
    from convgraph.store.sqlite import Synchronous

HELP: Final = f"Replica directory (env CONVGRAPH_HOME; created only by `{suggestions.INIT_HERE}`)."
# commands that read no replica: the demo makes its own, verify-evidence reads only its file
WITHOUT_HOME: Final = frozenset({"demo", "verify-evidence"})
# commands that sign nothing, so they run on a replica whose key is lost (by command path)
READ_ONLY: Final = frozenset({
    "alias", "cat", "checkpoint status", "conversations", "export", "findings", "log", "members", "show",
    "transcript", "verify", "why", "witness list",
})


def _set(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        ctx.ensure_object(dict)["home"] = value


def _option() -> click.Option:
    return click.Option(["--home"], type=click.Path(path_type=Path), default=None, expose_value=False,
                        callback=_set, help=HELP)


def add_everywhere(group: click.Group) -> None:
    """Give every command and group under `group` its own `--home` (but `WITHOUT_HOME`)."""
    for name, command in group.commands.items():
        if name in WITHOUT_HOME:
            continue
        if not any(p.name == "home" for p in command.params):
            command.params.append(_option())
        if isinstance(command, click.Group):
            add_everywhere(command)


def of(ctx: click.Context) -> Path:
    """The home the command was given."""
    home: Path = ctx.obj["home"]
    return home


def command_path(ctx: click.Context) -> str:
    """The command's path below the program (`log`, `checkpoint status`)."""
    names = []
    while ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


def reads_only(ctx: click.Context) -> bool:
    """True when the command signs nothing (`READ_ONLY`): it may run without the key."""
    return command_path(ctx) in READ_ONLY


def _note_lost_key(ctx: click.Context, home: Path) -> None:
    """Say once per command, on stderr, that this replica's key is lost and writes need it."""
    meta = ctx.find_root().meta
    if replica_home.lost_key(home) and not meta.get("convgraph.lost_key_said"):
        meta["convgraph.lost_key_said"] = True
        click.echo(safe_text.line(
            f"note: {home / KEY_FILE} is missing: reading only (a write needs the key; restore it, or "
            f"`{replica_home.init_command(home)} --new-key` goes on as a new author)"), err=True)


def required(ctx: click.Context) -> Path:
    """The home, which must hold a replica (`NoReplicaError` otherwise, saying how to make one),
    and its key unless the command only reads."""
    home = of(ctx)
    replica_home.check(home, create=False, need_key=not reads_only(ctx))
    _note_lost_key(ctx, home)
    return home


def required_key(ctx: click.Context) -> Path:
    """The home, which must hold a key at least (a PostgreSQL server keeps only its key there)."""
    home = of(ctx)
    if not (home / KEY_FILE).exists():
        replica_home.check(home, create=False)  # says what is missing and how to make it
    return home


@contextmanager
def opened(
    ctx: click.Context, *, create: bool = False, synchronous: Synchronous = "NORMAL"
) -> Iterator[Replica]:
    """The replica in the command's home, opened; made first only when `create` (for `init`).
    A command that only reads opens one whose key is lost, and says so once."""
    from convgraph.replica import Replica  # noqa: PLC0415 - see the TYPE_CHECKING import

    need_key = create or not reads_only(ctx)
    with Replica.open(of(ctx), create=create, synchronous=synchronous, need_key=need_key) as replica:
        if not need_key:
            _note_lost_key(ctx, of(ctx))
        yield replica
