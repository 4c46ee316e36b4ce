"""A thread's first read in a process without folding every record (docs/integrations.md,
"First read in a process"): the checkpoint comes from the thread index, and only the records it
needs are read and folded into a `Thread` of their own: the checkpoint's record, the records
on its parent line holding its channels' versions, its messages' chain of deltas back to a
full list (`_langgraph_frames`), its pending writes (the records its `writes_named` lists and
those naming it in `refs`, `Store.records_naming`) and the retractions of those writes.

`partial` gives None whenever it cannot be sure that the answer equals the full fold's, and the
saver then folds the whole thread: a compacted thread (its snapshot); a checkpoint written
before `writes_named` (or again under its id, where the first record was held); a channel
version this saver's `get_next_version` did not make (another scheme may give two records one
version, and the fold reads the last); two writes for one (task, index), whose order the fold
decides; a record on the way that is not held, not the record expected, or a parent line or
delta chain longer than `_MOST` records. Invariant: a `Thread` it returns answers
`ConvgraphSaver._tuple` for that checkpoint exactly as the full fold of the thread does.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.integrations._langgraph_index_state import Row
from convgraph.integrations._langgraph_thread import (
    CHECKPOINT_PATH,
    LANGUAGE,
    WRITES_NAMED,
    WRITES_PATH,
    Checkpoint,
    Thread,
    path_of,
)
from convgraph.projections.state import Entry, entry_from_bytes
from convgraph.replica import Replica

_OURS: Final = re.compile(r"str:\d{32}\.[0-9.e-]+")  # `get_next_version`'s: a counter, a random tail
_BATCH: Final = 128  # checkpoint records read per look-up while walking back
_MOST: Final = 4096  # records walked back before the full fold is the cheaper sure answer


class _UnsureError(Exception):
    """The partial read cannot promise the full fold's answer."""


def partial(
    replica: Replica, conv: str, row: Row, ns: str, checkpoint_id: str | None,
) -> tuple[Thread, Checkpoint] | None:
    """A `Thread` holding what the saver's `_tuple` reads of the latest live checkpoint of `ns`
    (or of `checkpoint_id`), and that checkpoint; None when the full fold must answer."""
    if replica.store.snapshot(conv) is not None:
        return None
    try:
        return _Reader(replica, conv, row, ns).read(checkpoint_id)
    except _UnsureError:
        return None


