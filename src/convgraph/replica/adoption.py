"""Adopting a checkpoint: a compacted conversation, taken on the word of its checkpoint's signer.

Compaction keeps a checkpoint record, the canonical snapshot it names and the headers of the
records it dropped. `encode_cover` writes those headers as the checkpoint's *cover*, so the
three can travel (in a CAR file, or by sync); `plan_adoption` checks them against one another
and against a store, and says what adopting them adds; `check_cover` holds the rules both it
and `Replica.verify` apply. Pure: the store is only read and the time is passed in.
Invariant: an `Adoption` exists only for a validly signed checkpoint whose snapshot hashes to
the CID it names and restores to its count, with a cover that lists exactly the snapshot's
records, parents included, causally consistent, headed by the checkpoint's heads, and
agreeing with every header the store already holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from convgraph.core import codec
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.core.hlc import MAX_COUNTER, MAX_WALL_MS, Hlc, too_far_ahead
from convgraph.core.record import DEFAULT_LIMITS, MAX_SEQ, Limits, Record, RecordMeta, decode_record
from convgraph.core.validation import check_causality
from convgraph.errors import (
    CausalityError,
    ConvgraphError,
    CoverConflictError,
    CoverError,
    SnapshotError,
    StoreError,
)
from convgraph.projections import state as state_
from convgraph.store.base import Store

COVER_VERSION: Final = 1
# canonical DAG-CBOR puts the shortest key first, so a value's role shows in its first bytes
_SNAPSHOT_HEAD: Final = codec.encode({"v": state_.SNAPSHOT_VERSION, "entries": []})[:-1]
_COVER_HEAD: Final = b"\xa3\x61v" + codec.encode(COVER_VERSION) + codec.encode("headers")
_COVER_KEYS: Final = frozenset({"v", "checkpoint", "headers"})
_HEADER_KEYS: Final = frozenset({"cid", "actor", "seq", "hlc", "parents"})

Role = Literal["record", "snapshot", "cover"]


@dataclass(frozen=True)
class Adoption:
    """What adopting a checkpoint adds: its record, its snapshot, the headers not yet held."""

    checkpoint: Record
    snapshot: bytes
    headers: tuple[RecordMeta, ...]  # canonical order, so parents come before children


@dataclass(frozen=True)
class Compaction:
    """What a replica that compacted a conversation hands out so that another can adopt it."""

    checkpoint: CID
    record: bytes  # the checkpoint record's bytes
    snapshot: bytes
    cover: bytes
    count: int  # the records the cover lists (held as headers only by whoever adopts it)


def compaction_of(store: Store, conv: str) -> Compaction | None:
    """The checkpoint, snapshot and cover of `conv`'s latest compaction in `store`, if any."""
    held = store.snapshot(conv)
    if held is None:
        return None
    checkpoint, snapshot = held
    record = store.get(checkpoint)
    if record is None:  # a later compaction would have replaced the snapshot too
        raise StoreError(f"the checkpoint of {conv!r}'s snapshot has no bytes", cid=checkpoint)
    cids = [e["cid"] for e in codec.decode_trusted(snapshot)["entries"]]
    headers = store.metas(cids)
    return Compaction(checkpoint, record, snapshot, encode_cover(checkpoint, headers.values()), len(headers))


def role(data: bytes) -> Role:
    """Whether a DAG-CBOR block is a snapshot (`{v: 1, entries}`), a cover (`{v: 1,
    checkpoint, headers}`) or, anything else, a record candidate."""
    if data.startswith(_SNAPSHOT_HEAD):
        return "snapshot"
    return "cover" if data.startswith(_COVER_HEAD) else "record"


def _order(meta: RecordMeta) -> tuple[int, int, bytes, bytes]:
    return (meta.hlc.wall_ms, meta.hlc.counter, meta.actor, bytes(meta.cid))


