"""The replica's side of the turn index (docs/conversation.md §8): windows and transcripts
read from it, the hidden set kept beside it, and its check and repair against the records.

`TurnIndex.resume_window` / `transcript` answer from the index in O(window) rows, or return
None when the fold must answer instead (a rooted conversation without a current hidden set,
a window needing a compacted record). `keep_hidden` stores a rooted conversation's hidden set
inside the transaction that stored its records. `check` derives the rows from the records and
compares (what `Replica.verify` reports), `repair` rebuilds them. Invariant: whatever the
views return equals what the fold of the same records gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Final, TypeVar

from convgraph.core.cid import CID
from convgraph.core.record import load_trusted
from convgraph.core.rooted import is_rooted
from convgraph.errors import CompactedError, ConvgraphError, TurnIndexError
from convgraph.projections import authority as authority_
from convgraph.projections import window
from convgraph.projections.authority import AuthorityState
from convgraph.projections.index_rows import LineRow, OrderKey, Row, TargetRow, row_of, snapshot_rows
from convgraph.projections.state import Entry
from convgraph.projections.transcript import Window
from convgraph.projections.turn import Folded, Turn
from convgraph.replica.folds import Folds
from convgraph.store.base import Store

_T = TypeVar("_T")
CACHE_SIZE: Final = 2048  # decoded records kept: a warm window of up to ~2,000 turns decodes none


class _Bounded(dict[bytes, tuple[Entry, Turn | None]]):
    """A cache that starts afresh when full: memory stays bounded, the window stays warm."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: bytes, value: tuple[Entry, Turn | None]) -> None:
        if len(self) >= self.limit and key not in self:
            self.clear()
        super().__setitem__(key, value)


class TurnIndex:
    """Reads of one store's turn index, with decoded records cached by CID (they never change)."""

    def __init__(self, store: Store, *, cache_size: int = CACHE_SIZE) -> None:
        self.store = store
        self.cache = _Bounded(cache_size)

    def resume_window(
        self, conv: str, *, branch: str | None = None, last: int | None = None
    ) -> Window | None:
        """`transcript.resume_window` of `conv` from the index; None: fold instead."""
        return self._answer(conv, partial(window.resume_window, branch=branch, last=last, cache=self.cache))

    def transcript(
        self, conv: str, *, branch: str | None = None, last: int | None = None
    ) -> list[Turn] | None:
        """`transcript.transcript` of `conv` from the index; None: fold instead."""
        return self._answer(conv, partial(window.transcript, branch=branch, last=last, cache=self.cache))

    def system(self, conv: str) -> tuple[str | None] | None:
        """`(system prompt,)` of `conv` from the index (docs/conversation.md §9); None: fold instead."""
        return self._answer(conv, lambda reads: (window.system(reads, cache=self.cache),))

    def _answer(self, conv: str, read: Callable[[window.Reads], _T]) -> _T | None:
        with self.store.reading():  # every page and look-up of one answer sees one state
            reads = self.reads(conv)
            if reads is None:
                return None
            try:
                return read(reads)
            except CompactedError:
                return None

    def reads(self, conv: str) -> window.Reads | None:
        """How a window reads `conv`; None for a rooted conversation without a current hidden set."""
        rooted = is_rooted(conv)
        hidden = self.store.hidden(conv) if rooted else frozenset()
        if hidden is None:
            return None
        s = self.store
        return window.Reads(line=partial(s.line, conv), data=s.get_many, targets=partial(s.targets, conv),
                            branches=partial(s.branch_rows, conv), records=partial(held, s, conv),
                            hidden=hidden, any_retractor=rooted)


def held(store: Store, conv: str, cids: Sequence[CID]) -> Mapping[CID, tuple[OrderKey, bytes]]:
    """Those of `cids` that `conv` holds, with their order key and bytes (empty: compacted)."""
    metas = {c: m for c, m in store.metas(cids).items() if m.conv == conv}
    data = store.get_many(metas) if metas else {}
    return {c: ((m.hlc.wall_ms, m.hlc.counter, m.actor, bytes(c)), data.get(c, b""))
            for c, m in metas.items()}


def keep_hidden(store: Store, convs: Iterable[tuple[str, AuthorityState | None]]) -> None:
    """Store each rooted conversation's hidden set from its authority state, which must hold
    every record the store holds of it (call inside the transaction that stored them)."""
    for conv, state in convs:
        if state is not None:
            store.set_hidden(conv, authority_.hidden(state))


