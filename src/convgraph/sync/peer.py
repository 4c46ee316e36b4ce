"""A replica as a sync peer: the shell between the state machine and a store.

Key sets are built from `Store.sync_keys` and cached per conversation behind the store's
change token, so a server answering many messages about an unchanged conversation sorts
and sums its keys once. Ingest restricts every batch to the conversation its section
names. Invariant: `keys(conv)` is always the store's current set for `conv`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from convgraph.core.cid import CID
from convgraph.replica import Replica
from convgraph.sync.fates import fates
from convgraph.sync.keyset import KeySet
from convgraph.sync.reconcile import Outcome

_GREW = object()  # a cache entry grown by our own ingest, to be confirmed against the store
_CID_PREFIX = b"\x01\x71\x12\x20"  # CIDv1, dag-cbor, sha2-256, 32 bytes: every record's


def cid_of(digest: bytes) -> CID:
    """The record CID whose sha2-256 digest is `digest`."""
    return CID(_CID_PREFIX + digest)


class ReplicaPeer:
    """`SyncPeer` over a `Replica`; safe to share between threads."""

    def __init__(self, replica: Replica, *, cache_size: int = 64) -> None:
        self.replica = replica
        self._cache: dict[str, tuple[object, KeySet]] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def share_cache(self, other: ReplicaPeer) -> None:
        """Use `other`'s key-set cache (one per server, not one per request)."""
        self._cache, self._lock = other._cache, other._lock

    def keys(self, conv: str) -> KeySet:
        store = self.replica.store
        token = store.change_token()
        with self._lock:
            hit = self._cache.get(conv)
        if hit is not None and hit[0] == token:
            return hit[1]
        if hit is not None and hit[0] is _GREW and store.count(conv) == len(hit[1]):
            # our own ingest grew the cached set; the store only ever grows, so an equal
            # count means nobody else added anything: no need to read and sort it all again
            keys = hit[1]
        else:
            keys = KeySet(store.sync_keys(conv))
        with self._lock:
            if len(self._cache) >= self._cache_size:
                self._cache.pop(next(iter(self._cache)))
            self._cache[conv] = (token, keys)
        return keys

    def fetch(self, digests: Sequence[bytes]) -> list[bytes | None]:
        cids = [cid_of(d) for d in digests]
        found = self.replica.store.get_many(cids)
        return [found.get(c) for c in cids]

    def ingest(self, conv: str, records: Sequence[bytes]) -> Outcome:
        report = self.replica.ingest(records, conversations={conv})
        store, config = self.replica.store, self.replica.config
        pushed = {CID.of_record(d) for d in records if len(d) <= config.limits.max_record_bytes}
        # only these can be waiting now: read the quarantine for them alone
        waiting = store.pending_get(pushed & {*report.quarantined, *report.held, *report.duplicates})
        elsewhere = [c for c in report.released if c not in pushed]
        # a release in another conversation is not this peer's to know of
        metas = store.metas(elsewhere) if elsewhere else {}
        entries = fates(
            records, report, {c.digest: p for c, p in waiting.items()},
            [c for c in elsewhere if c in metas and metas[c].conv == conv],
            max_bytes=config.limits.max_record_bytes, max_drift_ms=config.max_drift_ms,
        )
        if report.accepted:
            pairs = zip(report.accepted, report.accepted_hlcs, strict=True)
            fresh = [(h.wall_ms, c.digest) for c, h in pairs]
            with self._lock:
                hit = self._cache.get(conv)
                if hit is not None:
                    self._cache[conv] = (_GREW, hit[1].adding(fresh))
        return Outcome(
            accepted=[c.digest for c in report.accepted],
            quarantined=len(report.quarantined) + len(report.held),
            rejected=[(r.cid.digest if r.cid else None, r.rule, str(r.error)) for r in report.rejected],
            report=entries,
        )
