"""A `SyncPeer` over a plain dict, for testing the state machine without a replica.

A record is any bytes whose first six bytes are its wall time; its digest is its sha256,
as a real record's CID digest is. `ingest` accepts everything new unless told to refuse it.
`stubborn` makes a hostile responder out of an honest one.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence

from convgraph.sync import wire
from convgraph.sync.keyset import KeySet
from convgraph.sync.reconcile import Outcome
from convgraph.sync.responder import Responder

T0 = 1_700_000_000_000


def record(wall: int, body: bytes) -> bytes:
    return wall.to_bytes(6, "big") + body


class FakePeer:
    def __init__(self, records: Sequence[bytes] = (), *, refuse: Callable[[bytes], bool] = lambda _: False) -> None:
        self.items: dict[bytes, tuple[int, bytes]] = {}
        self._keys: KeySet | None = None
        self.refuse = refuse
        self.gone: set[bytes] = set()  # digests whose bytes were "compacted away"
        for data in records:
            self._add(data)

    def _add(self, data: bytes) -> bytes:
        digest = hashlib.sha256(data).digest()
        self.items[digest] = (int.from_bytes(data[:6], "big"), data)
        self._keys = None
        return digest

    def keys(self, conv: str) -> KeySet:
        if self._keys is None:
            self._keys = KeySet(sorted((w, d) for d, (w, _) in self.items.items()))
        return self._keys

    def fetch(self, digests: Sequence[bytes]) -> list[bytes | None]:
        found = [self.items.get(d) for d in digests]
        return [None if f is None or d in self.gone else f[1] for d, f in zip(digests, found, strict=True)]

    def ingest(self, conv: str, records: Sequence[bytes]) -> Outcome:
        out, report = Outcome(), []
        for data in records:
            digest = hashlib.sha256(data).digest()
            if self.refuse(data):
                out.rejected.append((digest, "signature", "refused by the test"))
                report.append(wire.Reported(wire.Fate.REJECTED, digest, rule="signature"))
            elif digest not in self.items:
                out.accepted.append(self._add(data))
                report.append(wire.Reported(wire.Fate.ACCEPTED, digest))
            else:
                report.append(wire.Reported(wire.Fate.DUPLICATE, digest))
        out.report = tuple(report)
        return out

    def set(self) -> set[bytes]:
        return set(self.items)


class ManyPeers:
    """One `FakePeer` per conversation, made on first use."""

    def __init__(self, convs: dict[str, FakePeer]) -> None:
        self.convs = convs

    def _of(self, conv: str) -> FakePeer:
        return self.convs.setdefault(conv, FakePeer())

    def keys(self, conv: str) -> KeySet:
        return self._of(conv).keys(conv)

    def fetch(self, digests: Sequence[bytes]) -> list[bytes | None]:
        return [next((d for p in self.convs.values() if (d := p.fetch([x])[0]) is not None), None) for x in digests]

    def ingest(self, conv: str, records: Sequence[bytes]) -> Outcome:
        return self._of(conv).ingest(conv, records)


def population(rng: random.Random, n: int, *, size: int = 64, spread: int = 3) -> list[bytes]:
    """n distinct records with increasing, sometimes equal wall times."""
    return [record(T0 + i * spread // 2 + rng.randrange(2), rng.randbytes(size)) for i in range(n)]


def stubborn(honest: Responder) -> Callable[[bytes], bytes]:
    """A responder that always claims the whole range differs, whatever was asked: it never settles."""

    def answer(message: bytes) -> bytes:
        reply = wire.decode(honest.receive(message))
        flipped = [wire.Section(s.conv, s.count, s.strong, s.tip,
                                ranges=(wire.Range(wire.INFINITY, wire.Mode.FINGERPRINT, fp=b"\0" * 4),))
                   for s in reply.sections]
        return wire.encode(wire.Message(wire.Kind.REPLY, reply.salt, tuple(flipped)))

    return answer
