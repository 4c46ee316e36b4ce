"""Resume windows and transcripts read from the turn index, in O(window) rows (docs/conversation.md §8).

`IndexLines` is a `transcript.Lines` over five read functions (`Reads`), never a store: a
line paged backwards from a canonical position, records' bytes, the retractions and
supersessions of given targets, the `branch` records of a name, and records by CID.
`transcript.resume_window_of` and `transcript.transcript_of` then read it exactly as they
read a fold. When a record it needs was compacted (its bytes gone, its payload only in the
snapshot) it raises `CompactedError`, and the caller folds instead. Invariant: for the rows and bytes of any
set of records, `resume_window_of(IndexLines(...))` equals `resume_window` over the fold of
that set less `hidden`, or raises `CompactedError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.errors import CompactedError
from convgraph.projections.index_rows import SYSTEM_KIND, SYSTEM_LINE, BranchRow, LineRow, TargetRow, line_of
from convgraph.projections.state import Entry, OrderKey, entry_from_bytes
from convgraph.projections.system import system_of
from convgraph.projections.transcript import Window, resume_window_of, transcript_of
from convgraph.projections.turn import Turn, turn_from

MAX_PAGE: Final = 4096

LinePage = Callable[[str, "OrderKey | None", int], Sequence[LineRow]]
"""`(line, below, limit)` → up to `limit` rows of `line` strictly before `below` (None: from
the end), last first."""
BytesOf = Callable[[Sequence[CID]], Mapping[CID, bytes]]
"""The bytes of those of the records held with them (a compacted one is left out)."""
TargetsOf = Callable[[Sequence[CID]], Sequence[tuple[TargetRow, bytes]]]
"""The retractions and supersessions of any of the targets, each with its record's bytes."""
BranchesNamed = Callable[[str], Sequence[BranchRow]]
"""The `branch` records of a name."""
RecordsOf = Callable[[Sequence[CID]], Mapping[CID, tuple[OrderKey, bytes]]]
"""Those of the CIDs held in this conversation: their order key and bytes (empty: compacted)."""


@dataclass(frozen=True)
class Reads:
    """How a window reads one conversation's turn index, and what its view leaves out."""

    line: LinePage
    data: BytesOf
    targets: TargetsOf
    branches: BranchesNamed
    records: RecordsOf
    hidden: frozenset[CID] = frozenset()
    any_retractor: bool = False


Cache = MutableMapping[bytes, tuple[Entry, "Turn | None"]]
"""Decoded entries (and their turns) by the binary form of their CID."""


def cached_turn(cache: Cache, entry: Entry) -> Turn:
    """The turn `entry` makes, kept in `cache` beside the entry (a later read finds it)."""
    raw = bytes(entry.cid)
    cached = cache.get(raw)
    if cached is not None and cached[1] is not None:
        return cached[1]
    turn = turn_from(entry)
    cache[raw] = (entry, turn)
    return turn


