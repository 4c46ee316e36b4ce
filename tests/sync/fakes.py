"""A `SyncPeer` over a plain dict, for testing the state machine without a replica.

A record is any bytes whose first six bytes are its wall time; its digest is its sha256,
as a real record's CID digest is. `ingest` accepts everything new unless told to refuse it.
`compact` drops the bytes of some records and makes a base that lists their keys, which
`adopt` takes in as keys without bytes, as a replica adopts a checkpoint's cover.
`stubborn` makes a hostile responder out of an honest one.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from typing import Any

from convgraph.core.cid import CID
from convgraph.core.keys import SigningKey
from convgraph.sync import wire
from convgraph.sync.keyset import INFINITY, KeySet
from convgraph.sync.reconcile import Outcome, cid_of, refusal
from convgraph.sync.responder import Responder
from convgraph.sync.wire import Base, Fate, Reported

T0 = 1_700_000_000_000
KEY = SigningKey(bytes(range(32)))  # the fake responder's: it signs a statement per reply section


def responder(peer: Any, **kw: Any) -> Responder:
    """A responder over a fake peer, signing with `KEY` at a fixed time."""
    return Responder(peer, key=KEY, clock=lambda: T0, **kw)


def record(wall: int, body: bytes) -> bytes:
    return wall.to_bytes(6, "big") + body


class FakePeer:
    def __init__(self, records: Sequence[bytes] = (), *, refuse: Callable[[bytes], bool] = lambda _: False) -> None:
        self.items: dict[bytes, tuple[int, bytes]] = {}
        self._keys: KeySet | None = None
        self.refuse = refuse
        self.gone: set[bytes] = set()  # digests whose bytes were "compacted away"
        self._base: Base | None = None
        self.refuse_bases = False
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

    def heads(self, conv: str) -> list[CID]:
        # fake records name no parents: the newest key stands for the heads
        keys = self.keys(conv).keys
        return [cid_of(keys[-1][1])] if keys else []

    def fetch(self, digests: Sequence[bytes]) -> list[bytes | None]:
        found = [self.items.get(d) for d in digests]
        return [None if f is None or d in self.gone else f[1] for d, f in zip(digests, found, strict=True)]

    def ingest(self, conv: str, records: Sequence[bytes], *, report: bool = True) -> Outcome:
        out, entries = Outcome(), []
        for data in records:
            digest = hashlib.sha256(data).digest()
            if self.refuse(data):
                out.rejected.append((digest, "signature", "refused by the test"))
                entries.append(wire.Reported(wire.Fate.REJECTED, digest, rule="signature"))
            elif digest not in self.items:
                out.accepted.append(self._add(data))
                entries.append(wire.Reported(wire.Fate.ACCEPTED, digest))
            else:
                entries.append(wire.Reported(wire.Fate.DUPLICATE, digest))
        out.report = tuple(entries) if report else ()
        return out

    def set(self) -> set[bytes]:
        return set(self.items)

    def compact(self, digests: set[bytes]) -> None:
        """Keep only the keys of `digests` (and of what was compacted before), and a base of them."""
        self.gone |= digests
        cover = b"".join(self.items[d][0].to_bytes(8, "big") + d for d in sorted(self.gone))
        self._base = Base(b"checkpoint " + hashlib.sha256(cover).digest(), b"snapshot", cover)

    def base(self, conv: str) -> Base | None:
        return self._base

    def adopt(self, conv: str, base: Base) -> Outcome:
        digest = hashlib.sha256(base.checkpoint).digest()
        covered = {base.cover[i + 8 : i + 40]: int.from_bytes(base.cover[i : i + 8], "big")
                   for i in range(0, len(base.cover), 40)}
        if self.refuse_bases:
            return refusal(digest, "untrusted_checkpoint", "refused by the test")
        if not self.gone <= covered.keys():  # one snapshot per conversation: it must hold ours
            return refusal(digest, "cover_conflict", "does not cover what we compacted")
        added = [d for d in covered if d not in self.items]
        for d in added:
            self.items[d] = (covered[d], b"")
        self.gone |= covered.keys()
        self._base, self._keys = base, None
        fate = Fate.ACCEPTED if added else Fate.DUPLICATE
        return Outcome(accepted=added, adopted=[(covered[d], d) for d in added], report=(Reported(fate, digest),))


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

    def heads(self, conv: str) -> list[CID]:
        return self._of(conv).heads(conv)

    def ingest(self, conv: str, records: Sequence[bytes], *, report: bool = True) -> Outcome:
        return self._of(conv).ingest(conv, records, report=report)

    def base(self, conv: str) -> Base | None:
        return self._of(conv).base(conv)

    def adopt(self, conv: str, base: Base) -> Outcome:
        return self._of(conv).adopt(conv, base)


def population(rng: random.Random, n: int, *, size: int = 64, spread: int = 3) -> list[bytes]:
    """n distinct records with increasing, sometimes equal wall times."""
    return [record(T0 + i * spread // 2 + rng.randrange(2), rng.randbytes(size)) for i in range(n)]


def stubborn(honest: Responder) -> Callable[[bytes], bytes]:
    """A responder that always claims the whole range differs, whatever was asked: it never settles."""

    def answer(message: bytes) -> bytes:
        reply = wire.decode(honest.receive(message))
        flipped = [wire.Section(s.conv, s.count, s.strong, s.tip,
                                ranges=(wire.Range(INFINITY, wire.Mode.FINGERPRINT, fp=b"\0" * 4),),
                                statement=s.statement)
                   for s in reply.sections]
        return wire.encode(wire.Message(wire.Kind.REPLY, reply.salt, tuple(flipped)))

    return answer
