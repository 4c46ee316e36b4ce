"""Long listings (`log`, `transcript`) as streams of lines, paged on a terminal the way git pages.

Rows are written as they are read, in fixed columns, so the first screen shows before the
last record is read and memory does not grow with the history (a table that measures every
row first cannot do either). A row's first column is a CID suffix or blank; a multi-line
cell continues on lines that start with blanks, so foreign text cannot pass for a row of its
own. On a terminal the lines go to `$CONVGRAPH_PAGER`, else `$PAGER`, else `less`, with
`LESS=FRX` when `LESS` is unset (git's choice: one screen is printed and the pager quits);
`--no-pager`, or a pager of `cat` or the empty string, prints straight through.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Final

import click

from convgraph.core import safe_text
from convgraph.core.hlc import Hlc

PAGER_ENV: Final = "CONVGRAPH_PAGER"
_NO_PAGER: Final = frozenset({"", "cat"})


def utc(hlc: Hlc) -> str:
    """The stamp as a UTC time to the millisecond; a counter above 0 follows as `+n` (the form
    `--json` has always given: machine readers keep it)."""
    text = _wall(hlc)
    return text + (f"+{hlc.counter}" if hlc.counter else "")


def when(hlc: Hlc) -> str:
    """The stamp for a person: UTC to the millisecond, then a counter above 0 as ` cN`, which
    cannot pass for a time zone as `+N` did (`convgraph log --help` explains it)."""
    text = _wall(hlc)
    return text + (f" c{hlc.counter}" if hlc.counter else "")


def _wall(hlc: Hlc) -> str:
    wall = datetime.fromtimestamp(hlc.wall_ms / 1000, tz=UTC)
    return wall.strftime("%Y-%m-%d %H:%M:%S.") + f"{hlc.wall_ms % 1000:03d}Z"


def rows(cells: Iterable[tuple[str, ...]], widths: tuple[int, ...]) -> Iterator[str]:
    """Each tuple as one line in columns of at least `widths`; the last cell may hold line
    breaks, and its further lines are indented to its column (tabs become spaces, so no
    control character but the newline is written)."""
    indent = sum(w + 2 for w in widths)
    for row in cells:
        *fixed, last = row
        head = "".join(cell.ljust(width) + "  " for cell, width in zip(fixed, widths, strict=True))
        first, *more = last.expandtabs(8).split("\n")
        yield (head + first).rstrip()
        for line in more:
            yield (" " * indent + line).rstrip()


def one_line(text: str) -> str:
    """Foreign text for a single cell: no control, bidi or line-breaking character raw."""
    return safe_text.line(text)


@contextmanager
def paged(enabled: bool) -> Iterator[Callable[[str], None]]:
    """A writer of whole lines: into a pager when `enabled` and stdin and stdout are terminals,
    else to stdout. A pager the reader quits early ends the stream quietly."""
    pager = os.environ.get(PAGER_ENV)
    if not enabled or (pager is not None and pager.strip() in _NO_PAGER) or not _terminal():
        yield _echo
        return
    saved = {name: os.environ.get(name) for name in ("PAGER", "LESS")}
    if pager is not None:
        os.environ["PAGER"] = pager
    if os.environ.get("PAGER", "less").strip() in _NO_PAGER:
        yield _echo
        return
    os.environ.setdefault("LESS", "FRX")
    try:
        with click.get_pager_file() as stream:

            def write(line: str) -> None:
                stream.write(line + "\n")

            yield write
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _echo(line: str) -> None:
    click.echo(line)


def _terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()
