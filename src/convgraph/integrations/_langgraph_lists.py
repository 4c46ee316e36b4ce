"""A messages channel's list, rebuilt from a chain of checkpoint deltas without building the list
of every checkpoint on the way (docs/integrations.md, "What maps to what").

A delta is `{"base": …, "spans": […]}` (or the first form, `{"keep": k, "add": […]}`): the new
list in order, a `[start, stop]` pair taking those places of the base's list, anything else one
new entry. Applying N deltas one by one copies the whole list N times; `resolve` reads them from
the newest down instead, carrying only the slices still to look up, so a chain of N checkpoints
over M messages costs about N + M steps, not N x M. `spans` and `position` make a delta as
`put` writes it. Pure. Invariant: `resolve` gives exactly the entries that applying the deltas
oldest first gives.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any


def spans(plan: list[int | Any]) -> list[Any]:
    """A messages delta's `spans`: runs of positions into the base list as `[start, stop]`
    slices, anything else (a new entry) as itself. `plan` holds a base position or an entry
    per message of the new list."""
    out: list[Any] = []
    for item in plan:
        if type(item) is int:
            if out and type(out[-1]) is list and out[-1][1] == item:
                out[-1][1] = item + 1
                continue
            out.append([item, item + 1])
        else:
            out.append(item)
    return out


def items_of(delta: dict[str, Any]) -> list[Any]:
    """A delta's spans, the first form (`keep`, `add`) read as the spans it stands for."""
    if "spans" in delta:
        return list(delta["spans"])
    keep = delta["keep"]
    return ([[0, keep]] if keep else []) + list(delta["add"])


class _Level:
    """One delta's items with where each starts in its list, for finding a slice's items."""

    def __init__(self, delta: dict[str, Any]) -> None:
        self.items = items_of(delta)
        self.starts: list[int] = []
        at = 0
        for item in self.items:
            self.starts.append(at)
            at += item[1] - item[0] if type(item) is list else 1
        self.length = at


def resolve(
    chain: list[dict[str, Any]], base: tuple[list[Any], list[Any]]
) -> tuple[list[Any], list[Any], list[int]]:
    """The (entries, messages) of the list `chain[0]` makes, `chain` its deltas newest first and
    `base` the (entries, messages) the last one's base holds (empty when it has none; no deltas:
    the base's), and the places whose message is None: entries the deltas add, for the caller
    to load."""
    levels: list[_Level | None] = [None] * len(chain)
    entries: list[Any] = []
    messages: list[Any] = []
    missing: list[int] = []

    def level(depth: int) -> _Level:
        found = levels[depth]
        if found is None:
            found = levels[depth] = _Level(chain[depth])
        return found

    # work in order, last first: a slice of depth d's list as (d, start, stop), a new entry as itself
    stack: list[Any] = [(0, 0, level(0).length if chain else len(base[0]))]
    while stack:
        work = stack.pop()
        if type(work) is not tuple:
            missing.append(len(entries))
            entries.append(work)
            messages.append(None)
            continue
        depth, lo, hi = work
        if hi <= lo:
            continue
        if depth == len(chain):
            entries += base[0][lo:hi]
            messages += base[1][lo:hi]
            continue
        at = level(depth)
        found: list[Any] = []
        i = max(bisect_right(at.starts, lo) - 1, 0)
        while i < len(at.items) and at.starts[i] < hi:
            item, start = at.items[i], at.starts[i]
            if type(item) is list:  # the part of this run inside [lo, hi), as places in the base's list
                first, stop = item
                found.append((depth + 1, first + max(lo - start, 0), first + min(hi - start, stop - first)))
            else:
                found.append(item)
            i += 1
        stack += reversed(found)
    return entries, messages, missing


def position(
    prior: list[Any], message: Any, i: int, used: set[int], by_id: dict[str, list[int]]
) -> int | None:
    """Where `message` stands in the parent's list: at its own index when equal there (the
    common case, in C, identity first), else the first unused place of the message with its id
    (`by_id`, so a trim that shifts every message costs one look-up each); marked used."""
    j: int | None = None
    if i < len(prior) and i not in used and (prior[i] is message or prior[i] == message):
        j = i
    elif isinstance(message.id, str):
        j = next((k for k in by_id.get(message.id, ()) if k not in used), None)
    if j is not None:
        used.add(j)
    return j