class _Reader:
    def __init__(self, replica: Replica, conv: str, row: Row, ns: str) -> None:
        self.replica, self.conv, self.ns = replica, conv, ns
        self.by_id = {i: c for (n, i), c in row.keys().items() if n == ns}  # the live checkpoints of ns
        self.ids: list[str] = []  # their ids in order, once a look-up reads those before one
        self.cids: list[CID] = []
        self.held: dict[CID, Entry] = {}
        self.thread = Thread(conv)
        self.folded: set[CID] = set()
        self.count = 0  # records read so far

    def read(self, checkpoint_id: str | None) -> tuple[Thread, Checkpoint]:
        if not self.by_id:
            raise _UnsureError
        wanted = checkpoint_id if checkpoint_id is not None else max(self.by_id)
        cid = self.by_id.get(wanted)
        if cid is None:
            raise _UnsureError
        record = self._checkpoint(cid, wanted)
        tree = record.payload["tree"]
        if tree.get("id") != wanted:
            raise _UnsureError
        named = tree.get(WRITES_NAMED)
        if type(named) is not list:
            raise _UnsureError  # written before writes named their checkpoint, or once more under its id
        self._fold(record)
        self._values(record)
        self._writes(cid, tree["id"], named)
        ck = self.thread.checkpoints[(self.ns, tree["id"])]
        return self.thread, ck

    # ------------------------------------------------------------ records

    def _fetch(self, cid: CID, below: str) -> Entry:
        """Record `cid`, read with the live checkpoints of ids just below `below` (the parent
        line of a thread that seldom forks, and its delta chain, lie there), in one look-up."""
        found = self.held.get(cid)
        if found is not None:
            return found
        if not self.ids:
            self.ids = sorted(self.by_id)
            self.cids = [self.by_id[i] for i in self.ids]
        at = bisect_left(self.ids, below)
        wanted = [cid, *(c for c in self.cids[max(at - _BATCH, 0):at] if c not in self.held)]
        got = self._entries(wanted)
        self.held.update(got)
        self.count += len(got)
        found = got.get(cid)
        if found is None or self.count > _MOST:
            raise _UnsureError
        return found

    def _checkpoint(self, cid: CID, checkpoint_id: str) -> Entry:
        record = self._fetch(cid, checkpoint_id)
        payload = record.payload
        tree = payload.get("tree")
        if record.kind != "code_snapshot" or payload.get("language") != LANGUAGE or type(tree) is not dict \
                or payload.get("path") != path_of(CHECKPOINT_PATH, self.ns) or tree.get("ns") != self.ns:
            raise _UnsureError
        return record

    # ------------------------------------------------------------ channel values

    def _values(self, record: Entry) -> None:
        """Fold the records holding the checkpoint's channel versions, walking its parent line."""
        wanted = dict(record.payload["tree"].get("at", {}))
        if not all(type(v) is str and _OURS.fullmatch(v) for v in wanted.values()):
            raise _UnsureError
        at: Entry | None = record
        while wanted:
            if at is None:
                raise _UnsureError  # a version no record on the line holds: only the fold can say
            tree = at.payload["tree"]
            for section in ("values", "messages"):
                for channel, entry in tree.get(section, {}).items():
                    if type(entry) is dict and wanted.get(channel) == entry.get("v"):
                        del wanted[channel]
                        self._fold(at)
                        if section == "messages":
                            self._chain(at, channel)
            parent = tree.get("parent")
            if parent is None:
                at = None
                continue
            cid = self.by_id.get(parent)
            if cid is None:
                raise _UnsureError  # the parent was retracted (pruned): not on the index's line
            at = self._checkpoint(cid, parent)

    def _chain(self, holder: Entry, channel: str) -> None:
        """Fold the records of the channel's delta chain from `holder` back to a full list."""
        delta = holder.payload["tree"]["messages"][channel]
        below = holder.payload["tree"]["id"]
        while type(delta) is dict and delta.get("base") is not None:
            base = delta["base"]
            if type(base) is not CID:
                raise _UnsureError
            record = self._fetch(base, below)
            if record.kind != "code_snapshot" or type(record.payload.get("tree")) is not dict:
                raise _UnsureError
            below = str(record.payload["tree"].get("id", below))
            self._fold(record)
            found = record.payload["tree"].get("messages", {}).get(channel)
            if type(found) is not dict:
                raise _UnsureError
            delta = found

    # ------------------------------------------------------------ pending writes

    def _writes(self, cid: CID, checkpoint_id: str, named: list[Any]) -> None:
        """Fold the checkpoint's write records and their retractions."""
        naming = self.replica.store.records_naming(self.conv, [cid]).get(cid, set())
        wanted = list(dict.fromkeys([*named, *sorted(naming, key=bytes)]))
        if not all(type(c) is CID for c in wanted):
            raise _UnsureError
        got = self._entries(wanted)
        if len(got) != len(wanted):
            raise _UnsureError
        keys: set[tuple[str, int]] = set()
        for c in wanted:
            record = got[c]
            payload = record.payload
            tree = payload.get("tree")
            if record.kind != "code_snapshot" or payload.get("language") != LANGUAGE \
                    or not str(payload.get("path", "")).startswith(WRITES_PATH) or type(tree) is not dict:
                continue  # a record naming the checkpoint for another reason
            if tree.get("ns") != self.ns or tree.get("checkpoint") != checkpoint_id:
                continue
            for idx_write in tree["writes"]:
                key = (tree["task"], idx_write[0])
                if key in keys:
                    raise _UnsureError  # which write stands depends on the order they arrived in
                keys.add(key)
            self._fold(record)
        for row, _ in self.replica.store.targets(self.conv, wanted):
            if row.kind == "retraction":
                self.thread.retracted.add(row.target)

    def _entries(self, cids: list[CID]) -> dict[CID, Entry]:
        """The records among `cids` held with their bytes (no snapshot is looked at: none is held)."""
        return {c: entry_from_bytes(c, d) for c, d in self.replica.store.get_many(cids).items()}

    def _fold(self, record: Entry) -> None:
        if record.cid not in self.folded:
            self.folded.add(record.cid)
            self.thread._fold(record)