# ---------------------------------------------------------------- held to the records


def expected_rows(store: Store) -> dict[str, set[Row]]:
    """The rows the records make, per conversation: every record held with its bytes (streamed)
    and every kept snapshot's entries, as `Store.commit` and `Store.compact` derive them."""
    rows: dict[str, set[Row]] = {}
    for cid, data in store.iter_all():
        try:
            record = load_trusted(data, cid)
            add_row(rows, record.conv, record)
        except ConvgraphError:
            continue  # bytes that do not decode: `verify` reports the record itself
    for conv in store.conversations():
        snap = store.snapshot(conv)
        if snap is not None:
            rows.setdefault(conv, set()).update(row for _, row in snapshot_rows(conv, snap[1]))
    return rows


def add_row(rows: dict[str, set[Row]], conv: str, entry: Folded) -> None:
    """Add the row `entry` makes (if any) to `rows[conv]`."""
    row = row_of(entry)
    if row is not None:
        rows.setdefault(conv, set()).add(row)


Mismatch = tuple[CID, TurnIndexError]


def mismatches(want: Iterable[Row], got: Iterable[Row]) -> list[Mismatch]:
    """Each record whose row the index lacks, holds in excess or holds otherwise, in CID order."""
    want_by, got_by = _by_cid(want), _by_cid(got)
    out: list[Mismatch] = []
    for cid in sorted(want_by.keys() | got_by.keys()):
        w, g = want_by.get(cid, set()), got_by.get(cid, set())
        if w == g:
            continue
        if not g:
            what = "lacks the row this record makes"
        elif not w:
            what = "holds a row for this record, which makes none (or is not held)"
        else:
            what = f"holds {_shown(g)} for this record, which makes {_shown(w)}"
        out.append((cid, TurnIndexError(f"the turn index {what}", cid=cid)))
    return out


def _shown(rows: set[Row]) -> str:
    return " and ".join(sorted(map(_row_text, rows)))


def _row_text(row: Row) -> str:
    if isinstance(row, LineRow):
        return f"a {row.kind} row on line {row.line!r} at {row.key[:2]}"
    if isinstance(row, TargetRow):
        return f"a {row.kind} row of {row.target} at {row.key[:2]}"
    return f"a branch row {row.name!r} from {row.origin} at {row.key[:2]}"


def _by_cid(rows: Iterable[Row]) -> dict[CID, set[Row]]:
    out: dict[CID, set[Row]] = {}
    for row in rows:
        out.setdefault(row.cid, set()).add(row)
    return out


def hidden_mismatch(store: Store, conv: str) -> Mismatch | None:
    """A rooted conversation's current hidden set that differs from its authority fold's."""
    kept = store.hidden(conv) if is_rooted(conv) else None
    if kept is None:
        return None  # not current: the views fold, so nothing can be wrong
    state = Folds(store).authority(conv)
    want = authority_.hidden(state) if state is not None else frozenset()
    if kept == want:
        return None
    wrong = min(kept ^ want)
    return wrong, TurnIndexError(f"the hidden set of {conv[:64]!r} kept beside the turn index names "
                                 f"{len(kept)} record(s), its authority projection {len(want)}", cid=wrong)


def check(store: Store) -> list[Mismatch]:
    """Every way the turn index disagrees with the records (what `Replica.verify` reports)."""
    want = expected_rows(store)
    out: list[Mismatch] = []
    for conv in sorted(set(store.conversations()) | want.keys()):
        out += mismatches(want.get(conv, set()), store.index_rows(conv))
        try:
            found = hidden_mismatch(store, conv)
        except ConvgraphError:
            continue  # records the authority fold cannot read: `verify` reports them
        if found is not None:
            out.append(found)
    return out


def repair(store: Store) -> list[str]:
    """Rebuild every conversation's turn index from the records, and each rooted one's hidden
    set from its authority fold, in one transaction; the conversations whose index changed."""
    changed: list[str] = []
    with store.transaction():
        want = expected_rows(store)
        for conv in sorted(set(store.conversations()) | want.keys()):
            rows = want.get(conv, set())
            if mismatches(rows, store.index_rows(conv)) or hidden_mismatch(store, conv) is not None:
                changed.append(conv)
            store.reindex(conv, rows)
            if is_rooted(conv):
                keep_hidden(store, [(conv, Folds(store).authority(conv))])
    return changed
