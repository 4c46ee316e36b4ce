"""Where a command's replica lives, and that it is there: `--home DIR` on every command.

The group's `--home` (or `CONVGRAPH_HOME`, default `./.convgraph`) names the replica's
directory; each command takes `--home` too (`convgraph init --home X`), and the nearer one
wins. Only `init` creates a replica: every other command on a directory with none stops with
`NoReplicaError` (exit 2), naming the path and the `init` command, so a mistyped `--home`
never makes a new store and a new signing key. Invariant: no command but `init` creates a
file in a home that holds no replica.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from convgraph import replica_home
from convgraph.replica_home import KEY_FILE

if TYPE_CHECKING:  # imported by `opened`: `--help` and completion never open a replica
    from convgraph.replica import Replica
    from convgraph.store.sqlite import Synchronous

HELP: Final = "Replica directory (env CONVGRAPH_HOME; created only by `convgraph init`)."
# commands that read no replica: the demo makes its own, verify-evidence reads only its file
WITHOUT_HOME: Final = frozenset({"demo", "verify-evidence"})


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


def required(ctx: click.Context) -> Path:
    """The home, which must hold a replica (`NoReplicaError` otherwise, saying how to make one)."""
    home = of(ctx)
    replica_home.check(home, create=False)
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
    """The replica in the command's home, opened; made first only when `create` (for `init`)."""
    from convgraph.replica import Replica  # noqa: PLC0415 - see the TYPE_CHECKING import

    with Replica.open(of(ctx), create=create, synchronous=synchronous) as replica:
        yield replica
