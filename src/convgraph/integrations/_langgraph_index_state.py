"""The value of `ConvgraphSaver`'s thread index and the body of its file (`_langgraph_index`).

`State` holds every conversation seen (a thread's `Row`, or None) and the `Postings` of the rows,
changed only through its methods so the two stay in step. The file body is laid out so that
reading it builds little, and writing it again little more: a first line of JSON holding tables
named by position (the threads as columns, in the order they were first written; metadata items
with their postings as text, decoded when first asked for), then one line per thread, in that
order, of canonical JSON holding its checkpoints with their metadata digests, parsed only when
the thread is first read. What was not asked for is written again as it was read:

    {"cursor": int, "last": hex | null, "serde": str, "owners": [hex, ...],
     "convs": [conv, ...], "ids": [thread id, ...], "titles": [title | null, ...], "by": [owner #, ...],
     "items": [key, digest, "thread # count thread # count ...", ...], "others": [conv, ...],
     "sizes": [bytes of the thread's line, ...]}
    [[cid hex, ns, checkpoint id, {key: digest, ...}], ...]        (one line per thread)

Invariant: `decode(encode(s))` equals `s`, rows and postings alike, and `encode(decode(b))` is `b`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from convgraph.core.cid import CID
from convgraph.integrations._langgraph_postings import Digests, Postings

Rows = dict[CID, tuple[str, str, Digests]]  # a thread's checkpoint records -> (ns, id, digests)
_Raw = tuple[bytes, int, int]  # a row's checkpoints as the file holds them: its body, start, end


class Row:
    """One thread: its id, title and owner, and its checkpoint records not retracted (read from
    the file only when first asked for)."""

    __slots__ = ("_checkpoints", "_keys", "_raw", "owner", "thread_id", "title")

    def __init__(
        self, thread_id: str, title: str | None, owner: bytes, checkpoints: Rows | None = None,
        *, raw: _Raw | None = None,
    ) -> None:
        self.thread_id, self.title, self.owner = thread_id, title, owner
        self._checkpoints = checkpoints if checkpoints is not None or raw is not None else {}
        self._raw = raw
        self._keys: dict[tuple[str, str], CID] | None = None  # (ns, id) -> its record, once asked for

    @property
    def checkpoints(self) -> Rows:
        found = self._checkpoints
        if found is None:
            body, start, end = self._raw or (b"[]", 0, 2)
            found = self._checkpoints = {  # signed by this replica: no check of the CIDs
                CID._trusted(bytes.fromhex(c)): (ns, i, d) for c, ns, i, d in json.loads(body[start:end])}
            self._raw = None
        return found

    @checkpoints.setter
    def checkpoints(self, value: Rows) -> None:
        self._checkpoints, self._raw, self._keys = value, None, None

    def keys(self) -> dict[tuple[str, str], CID]:
        """Each checkpoint's record by (namespace, id): one a key (`State.put` replaces), kept
        in step by `State`'s methods."""
        if self._keys is None:
            self._keys = {(ns, i): c for c, (ns, i, _) in self.checkpoints.items()}
        return self._keys

    def line(self) -> bytes:
        """Its checkpoints as a line of the file: the one read, while they were not (so unchanged)."""
        if self._raw is not None:
            body, start, end = self._raw
            return body[start:end]
        return _dumps([[c.hex(), ns, i, d] for c, (ns, i, d) in sorted(self.checkpoints.items())]).encode()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row):
            return NotImplemented
        return (self.thread_id, self.title, self.owner, self.checkpoints) == (
            other.thread_id, other.title, other.owner, other.checkpoints)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"Row({self.thread_id!r}, {self.title!r}, {self.owner.hex()[:16]}…, {self.checkpoints!r})"


