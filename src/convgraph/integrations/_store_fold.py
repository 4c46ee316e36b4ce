"""A `ConvgraphStore`'s memory as a fold of its conversation's records, and the reads LangGraph's
`BaseStore` defines over it (get, search by namespace prefix and filter, list_namespaces). Pure:
the time a read is judged at (TTL) is passed in, never read from a clock here.

The records (docs/integrations-store.md): each put or delete of an item is a `code_snapshot` at
`path_of(namespace, key)`, `language: "langgraph-store"`, whose `tree` is `{op: "put", ns, key,
value, ttl?}` or `{op: "delete", ns, key}`; a TTL refresh is one `code_snapshot` at `TOUCH_PATH`
whose `tree` is `{op: "touch", puts: [CID, ...]}`, naming the put records it refreshes.
Invariant: the fold depends on the set of records only, never on the order they arrived in: an
item is its last put or delete in canonical order, a refresh counts for the put it names.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, cast
from urllib.parse import quote

from convgraph.core.cid import CID
from convgraph.errors import AdapterError
from convgraph.projections.state import Entry

PATH: Final = "langgraph/store"
TOUCH_PATH: Final = "langgraph/store-ttl"
LANGUAGE: Final = "langgraph-store"
MINUTE_MS: Final = 60_000
Namespace = tuple[str, ...]
OrderKey = tuple[int, int, bytes, bytes]


def path_of(namespace: Namespace, key: str) -> str:
    """The `code_snapshot` path of one item: every label and the key escaped, so it is injective."""
    return "/".join((PATH, *(quote(label, safe="") for label in namespace), quote(key, safe="")))


def moment(ms: int) -> datetime:
    """A record time (its HLC's wall clock, milliseconds) as LangGraph's aware datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


@dataclass(frozen=True)
class Version:
    """One put (`value` a map) or delete (`value` None) of an item: its record, author and time."""

    cid: CID
    actor: bytes
    at_ms: int
    value: dict[str, Any] | None
    ttl: float | None
    order: OrderKey = field(repr=False)


@dataclass(frozen=True)
class Live:
    """An item as it stands: its latest put, when its run of puts began, and the TTL it has."""

    namespace: Namespace
    key: str
    put: Version
    created_ms: int

    @property
    def value(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.put.value)  # a Live holds a put, never a delete


@dataclass
class Memory:
    """Every item's versions in canonical order, the live items by namespace, and the latest
    refresh of each put."""

    versions: dict[tuple[Namespace, str], list[Version]] = field(default_factory=dict)
    live: dict[Namespace, dict[str, Live]] = field(default_factory=dict)
    touched: dict[CID, int] = field(default_factory=dict)  # put record -> latest refresh (ms)

    def apply(self, entry: Entry) -> None:
        """Fold one record in (anyone's: shapes are checked, a malformed one is ignored)."""
        p = entry.payload
        if entry.kind != "code_snapshot" or p.get("language") != LANGUAGE:
            return
        tree = p.get("tree")
        if type(tree) is not dict:
            return
        if tree.get("op") == "touch" and p.get("path") == TOUCH_PATH:
            for put in tree.get("puts", ()) if type(tree.get("puts")) is list else ():
                if type(put) is CID:
                    self.touched[put] = max(self.touched.get(put, 0), entry.hlc.wall_ms)
            return
        ns, key, version = _version(entry, tree)
        if version is None or p.get("path") != path_of(ns, key):
            return
        versions = self.versions.setdefault((ns, key), [])
        bisect.insort(versions, version, key=lambda v: v.order)
        self._settle(ns, key, versions)

    def _settle(self, ns: Namespace, key: str, versions: list[Version]) -> None:
        items = self.live.setdefault(ns, {})
        last = versions[-1]
        if last.value is None:
            items.pop(key, None)
            if not items:
                del self.live[ns]
            return
        start = len(versions) - 1
        while start > 0 and versions[start - 1].value is not None:
            start -= 1
        items[key] = Live(ns, key, last, versions[start].at_ms)

    # ------------------------------------------------------------ reads

    def expires_ms(self, item: Live) -> int | None:
        """When `item` expires (None: never): its TTL after its put or its latest refresh."""
        if item.put.ttl is None:
            return None
        since = max(item.put.at_ms, self.touched.get(item.put.cid, 0))
        return since + round(item.put.ttl * MINUTE_MS)

    def alive(self, item: Live, now_ms: int) -> bool:
        expires = self.expires_ms(item)
        return expires is None or now_ms <= expires

    def get(self, ns: Namespace, key: str, now_ms: int) -> Live | None:
        item = self.live.get(ns, {}).get(key)
        return item if item is not None and self.alive(item, now_ms) else None

    def search(
        self, prefix: Namespace, filter: dict[str, Any] | None, query: str | None, now_ms: int,
    ) -> list[Live]:
        """The live items under `prefix` that `filter` (and a substring `query`) match, the most
        recently updated first (as LangGraph's SQL stores order them)."""
        n = len(prefix)
        found = [item for ns, items in self.live.items() if ns[:n] == prefix
                 for item in items.values()
                 if self.alive(item, now_ms) and (not filter or matches(item.value, filter))
                 and (query is None or contains(item.value, query))]
        return sorted(found, key=lambda item: item.put.order, reverse=True)

    def namespaces(
        self, conditions: Iterable[tuple[str, tuple[str, ...]]], max_depth: int | None, now_ms: int,
    ) -> list[Namespace]:
        """The namespaces holding a live item that every (match type, path) condition matches,
        cut to `max_depth` labels, sorted as tuples."""
        conditions = list(conditions)
        found = {ns if max_depth is None else ns[:max_depth] for ns, items in self.live.items()
                 if all(_does_match(kind, path, ns) for kind, path in conditions)
                 and any(self.alive(item, now_ms) for item in items.values())}
        return sorted(found)

    def history(self, ns: Namespace, key: str) -> list[Version]:
        return list(self.versions.get((ns, key), ()))


def _version(entry: Entry, tree: dict[str, Any]) -> tuple[Namespace, str, Version | None]:
    ns, key, op = tree.get("ns"), tree.get("key"), tree.get("op")
    if type(ns) is not list or not ns or not all(type(label) is str for label in ns) or type(key) is not str:
        return (), "", None
    value, ttl = tree.get("value"), tree.get("ttl")
    if op == "put" and type(value) is dict and (ttl is None or (type(ttl) in (int, float) and ttl > 0)):
        made = Version(entry.cid, entry.actor, entry.hlc.wall_ms, value, ttl, entry.order_key)
    elif op == "delete":
        made = Version(entry.cid, entry.actor, entry.hlc.wall_ms, None, None, entry.order_key)
    else:
        return (), "", None
    return tuple(ns), key, made


def _does_match(kind: str, path: tuple[str, ...], ns: Namespace) -> bool:
    """As LangGraph's stores match a namespace: label by label from the start (`prefix`) or the
    end (`suffix`), `*` matching any one label."""
    if len(ns) < len(path):
        return False
    if kind == "suffix":
        ns, path = ns[::-1], path[::-1]
    return all(want in ("*", got) for got, want in zip(ns, path, strict=False))


def matches(value: Any, filter: Any) -> bool:
    """Whether an item's value matches a filter, as `InMemoryStore` compares (nested maps field
    by field, lists element by element, `$eq $ne $gt $gte $lt $lte` operators), except that an
    order comparison of values that do not compare (a missing field, text against a number) is
    no match, as in the SQL stores, where `InMemoryStore` raises."""
    if isinstance(filter, dict):
        if any(type(k) is str and k.startswith("$") for k in filter):
            return all(_operator(value, op, operand) for op, operand in filter.items())
        return isinstance(value, dict) and all(matches(value.get(k), v) for k, v in filter.items())
    if isinstance(filter, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(filter)
                and all(matches(v, f) for v, f in zip(value, filter, strict=True)))
    return bool(value == filter)


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise AdapterError(f"unsupported filter operator {str(op)[:64]!r}: use $eq $ne $gt $gte $lt $lte")
    pair = _comparable(value, operand)
    if pair is None:
        return False
    a, b = pair
    return bool({"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op])


def _comparable(value: Any, operand: Any) -> tuple[Any, Any] | None:
    """Both as numbers (as `InMemoryStore`'s `float()` reads them), or both as text; else None."""
    if type(value) is str and type(operand) is str:
        return value, operand
    try:
        return float(value), float(operand)
    except (TypeError, ValueError, OverflowError):
        return None


def contains(value: dict[str, Any], query: str) -> bool:
    """Whether `query` occurs, ignoring case, in any text (a key or a string) of `value`."""
    needle = query.casefold()
    stack: list[Any] = [value]
    while stack:
        at = stack.pop()
        if isinstance(at, dict):
            stack.extend(at.keys())
            stack.extend(at.values())
        elif isinstance(at, list):
            stack.extend(at)
        elif isinstance(at, str) and needle in at.casefold():
            return True
    return False


def copied(value: dict[str, Any]) -> dict[str, Any]:
    """A caller's own copy of a stored value: mutating it never changes the fold."""
    return copy.deepcopy(value)
