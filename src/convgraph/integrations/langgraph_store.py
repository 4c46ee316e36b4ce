"""`ConvgraphStore`: LangGraph's long-term memory (`BaseStore`) as one convgraph conversation.

    store = ConvgraphStore(Replica.open("~/.convgraph"))
    graph = builder.compile(checkpointer=ConvgraphSaver(replica), store=store)

The store is the rooted conversation `conv_id(owner, H(name))` of this replica's key (or of
one of `owners`, a store synced from another device). Every put and delete is a signed
`code_snapshot` record at the item's path (a delete is a tombstone, not an erasure), so the
memory syncs, verifies, and says who wrote each version (`history`). The mapping in full:
docs/integrations-store.md. Invariant: every read is the fold of the store conversation's
records (kept incrementally), judged at the store's clock, so two replicas holding the same
records answer alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Clock
from convgraph.core.kinds import check_payload
from convgraph.core.rooted import conv_id
from convgraph.errors import AdapterError, AuthorityError, ConvgraphError
from convgraph.integrations._store_fold import (
    LANGUAGE,
    TOUCH_PATH,
    Live,
    Memory,
    Namespace,
    copied,
    moment,
    path_of,
)
from convgraph.replica import Replica
from convgraph.replica.drafts import Draft
from convgraph.replica.reads import Mark

__all__ = ["ConvgraphStore", "MemoryVersion"]

_NONCE_DOMAIN: Final = b"convgraph/langgraph-store\x00"


def store_nonce(name: str) -> bytes:
    """The genesis nonce of the store called `name`: the same on every replica."""
    return hashlib.sha256(_NONCE_DOMAIN + name.encode("utf-8")).digest()[:16]


@dataclass(frozen=True)
class MemoryVersion:
    """One version of an item: the record that wrote it, its author's key, when, and the value
    (None: the item was deleted there)."""

    cid: CID
    actor: bytes
    at: datetime
    value: dict[str, Any] | None
    ttl: float | None


class ConvgraphStore(BaseStore):
    """A LangGraph `BaseStore` (sync and async, with TTL) kept as the records of a conversation.

    `name`: which store of this replica (one conversation each). `owners`: keys whose store
    conversation of that name this one reads and continues before rooting its own (that key
    must have granted this replica `write`). `ttl`: LangGraph's `TTLConfig` (`default_ttl`,
    `refresh_on_read`); expiry is judged at `clock` (default: the replica's). `match_query`:
    `search(query=…)` keeps only items holding the query as a case-insensitive substring; by
    default the query is ignored, as LangGraph's own stores do without an embedding index.
    """

    supports_ttl = True

    def __init__(
        self, replica: Replica, *, name: str = "memory", owners: Sequence[bytes] = (),
        ttl: TTLConfig | None = None, clock: Clock | None = None, match_query: bool = False,
    ) -> None:
        self.replica = replica
        self.name = name
        self.owners = tuple(owners)
        self.ttl_config = ttl
        self.clock = clock or replica.clock
        self.match_query = match_query
        self._lock = threading.RLock()
        self._conv: str | None = None
        self._memory = Memory()
        self._mark: Mark | None = None

    # ------------------------------------------------------------ the conversation

    @property
    def conversation(self) -> str | None:
        """The conversation holding this store, or None while this replica holds none."""
        with self._lock:
            return self._find()

    def _find(self) -> str | None:
        if self._conv is None:
            nonce = store_nonce(self.name)
            for owner in (*self.owners, self.replica.actor):
                conv = conv_id(owner, nonce)
                if self.replica.heads(conv):
                    self._conv = conv
                    break
        return self._conv

    def _rooted(self) -> str:
        found = self._find()
        if found is not None:
            return found
        nonce = store_nonce(self.name)
        conv = conv_id(self.replica.actor, nonce)
        payload = {"nonce": nonce, "title": f"LangGraph store {self.name}",
                   "meta": {"langgraph": {"store": self.name}}}
        self.replica.write(conv, "genesis", payload)
        self._conv = conv
        return conv

    def _refresh(self) -> Memory:
        """Fold in what arrived since the last read; after a compaction or an adoption brought
        another snapshot, fold the whole conversation again."""
        conv = self._find()
        if conv is None:
            return self._memory
        got = self.replica.arrived(conv, self._mark)
        if got.again:
            self._memory = Memory()
        self._mark = got.mark
        for entry in got.entries:
            self._memory.apply(entry)
        return self._memory

    # ------------------------------------------------------------ BaseStore

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` as LangGraph's stores do: every read sees the store as it was before the
        batch, then the puts and deletes land (the last one per item wins), in one transaction."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        with self._lock:
            memory = self._refresh()
            now = self.clock()
            results: list[Result] = []
            touch: dict[CID, None] = {}
            puts: dict[tuple[Namespace, str], PutOp] = {}
            for op in ops:
                if isinstance(op, GetOp):
                    item = memory.get(tuple(op.namespace), op.key, now)
                    results.append(None if item is None else _item(item))
                    self._touch(item, op.refresh_ttl, now, touch)
                elif isinstance(op, SearchOp):
                    found = memory.search(tuple(op.namespace_prefix), op.filter,
                                          op.query if self.match_query else None, now)
                    page = found[op.offset:op.offset + op.limit]
                    results.append([_search_item(item) for item in page])
                    for item in page:
                        self._touch(item, op.refresh_ttl, now, touch)
                elif isinstance(op, ListNamespacesOp):
                    conditions = [(c.match_type, tuple(c.path)) for c in op.match_conditions or ()]
                    listed = memory.namespaces(conditions, op.max_depth, now)
                    results.append(listed[op.offset:op.offset + op.limit])
                elif isinstance(op, PutOp):
                    puts[(tuple(op.namespace), op.key)] = op
                    results.append(None)
                else:
                    raise AdapterError(f"unknown store operation {type(op).__name__}")
            self._write(memory, list(touch), list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread: the event loop never waits on the replica."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _touch(self, item: Live | None, refresh: bool, now: int, touch: dict[CID, None]) -> None:
        if item is None or not refresh or item.put.ttl is None:
            return
        if self.ttl_config is not None and not self.ttl_config.get("refresh_on_read", True):
            return
        if now > max(item.put.at_ms, self._memory.touched.get(item.put.cid, 0)):
            touch[item.put.cid] = None  # only when the expiry would move: a repeat read is free

    def _write(self, memory: Memory, touch: list[CID], puts: list[PutOp]) -> None:
        drafts = [_put_draft(op) for op in puts
                  if op.value is not None or op.key in memory.live.get(tuple(op.namespace), {})]
        if touch:  # items exist, so the conversation does
            # a replica that may read but not write reads without refreshing
            with contextlib.suppress(AuthorityError):
                self.replica.write(self._rooted(), "code_snapshot", {
                    "path": TOUCH_PATH, "language": LANGUAGE, "tree": {"op": "touch", "puts": sorted(touch)}})
        if drafts:
            with self.replica.transaction():  # the genesis, when this write roots the store, too
                self.replica.write_many(self._rooted(), drafts)
        if drafts or touch:
            self._refresh()

    # ------------------------------------------------------------ beyond BaseStore

    def history(self, namespace: tuple[str, ...], key: str) -> list[MemoryVersion]:
        """Every version of one item, oldest first in canonical order: puts and deletes, each
        with its record's CID, author and time (a version whose item has expired included)."""
        with self._lock:
            versions = self._refresh().history(tuple(namespace), str(key))
        return [MemoryVersion(v.cid, v.actor, moment(v.at_ms), None if v.value is None else copied(v.value),
                              v.ttl) for v in versions]

    def sweep_ttl(self) -> int:
        """Write a delete for every item expired at the store's clock; returns how many. Reads
        leave expired items out already: a sweep records their end, for history and peers."""
        with self._lock:
            memory = self._refresh()
            now = self.clock()
            expired = [item for items in memory.live.values() for item in items.values()
                       if not memory.alive(item, now)]
            self._write(memory, [], [PutOp(item.namespace, item.key, None) for item in expired])
        return len(expired)


def _put_draft(op: PutOp) -> Draft:
    ns, key = list(op.namespace), str(op.key)
    tree: dict[str, Any]
    if op.value is None:
        tree = {"op": "delete", "ns": ns, "key": key}
    else:
        if not isinstance(op.value, Mapping):
            raise AdapterError(f"a store value must be a map, not {type(op.value).__name__}")
        tree = {"op": "put", "ns": ns, "key": key, "value": _plain(dict(op.value))}
        if op.ttl is not None:
            if type(op.ttl) not in (int, float) or not 0 < op.ttl < 2**53:
                raise AdapterError(f"a TTL is a positive number of minutes, not {op.ttl!r}")
            tree["ttl"] = op.ttl
    payload = {"path": path_of(op.namespace, key), "language": LANGUAGE, "tree": tree}
    try:
        check_payload("code_snapshot", payload, rooted=True)
        codec.encode(payload)
    except ConvgraphError as exc:
        raise AdapterError(f"the value of {key[:64]!r} cannot be stored: {exc}") from None
    return Draft("code_snapshot", payload)


def _plain(value: Any) -> Any:
    """`value` with tuples as lists, as a JSON store would hold it (DAG-CBOR has no tuple)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _item(item: Live) -> Item:
    return Item(value=copied(item.value), key=item.key, namespace=item.namespace,
                created_at=moment(item.created_ms), updated_at=moment(item.put.at_ms))


def _search_item(item: Live) -> SearchItem:
    return SearchItem(item.namespace, item.key, copied(item.value), moment(item.created_ms),
                      moment(item.put.at_ms))