def encode_cover(checkpoint: CID, headers: Iterable[RecordMeta]) -> bytes:
    """The canonical cover of `checkpoint`: the headers of the records its snapshot holds."""
    ordered = sorted(headers, key=_order)
    return codec.encode({"v": COVER_VERSION, "checkpoint": checkpoint, "headers": [
        {"cid": m.cid, "actor": m.actor, "seq": m.seq, "hlc": [m.hlc.wall_ms, m.hlc.counter],
         "parents": list(m.parents)} for m in ordered
    ]})


def cover_checkpoint(data: bytes) -> CID | None:
    """The checkpoint a cover names, or None when `data` is not a well-formed cover."""
    try:
        value = codec.decode(data)
    except ConvgraphError:
        return None
    link = value.get("checkpoint") if type(value) is dict else None
    return link if type(link) is CID and link.codec == DAG_CBOR else None


def decode_cover(data: bytes, checkpoint: Record, limits: Limits = DEFAULT_LIMITS) -> list[RecordMeta]:
    """The headers of `checkpoint`'s cover `data`, in canonical order; `CoverError` unless
    it is the canonical cover of exactly that checkpoint."""
    ck = checkpoint.cid
    try:
        value = codec.decode(data)
    except ConvgraphError as exc:
        raise CoverError(f"the cover is not canonical DAG-CBOR: {exc.message}", checkpoint=ck) from exc
    if type(value) is not dict or value.keys() != _COVER_KEYS or value["v"] != COVER_VERSION:
        raise CoverError("not a cover (or an unknown version)", checkpoint=ck)
    if value["checkpoint"] != ck:
        raise CoverError(f"the cover belongs to checkpoint {value['checkpoint']!r}", checkpoint=ck)
    if type(value["headers"]) is not list:
        raise CoverError("the cover's headers must be a list", checkpoint=ck)
    headers = [_header(h, checkpoint, limits) for h in value["headers"]]
    for a, b in itertools.pairwise(headers):
        if _order(a) >= _order(b):
            raise CoverError("headers out of canonical order", checkpoint=ck, record=b.cid)
    return headers


def _header(m: Any, checkpoint: Record, limits: Limits) -> RecordMeta:
    if type(m) is not dict or m.keys() != _HEADER_KEYS:
        raise CoverError("a header must hold exactly cid, actor, seq, hlc, parents",
                         checkpoint=checkpoint.cid)
    cid, actor, seq, hlc, parents = m["cid"], m["actor"], m["seq"], m["hlc"], m["parents"]
    ok = (
        type(cid) is CID and cid.codec == DAG_CBOR and type(actor) is bytes and len(actor) == 32
        and type(seq) is int and 1 <= seq <= MAX_SEQ
        and type(hlc) is list and len(hlc) == 2 and all(type(x) is int for x in hlc)
        and 0 <= hlc[0] <= MAX_WALL_MS and 0 <= hlc[1] <= MAX_COUNTER
        and type(parents) is list and len(parents) <= limits.max_parents
        and all(type(p) is CID and p.codec == DAG_CBOR for p in parents)
        and all(a < b for a, b in itertools.pairwise(parents))
    )
    if not ok:
        raise CoverError("a header has a field of the wrong type", checkpoint=checkpoint.cid,
                         record=cid if type(cid) is CID else None)
    return RecordMeta(cid, checkpoint.conv, actor, seq, Hlc(hlc[0], hlc[1]), tuple(parents))