@dataclass
class State:
    """The fold: every conversation seen (None: not a thread), where the stream was left, and
    the postings of the rows, changed only through the methods below."""

    cursor: int = 0
    last: CID | None = None  # the last record with bytes folded: it must still be held
    rows: dict[str, Row | None] = field(default_factory=dict)
    postings: Postings = field(default_factory=Postings)

    def seen(self, conv: str, row: Row | None) -> None:
        """A conversation met for the first time: a thread (with its checkpoints) or not."""
        self.rows[conv] = row
        if row is not None:
            self.postings.thread(conv, row)
            for _, _, d in row.checkpoints.values():
                self.postings.add(conv, d)

    def put(self, conv: str, row: Row, cid: CID, value: tuple[str, str, Digests]) -> None:
        """A checkpoint record of `row`; one of the same namespace and id is replaced."""
        key = (value[0], value[1])
        old = row.keys().get(key)
        if old is not None:
            self.drop(conv, row, old)  # as the thread's fold: a later record of one id replaces it
        row.checkpoints[cid] = value
        row.keys()[key] = cid
        self.postings.add(conv, value[2])

    def drop(self, conv: str, row: Row, cid: CID) -> bool:
        """Remove a checkpoint record of `row`; False when it holds none of that CID."""
        gone = row.checkpoints.pop(cid, None)
        if gone is not None:
            self.postings.remove(conv, gone[2])
            if row._keys is not None and row._keys.get((gone[0], gone[1])) == cid:
                del row._keys[(gone[0], gone[1])]
        return gone is not None

    def forget(self, conv: str) -> bool:
        """Remove a thread the replica forgot, and every posting of it; False when not held."""
        row = self.rows.pop(conv, None)
        if row is None:
            return False
        for _, _, d in row.checkpoints.values():
            self.postings.remove(conv, d)
        self.postings.unthread(conv, row)
        return True

    def refold(self, conv: str, row: Row, checkpoints: Rows) -> None:
        """Replace every checkpoint of `row` (its thread refolded)."""
        for _, _, d in row.checkpoints.values():
            self.postings.remove(conv, d)
        row.checkpoints = checkpoints
        for _, _, d in checkpoints.values():
            self.postings.add(conv, d)


def encode(state: State, serde: str) -> bytes:
    """The body of a state. Threads keep the places the file they were read from gave them, new
    ones follow (by conversation), so postings and checkpoint lines not asked for since are
    written again as read: a write costs what changed, not the whole index."""
    rows, postings = state.rows, state.postings
    kept = postings.numbered
    if not all(rows.get(conv) is not None for conv in kept):  # a thread was forgotten since
        postings.opened()
        kept = []
    known = set(kept)
    convs = kept + sorted(conv for conv, row in rows.items() if row is not None and conv not in known)
    threads = [(conv, row) for conv in convs if (row := rows[conv]) is not None]
    owners = sorted({row.owner for _, row in threads})
    owner_no = {owner: n for n, owner in enumerate(owners)}
    thread_no = {conv: n for n, conv in enumerate(convs)}

    def posted(item: tuple[str, str]) -> str:
        text = postings.packed.get(item)
        if text is not None:  # numbered over `kept`, which `convs` begins with
            return text
        held = sorted((thread_no[conv], count) for conv, count in postings.get(item).items())
        return " ".join(f"{n} {count}" for n, count in held)

    items = sorted(postings.meta.keys() | postings.packed.keys())
    body: dict[str, Any] = {
        "cursor": state.cursor, "last": None if state.last is None else state.last.hex(), "serde": serde,
        "owners": [o.hex() for o in owners], "items": [x for item in items for x in (*item, posted(item))],
        "convs": convs, "ids": [row.thread_id for _, row in threads],
        "titles": [row.title for _, row in threads], "by": [owner_no[row.owner] for _, row in threads],
        "others": sorted(conv for conv, row in rows.items() if row is None),
    }
    lines = [row.line() for _, row in threads]
    body["sizes"] = [len(line) for line in lines]
    return b"\n".join([_dumps(body).encode(), *lines])


def _dumps(value: Any) -> str:
    return _CANONICAL.encode(value)


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # built once


def decode(body: bytes, serde: str) -> State | None:
    """The state of a body `encode` wrote for `serde` (None: written for another serializer)."""
    base = body.find(b"\n") + 1 or len(body)  # JSON never holds a raw newline
    m = json.loads(body[:base])
    if m["serde"] != serde:
        return None
    sizes = m["sizes"]
    if len(sizes) != len(m["convs"]) or (sizes and base + sum(sizes) + len(sizes) - 1 != len(body)):
        raise ValueError("the thread index's lines are not those its first line names")
    ends = [base + end - 1 for end in accumulate(size + 1 for size in sizes)]  # each line and its newline
    owners = [bytes.fromhex(o) for o in m["owners"]]
    flat = m["items"]
    items = list(zip(flat[::3], flat[1::3], strict=True))
    convs, ids, titles, by = m["convs"], m["ids"], m["titles"], [owners[o] for o in m["by"]]
    rows: dict[str, Row | None] = dict.fromkeys(m["others"])
    rows.update(zip(convs, [Row(i, t, o, raw=(body, end - size, end)) for i, t, o, end, size in
                            zip(ids, titles, by, ends, sizes, strict=True)], strict=True))
    postings = Postings(packed=dict(zip(items, flat[2::3], strict=True)), numbered=convs, source=rows)
    postings.order = sorted(zip(ids, convs, strict=True))
    last = m["last"]
    return State(int(m["cursor"]), None if last is None else CID(bytes.fromhex(last)), rows, postings)
