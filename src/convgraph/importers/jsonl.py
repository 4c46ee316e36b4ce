"""Importing a saved message log: JSON lines, a JSON array, or an object holding `messages` or
`input` (a saved request), in any format `formats` knows, told from the file itself.

A JSON object's `system` text (Anthropic's request field) becomes a `system_prompt` first.
Each item's key is its place (the line number for JSON lines, `L3`; the index for an array,
`#3`) and a digest of its JSON (`writing.keyed`), so lines appended to a log are imported on
the next run and the others are not again; reports name an item by its place alone.
A line that is not JSON is reported and skipped; a file whose format cannot be told is an
`ImportSourceError` that says which formats were looked for. Invariant: the file is only read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from convgraph.errors import ImportSourceError
from convgraph.importers import formats, writing
from convgraph.importers.report import ImportReport, Unmapped
from convgraph.replica import Draft, Replica

SOURCE = "jsonl"
Keyed = list[tuple[str, Any]]


def import_jsonl(
    replica: Replica, path: Path | str, *, into: str | None = None, title: str | None = None,
    fmt: str | None = None, assistants: Iterable[str] = (), origin: str | None = None,
) -> ImportReport:
    """Import the messages saved in file `path` into conversation `into` (None: a new one).

    `fmt`: one of `formats.FORMATS`, else told from the file. `assistants`: more legacy
    speakers who are the assistant. `origin`: what names this log among imports into one
    conversation (default: the file's name), so a copy moved elsewhere is still the same log."""
    path = Path(path)
    items, bad, system = read_items(path)
    if fmt is None:
        fmt = formats.detect([v for _, v in items])
        if fmt is None:
            first = (json.dumps(items[0][1])[:200] if items else
                     f"not JSON ({bad[0].reason})" if bad else "nothing (the file holds no message)")
            raise ImportSourceError(f"cannot tell the format of {str(path)!r}: {formats.UNKNOWN_HELP}; "
                                    f"its first item is {first}", source=str(path))
    elif fmt not in formats.FORMATS:
        raise ImportSourceError(f"unknown format {fmt!r}: one of {', '.join(formats.FORMATS)}",
                                source=str(path))
    one = formats.mapper(fmt, assistants=assistants)
    chosen = fmt

    def build(conv: str) -> tuple[list[writing.Mapped], list[Unmapped]]:
        out: list[writing.Mapped] = []
        missed = list(bad)
        if system is not None:
            out.append(("system", Draft("system_prompt", {"content": system})))
        for place, item in items:
            mapped, unmapped = one(conv, writing.keyed(place, item), item)
            out += mapped
            missed += writing.placed(unmapped)
        return out, missed

    return writing.run(replica, build, source=SOURCE, origin=origin or path.name, into=into,
                       title=title or f"Imported from {path.name}", fmt=chosen, shown=writing.place)


def read_items(path: Path) -> tuple[Keyed, list[Unmapped], str | None]:
    """The file's items with their keys, the lines that are not JSON, and a request's `system`."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ImportSourceError(f"cannot read {str(path)!r}: {exc.strerror}", source=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise ImportSourceError(f"{str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                                source=str(path)) from exc
    whole = _whole(text)
    if whole is not None:
        return whole
    items: Keyed = []
    bad: list[Unmapped] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append((f"L{n}", json.loads(line)))
        except ValueError as exc:
            bad.append(Unmapped(f"L{n}", "invalid_json", f"line {n} is not JSON ({exc})"))
    return items, bad, None


def _whole(text: str) -> tuple[Keyed, list[Unmapped], str | None] | None:
    """The items of a file that is one JSON value (an array, or an object holding a list), or
    None when it is not one (then it is read as JSON lines)."""
    stripped = text.strip()
    if not stripped.startswith(("[", "{")):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(value, list):
        return _indexed(value), [], None
    if isinstance(value, dict):
        for field in ("messages", "input"):
            if isinstance(value.get(field), list):
                system = value.get("system")
                return _indexed(value[field]), [], system if isinstance(system, str) and system else None
    return None  # a one-line log of one message, say: read it as a line


def _indexed(values: Sequence[Any]) -> Keyed:
    return [(f"#{i}", v) for i, v in enumerate(values)]
