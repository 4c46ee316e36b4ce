"""The inverted half of `ConvgraphSaver`'s thread index: from a metadata item's digest, a title or
an owner to the threads that hold it, and every thread in the saver's order, so a search touches
only its candidates (docs/integrations.md, "Finding threads").

`Postings` is kept in step with the forward rows by the index's fold: every change of a thread's
checkpoints goes through `add` and `remove` with that checkpoint's digests. A metadata item
posts its thread once per checkpoint holding it (a count), so retracting one of two checkpoints
with one value keeps the thread posted. A value with no normal form posts under (key, `ANY`),
and metadata that did not load under (`ANY`, `ANY`): both are candidates for any filter.
Read from a file, an item's postings stay text until first asked for, and titles and owners are
posted from the rows when first asked for.
Invariant: `Postings` equals the postings a rebuild from the records gives (`ThreadIndex.check`).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

ANY: Final = "*"  # a metadata value with no normal form: a candidate for every filter
Digests = dict[str, str]  # metadata key -> digest of its normalised value, or ANY
_SORT_PAST: Final = 4  # past 1/4 of all threads, candidates are picked from the order, not sorted


class _Row(Protocol):
    @property
    def thread_id(self) -> str: ...
    @property
    def title(self) -> str | None: ...
    @property
    def owner(self) -> bytes: ...


@dataclass
class Postings:
    """Metadata item (key, digest) -> thread -> checkpoints holding it; title and owner -> threads;
    every thread as (thread id, conversation), sorted: the order `list` walks threads in."""

    meta: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)
    # items read from a file and not yet asked for: "thread# count ..." over `numbered`
    packed: dict[tuple[str, str], str] = field(default_factory=dict)
    numbered: list[str] = field(default_factory=list)
    # read from a file: titles and owners are posted from these rows when first asked for
    source: Mapping[str, _Row | None] | None = None
    _titles: dict[str, set[str]] = field(default_factory=dict)
    _owners: dict[bytes, set[str]] = field(default_factory=dict)

    @property
    def titles(self) -> dict[str, set[str]]:
        """Title -> the threads titled so."""
        self._post_source()
        return self._titles

    @property
    def owners(self) -> dict[bytes, set[str]]:
        """Owner's key -> the threads it rooted."""
        self._post_source()
        return self._owners

    def _post_source(self) -> None:
        rows, self.source = self.source, None
        for conv, row in (rows or {}).items():
            if row is not None:
                self._post(conv, row)

    def _post(self, conv: str, row: _Row) -> None:
        if row.title is not None:
            self._titles.setdefault(row.title, set()).add(conv)
        self._owners.setdefault(row.owner, set()).add(conv)

    def get(self, item: tuple[str, str]) -> dict[str, int]:
        """Thread -> checkpoints holding `item` (empty: none); the file's form decoded once."""
        found = self.meta.get(item)
        if found is None:
            text = self.packed.pop(item, None)
            if text is None:
                return {}
            p = [int(x) for x in text.split()]
            names = self.numbered
            found = self.meta[item] = dict(zip([names[k] for k in p[::2]], p[1::2], strict=True))
        return found

    def opened(self) -> dict[tuple[str, str], dict[str, int]]:
        """Every item's postings, all decoded."""
        for item in list(self.packed):
            self.get(item)
        return self.meta

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Postings):
            return NotImplemented
        return (self.opened(), self.titles, self.owners, self.order) == (
            other.opened(), other.titles, other.owners, other.order)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def shared(self, thread_id: str) -> bool:
        """Whether more than one conversation holds `thread_id` (generations of one thread)."""
        i = bisect.bisect_left(self.order, (thread_id, ""))
        return i + 1 < len(self.order) and self.order[i + 1][0] == thread_id

    def thread(self, conv: str, row: _Row) -> None:
        """Post a thread seen for the first time (already among `source`'s rows, when set)."""
        bisect.insort(self.order, (row.thread_id, conv))
        if self.source is None:
            self._post(conv, row)

    def unthread(self, conv: str, row: _Row) -> None:
        """Withdraw a thread `thread` posted, once its checkpoints are withdrawn (`remove`)."""
        i = bisect.bisect_left(self.order, (row.thread_id, conv))
        if i < len(self.order) and self.order[i] == (row.thread_id, conv):
            del self.order[i]
        if self.source is not None:
            return  # titles and owners are posted from the rows later: the row is gone from them
        if row.title is not None:
            _withdraw(self._titles, row.title, conv)
        _withdraw(self._owners, row.owner, conv)

    def add(self, conv: str, digests: Digests) -> None:
        """Post one checkpoint of `conv` under each of its metadata items."""
        for item in digests.items():
            held = self.get(item) or self.meta.setdefault(item, {})
            held[conv] = held.get(conv, 0) + 1

    def remove(self, conv: str, digests: Digests) -> None:
        """Withdraw one checkpoint of `conv` that `add` posted."""
        for item in digests.items():
            held = self.get(item)
            if held[conv] == 1:
                del held[conv]
                if not held:
                    del self.meta[item]
            else:
                held[conv] -= 1

    def narrowed(
        self, rows: Mapping[str, _Row | None], narrow: Digests, *, title: str | None = None,
        owner: bytes | None = None,
    ) -> list[tuple[str, str]] | None:
        """(thread id, conversation), in order, of the threads of `rows` that may hold a checkpoint
        meeting every `narrow` item and have `title` and `owner` (each when given); None: nothing
        narrows, every thread may."""
        sets: list[Collection[str]] = []
        if title is not None:
            sets.append(self.titles.get(title, set()))
        if owner is not None:
            sets.append(self.owners.get(owner, set()))
        unloaded = self.get((ANY, ANY))
        for k, d in narrow.items():
            exact, wild = self.get((k, d)), self.get((k, ANY))
            sets.append(exact if not wild and not unloaded else {*exact, *wild, *unloaded})
        if not sets:
            return None
        sets.sort(key=len)
        found = [c for c in sets[0] if all(c in s for s in sets[1:])]
        if len(found) * _SORT_PAST > len(self.order):  # most threads: pick them from the order
            kept = set(found)
            return [t for t in self.order if t[1] in kept]
        return sorted((row.thread_id, c) for c in found if (row := rows.get(c)) is not None)


def _withdraw(index: dict[Any, set[str]], key: object, conv: str) -> None:
    held = index.get(key)
    if held is not None:
        held.discard(conv)
        if not held:
            del index[key]
