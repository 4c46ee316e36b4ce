"""The thread index of `ConvgraphSaver`: which conversations are LangGraph threads, with their
title and owner, and a digest of each checkpoint's metadata, so listing and searching threads
reads no thread that cannot match (docs/integrations.md, "Finding threads").

It is a cache of a fold of the records, never a second truth. Its state is a function of the
store's arrival stream (`Store.arrivals`), folded incrementally: a genesis names a thread, a
LangGraph checkpoint record adds a row (replacing an earlier record of the same namespace and id,
as the thread's fold does), a retraction removes the row of its target, and a compaction or
adoption (a `checkpoint` record) refolds the conversation from its snapshot. So a thread's rows
are the checkpoints `list` shows (a retraction can only name a record it descends from, so it
never arrives first). Each row holds a digest of each metadata value normalised so that values
Python finds equal digest alike; a value with no such normal form is `*` and matches any filter.
So the index only narrows: the saver confirms every candidate on its loaded metadata. Every
change of a row goes through `State`'s methods, which keep the inverted part (`Postings`: item,
title, owner -> threads) in step, so a search reads only the threads posted for it.

Where the replica has a home, the state is kept there as `langgraph-threads.idx`: a version line
with this replica's Ed25519 signature over the body's SHA-256, and the body
(`_langgraph_index_state.encode`). A file that is unsigned, of another version, serializer or
store (its cursor's record is not held), or does not parse is dropped and the index rebuilt from
the records; `check` compares the whole state, postings included, with a rebuild.
Invariant: `state` equals what folding every record of the store gives.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.core.keys import verify
from convgraph.errors import ConvgraphError
from convgraph.integrations._langgraph_index_state import Row, Rows, State, decode, encode
from convgraph.integrations._langgraph_postings import ANY, Digests
from convgraph.integrations._langgraph_thread import CHECKPOINT_PATH, LANGUAGE, Thread
from convgraph.projections.state import Entry, entry_from_bytes
from convgraph.replica import Replica

INDEX_FILE: Final = "langgraph-threads.idx"
VERSION: Final = 2
_DOMAIN: Final = b"convgraph langgraph thread index v2\x00"
_PAGE: Final = 2048  # arrivals read per query while catching up
SAVE_EVERY: Final = 256  # conversations refolded since the file was written before it is again

# ---------------------------------------------------------------- metadata values


def _normal(value: Any) -> Any:
    """A JSON form equal for values Python compares equal; raises TypeError when there is none."""
    kind = type(value)
    if value is None:
        return ["z"]
    if kind is str:
        return ["s", value]
    if kind in (bool, int):
        return ["n", int(value)]
    if kind is float:
        if math.isnan(value):
            raise TypeError("NaN equals nothing")
        return ["n", int(value)] if value.is_integer() else ["f", repr(value)]
    if kind in (list, tuple):  # a tuple never equals a list: sharing a digest only widens
        return ["l", [_normal(v) for v in value]]
    if kind is dict and all(type(k) is str for k in value):
        return ["d", {k: _normal(v) for k, v in value.items()}]
    raise TypeError(f"no normal form for {kind.__name__}")


def digest(value: Any) -> str | None:
    """The digest of a metadata value's normal form; None when it has none."""
    try:
        text = json.dumps(_normal(value), sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return base64.b64encode(hashlib.sha256(text.encode()).digest()[:12]).decode()


def digests(metadata: dict[str, Any]) -> Digests:
    """The digests of a checkpoint's metadata, key by key."""
    return {k: digest(v) or ANY for k, v in metadata.items() if type(k) is str}


def matches(held: Digests, wanted: dict[str, str]) -> bool:
    """Whether a row's digests may meet a filter's (`wanted`: the digestible, non-None items);
    metadata that did not load (`{ANY: ANY}`) meets every filter."""
    if held.get(ANY) == ANY:
        return True
    return all((d := held.get(k)) == v or d == ANY for k, v in wanted.items())


def wanted_digests(wanted: dict[str, Any]) -> dict[str, str]:
    """The filter items the index can narrow by: a None value also matches a missing key, and
    a value with no normal form matches as its own `__eq__` says, so both are left to the check."""
    out = {}
    for k, v in wanted.items():
        d = None if v is None or type(k) is not str else digest(v)
        if d is not None:
            out[k] = d
    return out


# ---------------------------------------------------------------- the fold


class ThreadIndex:
    """The index of one saver's replica; `load` reads a checkpoint tree's metadata."""

    def __init__(
        self, replica: Replica, load: Callable[[dict[str, Any]], Any], serde: str, *, home: Path | None,
    ) -> None:
        self.replica = replica
        self.load = load
        self.serde = serde
        self.path = None if home is None else home / INDEX_FILE  # None: kept in memory only
        self.state: State | None = None
        self.unsaved = 0

    def forget(self) -> None:
        """Drop what is held in memory (after a rollback): the next `sync` reads the file again."""
        self.state = None
        self.unsaved = 0

    def drop(self, conv: str) -> None:
        """Remove `conv`'s row: the replica forgot it, so no record of it is left to fold (the
        file is written at once: a rebuild would no longer meet the conversation)."""
        state = self.sync()
        if state.forget(conv) and not self.replica.store.in_transaction():
            self._write(state)

    def behind(self) -> int:
        """At most how many records arrived since the state held (else the file's) was caught up."""
        return self.replica.store.cursor() - self._state().cursor

    def _state(self) -> State:
        state = self.state
        if state is None or not self._held(state):
            state = self._read()
            self.unsaved = 0
            if state is None or not self._held(state):
                state, self.unsaved = State(), SAVE_EVERY  # a rebuild is always kept
        self.state = state
        return state

    def sync(self) -> State:
        """Fold what arrived since the last call (first: since the file's cursor, or from the start)."""
        state = self._state()
        store = self.replica.store
        while True:
            found, cursor = store.arrivals(state.cursor, _PAGE)
            if cursor == state.cursor:
                break
            for conv, cid, data in found:
                self.unsaved += self._fold(state, conv, entry_from_bytes(cid, data))
                state.last = cid
            state.cursor = cursor
        if self.unsaved >= SAVE_EVERY and not store.in_transaction():  # nothing that may roll back
            self._write(state)
        return state

    def _held(self, state: State) -> bool:
        """Whether the store still holds what `state` folded (not after a rollback or a restore)."""
        if state.cursor > self.replica.store.cursor():
            return False
        return state.last is None or bool(self.replica.store.metas([state.last]))

    def _fold(self, state: State, conv: str, entry: Entry) -> int:
        """Fold one record; 1 when it changed a thread's row."""
        if conv not in state.rows:
            state.seen(conv, self._row(conv, entry if entry.kind == "genesis" else None))
            if state.rows[conv] is not None and entry.kind == "genesis":
                return 1
        row = state.rows[conv]
        if row is None:
            return 0
        payload = entry.payload
        if entry.kind == "code_snapshot" and payload.get("language") == LANGUAGE \
                and payload.get("path", "").startswith(CHECKPOINT_PATH):
            state.put(conv, row, entry.cid, self._checkpoint(payload["tree"]))
        elif entry.kind == "retraction":
            if not state.drop(conv, row, payload["target"]):
                return 0
        elif entry.kind == "checkpoint":  # a compaction or an adoption: the snapshot moved
            state.refold(conv, row, self._refolded(conv, row.checkpoints))
        else:
            return 0
        return 1

    def _row(self, conv: str, genesis: Entry | None) -> Row | None:
        """The row of a conversation seen first: a thread when its genesis marks one."""
        first = genesis or self.replica.first(conv)  # a compacted thread's from its snapshot
        meta = first.payload.get("meta") if first is not None and first.kind == "genesis" else None
        mark = meta.get("langgraph") if type(meta) is dict else None  # anyone's genesis: check shapes
        found = mark.get("thread_id") if type(mark) is dict else None
        if first is None or type(found) is not str:
            return None
        title = first.payload.get("title")
        row = Row(found, title if type(title) is str else None, first.actor)
        if genesis is None:  # met mid-stream (compacted, adopted): its checkpoints come from its fold
            row.checkpoints = self._refolded(conv, {})
        return row

    def _refolded(self, conv: str, known: Rows) -> Rows:
        thread = Thread(conv)
        thread.refresh(self.replica)
        return {ck.cid: known.get(ck.cid) or self._checkpoint(ck.tree) for ck in thread.checkpoints.values()
                if ck.cid not in thread.retracted}

    def _checkpoint(self, tree: dict[str, Any]) -> tuple[str, str, Digests]:
        try:
            metadata = self.load(tree["metadata"])
        except Exception:  # anyone's record, any serializer: the saver reads it again
            metadata = None
        return tree["ns"], tree["id"], digests(metadata) if type(metadata) is dict else {ANY: ANY}

    # ------------------------------------------------------------ the file

    def _write(self, state: State) -> None:
        path = self.path
        if path is None or self.replica._key is None:
            self.unsaved = 0
            return
        with _uncollected():
            body = encode(state, self.serde)
        signature = self.replica.key.sign(_signed(body))
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(f"convgraph-thread-index {VERSION} {signature.hex()}\n".encode() + body)
        os.replace(tmp, path)
        self.unsaved = 0

    def _read(self) -> State | None:
        path = self.path
        if path is None:
            return None
        try:
            head, body = path.read_bytes().split(b"\n", 1)
            magic, version, signature = head.decode().split(" ")
            if magic != "convgraph-thread-index" or version != str(VERSION):
                return None
            if not verify(self.replica.actor, _signed(body), bytes.fromhex(signature)):
                return None
            with _uncollected():
                return decode(body, self.serde)
        except (OSError, ValueError, KeyError, IndexError, TypeError, ConvgraphError):
            return None

    # ------------------------------------------------------------ checked against the records

    def check(self) -> list[str]:
        """How the current state differs from a rebuild from the records (empty: it does not)."""
        held = self.sync()
        want = ThreadIndex(self.replica, self.load, self.serde, home=None).sync()
        out = []
        for conv in sorted(held.rows.keys() | want.rows.keys()):
            if held.rows.get(conv) != want.rows.get(conv):
                out.append(f"the thread index's row of {conv[:64]!r} differs from the records' fold")
        mine, theirs = held.postings.opened(), want.postings.opened()
        for item in sorted(mine.keys() | theirs.keys()):
            if mine.get(item) != theirs.get(item):
                out.append(f"the thread index's postings of metadata key {item[0][:64]!r} differ from "
                           "the records' fold")
        for name in ("titles", "owners", "order"):
            if getattr(held.postings, name) != getattr(want.postings, name):
                out.append(f"the thread index's postings by {name} differ from the records' fold")
        return out

    def rebuild(self) -> None:
        """Fold every record again and keep the result (file included)."""
        self.state = State()
        self.unsaved = SAVE_EVERY
        self.sync()


@contextmanager
def _uncollected() -> Iterator[None]:
    """No garbage collection inside: encoding and decoding allocate many containers and free
    none, so a collection would walk every object of the index to find nothing."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _signed(body: bytes) -> bytes:
    """What the file's signature covers: the body's SHA-256, so checking it does not copy the body."""
    return _DOMAIN + hashlib.sha256(body).digest()


def candidates(
    state: State, wanted: dict[str, Any], *, title: str | None = None, owner: bytes | None = None,
    pick: Callable[[str], str | None] | None = None,
) -> Iterator[tuple[str, str, set[CID]]]:
    """(thread id, conversation, the checkpoint records that may match `wanted`), thread by
    thread in the saver's order, of the threads titled `title` and rooted by `owner` (each when
    given); a thread with none is left out unless `wanted` is empty. Only the threads the
    postings name are looked at; their rows then narrow to checkpoints. A thread id held in
    several conversations (generations) yields only the one `pick` names."""
    narrow = wanted_digests(wanted)
    threads = state.postings.narrowed(state.rows, narrow, title=title, owner=owner)
    for thread_id, conv in state.postings.order if threads is None else threads:
        if pick is not None and state.postings.shared(thread_id) and pick(thread_id) != conv:
            continue
        row = state.rows[conv]
        if row is None:
            continue
        found = {c for c, (_, _, d) in row.checkpoints.items() if matches(d, narrow)}
        if found or not wanted:
            yield thread_id, conv, found