def check_cover(checkpoint: Record, snapshot: bytes, headers: Iterable[RecordMeta]) -> None:
    """Raise `SnapshotError` unless `snapshot` is the one `checkpoint` names and restores to
    its count, and `CoverError` unless `headers` (any order) are exactly its records, closed
    under parents, causally consistent and headed by the checkpoint's heads."""
    ck, payload = checkpoint.cid, checkpoint.payload
    headers = sorted(headers, key=_order)
    if checkpoint.kind != "checkpoint":
        raise CoverError(f"a record of kind {checkpoint.kind} is no checkpoint", checkpoint=ck)
    if state_.snapshot_cid(snapshot) != payload["snapshot"]:
        raise SnapshotError(f"the snapshot hashes to {state_.snapshot_cid(snapshot)}, the checkpoint "
                            f"names {payload['snapshot']}", cid=ck)
    entries = sorted(state_.restore(snapshot).entries.values(), key=lambda e: e.order_key)
    if len(entries) != payload["count"]:
        raise SnapshotError(f"the checkpoint counts {payload['count']} records, its snapshot holds "
                            f"{len(entries)}", cid=ck)
    if len(headers) != len(entries):
        raise CoverError(f"the snapshot holds {len(entries)} records, the cover {len(headers)}",
                         checkpoint=ck)
    for entry, header in zip(entries, headers, strict=True):
        if (entry.cid, entry.actor, entry.hlc) != (header.cid, header.actor, header.hlc):
            raise CoverError("the cover and the snapshot disagree", checkpoint=ck, record=header.cid)
    covered = {h.cid: h for h in headers}
    named: set[CID] = set()
    for header in headers:
        if not covered.keys() >= set(header.parents):
            raise CoverError("a parent is outside the cover", checkpoint=ck, record=header.cid)
        named.update(header.parents)
        try:
            check_causality(header, covered)
        except CausalityError as exc:
            raise CoverError(f"the cover breaks a causal rule ({exc.message})", checkpoint=ck,
                             record=header.cid) from exc
    if sorted(covered.keys() - named) != sorted(payload["heads"]):
        raise CoverError("the cover's heads are not the checkpoint's", checkpoint=ck)


def plan_adoption(
    checkpoint: bytes, snapshot: bytes, cover: bytes, store: Store, *, now_ms: int, max_drift_ms: int,
    limits: Limits = DEFAULT_LIMITS,
) -> Adoption | None:
    """Check a checkpoint, its snapshot and its cover for adoption into `store`; None when the
    store already holds the checkpoint (nothing to adopt). Raises the checkpoint's own
    intrinsic error, `SnapshotError`, `CoverError` or `CoverConflictError`."""
    record = decode_record(checkpoint, limits=limits)
    if store.has(record.cid):
        return None
    if too_far_ahead(record.hlc, now_ms, max_drift_ms):
        raise CoverError("the checkpoint is ahead of our clock: adopt it later", checkpoint=record.cid)
    headers = decode_cover(cover, record, limits)
    check_cover(record, snapshot, headers)
    held = store.metas(h.cid for h in headers)
    for header in headers:
        if header.cid in held and held[header.cid] != header:
            raise CoverConflictError("the cover disagrees with the record held here",
                                     checkpoint=record.cid, record=header.cid)
    _check_parents(record, {h.cid: h for h in headers}, store)
    _check_snapshot_covered(record, {h.cid for h in headers}, store)
    return Adoption(record, snapshot, tuple(h for h in headers if h.cid not in held))


def _check_parents(record: Record, covered: Mapping[CID, RecordMeta], store: Store) -> None:
    known = {**store.metas(p for p in record.parents if p not in covered), **covered}
    missing = [p for p in record.parents if p not in known]
    if missing:
        raise CoverError(f"parent {missing[0]} is neither covered nor held", checkpoint=record.cid)
    try:
        check_causality(record, known)
    except CausalityError as exc:
        raise CoverError(f"the checkpoint breaks a causal rule ({exc.message})",
                         checkpoint=record.cid) from exc


def _check_snapshot_covered(record: Record, covered: set[CID], store: Store) -> None:
    """A conversation keeps one snapshot: the new one must hold every record the old one did."""
    held = store.snapshot(record.conv)
    if held is None:
        return
    old = {e["cid"] for e in codec.decode_trusted(held[1])["entries"]}
    if not old <= covered:
        raise CoverConflictError(
            f"this replica's snapshot of {record.conv!r} (checkpoint {held[0]}) holds records the "
            "checkpoint does not cover", checkpoint=record.cid, record=min(old - covered),
        )
