"""The items of `ConvgraphSession`s, kept per conversation and branch as JSON text and moved on
by what arrives, so that a read costs what `SQLiteSession`'s does: decoding the items' JSON.

A view is the item list of `(conv, branch)` as `Replica.transcript` shows it, each item's
JSON (or the item itself when JSON cannot carry it) beside the turn it came from, and what
the store held when it was read: the change token, the `since` cursor, the hidden set
(rooted), the last key of the view's line and, for a branch, where main is cut. A read whose
token is the view's is answered from it. When the token moved, the records of the
conversation that arrived since (`Store.since`) move the view on when all they do is append
turns to its line after its last key and retract turns; anything else (a record landing
inside what the view shows, a supersession, a merge on its line, a new fork of its branch, a
changed hidden set, a checkpoint: an adopted one brings records as a snapshot only) rebuilds it
from the transcript, compacted turns' items read from the snapshot. Nothing read inside an
open transaction, or while a commit landed, is kept. A complete view is also kept as a file
in the replica's home (`_session_file`), written after a rebuild and every `SAVE_EVERY` items
changed; a view not in memory (a session opened afresh) is read from that file and moved on
like a kept one. Invariant: a view's items equal, in order, those the transcript of the same
records gives.
"""

from __future__ import annotations

import copy
import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, cast

from convgraph.core.cid import CID
from convgraph.core.rooted import is_rooted
from convgraph.errors import ConvgraphError
from convgraph.integrations import _session_file
from convgraph.integrations._responses_items import Item, items_of, residual_of
from convgraph.projections.index_rows import LINE_KINDS, OrderKey, line_of
from convgraph.projections.state import Entry, entry_from_bytes
from convgraph.projections.turn import turn_from
from convgraph.replica import Replica
from convgraph.store.base import Store

LIMIT: Final = 8
"""Views kept per replica (least recently used out): a few conversations and branches."""
SAVE_EVERY: Final = 64
"""Items added or taken since a view's file was written before it is written again: a cold read
moves the file's view on by fewer than that many, and a write costs ~17 ms at 10k items."""

Frag = str | Item
"""An item's JSON text, or the item itself when JSON cannot carry it (bytes, a CID)."""


@dataclass(frozen=True)
class View:
    """The items of one conversation's branch, and what the store held when they were read."""

    token: object
    cursor: int
    hidden: frozenset[CID] | None  # rooted: the hidden set read with it (None: rebuild on change)
    top: OrderKey | None  # the last key on the view's own line, of any row
    cut: OrderKey | None  # a branch view: main shows up to here (None: no main part)
    # per item, the turn it comes from and the item: the view's are the first `length`, and a
    # later view of the same branch may share the lists, having appended to them (never more)
    ops: list[CID]
    frags: list[Frag]
    length: int
    complete: bool  # the whole history, or only the latest whole turns of it

    def holds(self, want: int | None) -> bool:
        """Whether the view answers a read of the latest `want` items (all when None)."""
        return self.complete or (want is not None and self.length >= want)

    def turn_ops(self) -> list[CID]:
        """Per item, the turn it comes from."""
        return self.ops[:self.length]

    def items(self, limit: int | None = None) -> list[Item]:
        """The latest `limit` items (all when None), fresh objects the caller may change."""
        n = self.length
        frags = self.frags[:n] if limit is None or limit >= n else self.frags[n - limit:n]
        if all(type(f) is str for f in frags):
            return list(json.loads("[" + ",".join(frags) + "]"))  # type: ignore[arg-type]
        return [json.loads(f) if isinstance(f, str) else copy.deepcopy(f) for f in frags]