@dataclass
class IndexLines:
    """`transcript.Lines` over the turn index. `first_page` sizes the first page of a line
    (then pages double); `cache` may keep decoded entries and turns across calls (by CID:
    a record never changes)."""

    reads: Reads
    first_page: int = 64
    cache: Cache = field(default_factory=dict)
    prompts: bool = False  # read `system_prompt` rows only (on SYSTEM_LINE), else never them
    # the retractions and supersessions read so far, by target (a target read with none: absent)
    _targets: dict[bytes, list[TargetRow]] = field(default_factory=dict, init=False)
    _asked: set[bytes] = field(default_factory=set, init=False)
    _bytes: dict[CID, bytes] = field(default_factory=dict, init=False)  # of the supersessions read

    @property
    def any_retractor(self) -> bool:
        return self.reads.any_retractor

    def line(self, branch: str | None, upto: OrderKey | None, *, merges: bool) -> Iterator[Entry]:
        hidden, name, cache = self.reads.hidden, line_of(branch), self.cache
        below = None if upto is None else _just_after(upto)
        size = max(1, min(self.first_page, MAX_PAGE))
        while True:
            rows = self.reads.line(name, below, size)
            # a branch may bear SYSTEM_LINE's name: the kind tells its turns from the prompts
            page = [r for r in rows
                    if (merges or r.kind != "merge") and (r.kind == SYSTEM_KIND) == self.prompts]
            self._prefetch([r.key[3] for r in page if r.kind != "merge"])
            # the page's cached entries are held here: the shared cache may be cleared meanwhile
            known = {r.key[3]: c[0] for r in page if (c := cache.get(r.key[3])) is not None}
            fresh = [CID._trusted(r.key[3]) for r in page if r.key[3] not in known]
            data = {bytes(c): d for c, d in self.reads.data(fresh).items()} if fresh else {}
            for row in page:
                raw = row.key[3]
                entry = known.get(raw)
                if entry is None:
                    entry = self._decode(raw, data.get(raw, b""))
                if not hidden or entry.cid not in hidden:
                    yield entry
            if len(rows) < size:
                return
            below, size = rows[-1].key, min(size * 2, MAX_PAGE)

    def retractors(self, target: CID) -> Iterable[bytes]:
        rows = self._targets_of(bytes(target))
        return [r.key[2] for r in rows if r.kind == "retraction"] if rows else ()

    def supersessions(self, target: CID) -> Sequence[tuple[bytes, CID]]:
        rows = self._targets_of(bytes(target))
        return [(r.key[2], r.cid) for r in rows if r.kind == "supersession"] if rows else ()

    def payload(self, cid: CID) -> dict[str, Any]:
        return self._entry(cid, self._bytes[cid]).payload  # a supersession `supersessions` named

    def fork_point(self, branch: str) -> OrderKey | None:
        rows = [r for r in self.reads.branches(branch) if r.cid not in self.reads.hidden]
        if not rows:
            return None
        last = max(rows, key=lambda r: r.key)
        if last.origin in self.reads.hidden:
            return last.key
        origin = self.reads.records([last.origin]).get(last.origin)
        return last.key if origin is None else origin[0]

    def entries(self, cids: Sequence[CID]) -> Mapping[CID, Entry]:
        wanted = [c for c in cids if c not in self.reads.hidden]
        found = self.reads.records(wanted) if wanted else {}
        out = {c: self._entry(c, found[c][1]) for c in wanted if c in found}
        self._prefetch([bytes(c) for c in out])
        return out

    def turn(self, entry: Entry) -> Turn:
        return cached_turn(self.cache, entry)

    def _entry(self, cid: CID, data: bytes) -> Entry:
        raw = bytes(cid)
        cached = self.cache.get(raw)
        return self._decode(raw, data) if cached is None else cached[0]

    def _decode(self, raw: bytes, data: bytes) -> Entry:
        cid = CID._trusted(raw)
        if not data:
            raise CompactedError("the turn index needs a record that was compacted", cid=cid)
        entry = entry_from_bytes(cid, data)
        self.cache[raw] = (entry, None)
        return entry

    def _prefetch(self, targets: Sequence[bytes]) -> None:
        """Read the retractions and supersessions of `targets` in one go."""
        wanted = [c for c in targets if c not in self._asked]
        if not wanted:
            return
        self._asked.update(wanted)
        hidden = self.reads.hidden
        found = self.reads.targets([CID._trusted(c) for c in wanted])
        for row, data in sorted(found, key=lambda rd: rd[0].key):
            if row.cid not in hidden:
                self._targets.setdefault(bytes(row.target), []).append(row)
                if row.kind == "supersession":
                    self._bytes[row.cid] = data

    def _targets_of(self, target: bytes) -> list[TargetRow] | None:
        if target not in self._asked:
            self._prefetch([target])
        return self._targets.get(target)


def resume_window(
    reads: Reads, *, branch: str | None = None, last: int | None = None,
    cache: Cache | None = None,
) -> Window:
    """`transcript.resume_window` of the indexed conversation; `CompactedError`: fold instead."""
    lines = IndexLines(reads, _first_page(last), {} if cache is None else cache)
    return resume_window_of(lines, branch=branch, last=last)


def transcript(
    reads: Reads, *, branch: str | None = None, last: int | None = None,
    cache: Cache | None = None,
) -> list[Turn]:
    """`transcript.transcript` of the indexed conversation; `CompactedError`: fold instead."""
    lines = IndexLines(reads, _first_page(last), {} if cache is None else cache)
    return transcript_of(lines, branch=branch, last=last)


def system(reads: Reads, *, cache: Cache | None = None) -> str | None:
    """`system.system_of` the indexed conversation, in O(1) rows unless prompts were retracted
    or hidden; `CompactedError`: fold instead."""
    lines = IndexLines(reads, 4, {} if cache is None else cache, prompts=True)
    return system_of(lines, lines.line(SYSTEM_LINE, None, merges=False))


def _first_page(last: int | None) -> int:
    # a window usually ends within a few turns of `last` (it widens to a user turn)
    return MAX_PAGE if last is None else max(1, last) + 8


def _just_after(key: OrderKey) -> OrderKey:
    """The least key above `key`: every CID has one length, so `cid + 0x00` sorts right after it."""
    return (key[0], key[1], key[2], key[3] + b"\x00")