class Views:
    """The views of one replica's sessions, and one lock per conversation: the calls of its
    sessions on one conversation run one at a time, those on others alongside."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._views: OrderedDict[tuple[str, str | None], View] = OrderedDict()
        self._lag: dict[tuple[str, str | None], int] = {}  # items changed since the file was written

    def lock(self, conv: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(conv, threading.Lock())

    def view(self, replica: Replica, conv: str, branch: str | None, want: int | None) -> View:
        """A view of `(conv, branch)` now holding at least its last `want` items (all when None,
        or when it has fewer): kept, moved on, or read afresh."""
        store = replica.store
        if store.in_transaction():
            return read(replica, conv, branch, want)  # may roll back: keep nothing
        token = store.change_token()
        key = (conv, branch)
        with self._guard:
            kept = self._views.get(key)
        lag = self._lag.get(key, 0)
        if (kept is None or not kept.holds(want)) \
                and (loaded := _session_file.load(replica, conv, branch, want)) is not None:
            kept, lag = _loaded(loaded), 0
        if kept is not None and kept.token != token:
            moved = move(replica, kept, conv, branch, token)
            if moved is not None:  # items added or taken since the file was written
                lag += abs(moved.length - kept.length) or int(moved.ops is not kept.ops)
            kept = moved
        if kept is not None and kept.holds(want):
            found = kept
        else:
            found, lag = read(replica, conv, branch, want), SAVE_EVERY  # a rebuild is always kept
        if found.token == store.change_token():
            if found.complete and lag >= SAVE_EVERY:
                n = found.length
                _session_file.save(replica, conv, branch, _session_file.Loaded(
                    found.cursor, found.hidden, found.top, found.cut, found.ops[:n], found.frags[:n]))
                lag = 0
            with self._guard:
                self._views[key] = found
                self._lag[key] = lag
                self._views.move_to_end(key)
                while len(self._views) > self.limit:
                    gone, _ = self._views.popitem(last=False)
                    self._lag.pop(gone, None)
        return found


_REGISTRY: weakref.WeakKeyDictionary[Replica, Views] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK: Final = threading.Lock()


def views_of(replica: Replica) -> Views:
    """The views kept for `replica` (dropped with it)."""
    with _REGISTRY_LOCK:
        found = _REGISTRY.get(replica)
        if found is None:
            found = _REGISTRY[replica] = Views()
        return found


def _loaded(found: _session_file.Loaded) -> View:
    """The view a file holds, its token one no store gives (so it is moved on)."""
    return View(object(), found.cursor, found.hidden, found.top, found.cut, found.ops,
                cast(list[Frag], found.frags), len(found.ops), found.complete)


def read(replica: Replica, conv: str, branch: str | None, want: int | None) -> View:
    """A view holding the latest `want` items read afresh (all when None): it reads the last
    `want` turns, and twice as many while turns others wrote give fewer items than that."""
    last = want
    while True:
        found = build(replica, conv, branch, last)
        if last is None or found.holds(want):
            return found
        last *= 2


def build(replica: Replica, conv: str, branch: str | None, last: int | None) -> View:
    """The view of the latest `last` turns (all when None) read afresh from the transcript;
    its token is what the store held before."""
    store = replica.store
    token, cursor = store.change_token(), store.cursor(conv)
    with store.reading():
        hidden = store.hidden(conv) if is_rooted(conv) else frozenset()
        top = store.line(conv, line_of(branch), None, 1)
        cut = fork_cut(store, conv, branch, hidden or frozenset()) if branch is not None else None
        turns = replica.transcript(conv, branch=branch, last=last) if store.heads(conv) else []
        residuals = _residuals(replica, conv, [t.op for t in turns])
    ops: list[CID] = []
    frags: list[Frag] = []
    for turn in turns:
        for item in items_of(turn, residuals.get(turn.op), replica.get_artifact):
            ops.append(turn.op)
            frags.append(frag(item))
    complete = last is None or len(turns) < last
    return View(token, cursor, hidden, top[0].key if top else None, cut, ops, frags, len(ops), complete)


def move(replica: Replica, view: View, conv: str, branch: str | None, token: object) -> View | None:
    """`view` moved on by what arrived since it was read (None: build it again)."""
    store = replica.store
    rooted = is_rooted(conv)
    with store.reading():
        hidden = store.hidden(conv) if rooted else frozenset()
        if hidden is None or hidden != view.hidden:
            return None
        now = store.cursor(conv)
        arrived, _ = store.since(view.cursor, conv)
        try:
            entries = [entry_from_bytes(c, d) for c, d in arrived]
        except ConvgraphError:
            return None
        step = _classify(entries, view, branch, hidden)
        if step is None:
            return None
        turns, retractions = step
        rows = store.targets(conv, [t.cid for t in turns]) if turns else []
        if any(r.kind == "supersession" and r.cid not in hidden for r, _ in rows):
            return None
        pairs: list[tuple[bytes, object]] = [
            (r.key[2], r.target) for r, _ in rows if r.kind == "retraction" and r.cid not in hidden]
        pairs += [(r.actor, r.payload.get("target")) for r in retractions]
        removed = _retracted(store, pairs, turns, rooted)
        if store.change_token() != token:
            return None
    ops, frags, n = view.ops, view.frags, view.length
    if removed and not removed.isdisjoint(ops[:n]):
        kept = [(o, f) for o, f in zip(ops[:n], frags[:n], strict=True) if o not in removed]
        ops, frags = [o for o, _ in kept], [f for _, f in kept]
    elif len(ops) != n:  # a move that was not kept appended to them: theirs no more
        ops, frags = ops[:n], frags[:n]
    new_ops: list[CID] = []
    new_frags: list[Frag] = []
    for entry in turns:
        if entry.cid in removed:
            continue
        for item in items_of(turn_from(entry), residual_of(entry.payload), replica.get_artifact):
            new_ops.append(entry.cid)
            new_frags.append(frag(item))
    top = turns[-1].order_key if turns else view.top
    ops.extend(new_ops)  # under the conversation's lock; readers of `view` read its first n
    frags.extend(new_frags)
    return replace(view, token=token, cursor=now, top=top, ops=ops, frags=frags, length=len(ops))


def _classify(
    entries: Sequence[Entry], view: View, branch: str | None, hidden: frozenset[CID]
) -> tuple[list[Entry], list[Entry]] | None:
    """The turns appended to the view's line and the retractions among `entries`, in order;
    None when any of them changes the view otherwise."""
    turns: list[Entry] = []
    retractions: list[Entry] = []
    for e in entries:
        if e.cid in hidden:
            continue
        if e.kind in LINE_KINDS:
            if e.branch == branch:
                if e.kind == "merge":
                    return None
                turns.append(e)
            elif branch is not None and e.branch is None and view.cut is not None and e.order_key <= view.cut:
                return None  # lands inside the part of main the branch shows
        elif e.kind == "retraction":
            retractions.append(e)
        elif e.kind in ("supersession", "checkpoint") or (e.kind == "branch" and branch is not None
                                                          and e.payload.get("name") == branch):
            return None  # a checkpoint may come with a snapshot whose records `since` never shows
    turns.sort(key=lambda e: e.order_key)
    if turns and view.top is not None and turns[0].order_key <= view.top:
        return None  # a late turn lands inside the line
    return turns, retractions


def _retracted(
    store: Store, pairs: Sequence[tuple[bytes, object]], turns: Sequence[Entry], rooted: bool
) -> set[CID]:
    """The targets those retractions `(author, target)` take from view: in a rooted conversation
    any unhidden retraction does, in a legacy one only its target's author's."""
    targets = {t for _, t in pairs if isinstance(t, CID)}
    if rooted or not targets:
        return targets
    authors = {t.cid: t.actor for t in turns}
    authors.update({c: m.actor for c, m in store.metas(targets - authors.keys()).items()})
    return {t for a, t in pairs if isinstance(t, CID) and authors.get(t) == a}


def fork_cut(store: Store, conv: str, branch: str, hidden: frozenset[CID]) -> OrderKey | None:
    """Where main is cut for `branch` (as `transcript.fork_point`); None: no such branch."""
    rows = [r for r in store.branch_rows(conv, branch) if r.cid not in hidden]
    if not rows:
        return None
    last = max(rows, key=lambda r: r.key)
    if last.origin in hidden:
        return last.key
    meta = store.metas([last.origin]).get(last.origin)
    if meta is None or meta.conv != conv:
        return last.key
    return (meta.hlc.wall_ms, meta.hlc.counter, meta.actor, bytes(last.origin))


def frag(item: Item) -> Frag:
    """`item` as JSON text when that gives it back equal, else the item itself."""
    try:
        return json.dumps(item, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return copy.deepcopy(item)


def _residuals(replica: Replica, conv: str, ops: Sequence[CID]) -> dict[CID, dict[str, Any]]:
    """Per turn the adapter wrote: its `meta[META_KEY]` (one batch read; compacted: from the snapshot)."""
    out: dict[CID, dict[str, Any]] = {}
    for cid, entry in replica.entries(conv, ops).items():
        residual = residual_of(entry.payload)
        if residual is not None:
            out[cid] = residual
    return out

