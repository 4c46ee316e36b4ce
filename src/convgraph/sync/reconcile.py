"""One reconciliation step, the same on both sides of a sync session: pure, no I/O.

Given the ranges and wants a peer sent for one conversation and our own `KeySet`, `answer`
returns our next cover (a range whose fingerprints differ is split into `BRANCH` parts, or
listed when we hold at most `LIST_AT` keys in it), the hashes we lack from the peer's
lists, and the keys we must push. Invariant: a range is left SKIP only when both sides
hold the same keys in it (up to a fingerprint collision, which the strong check at the end
of a session catches), or when this step's pushes and wants make them so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from convgraph.core.cid import CID
from convgraph.sync.keyset import (
    INFINITY,
    MINUS_INFINITY,
    STRONG_LEN,
    Bound,
    Key,
    KeySet,
    fingerprint,
    item_hash,
    separating,
)
from convgraph.sync.messages import Base, Fate, Mode, Range, Reported, Section, Want, WireLimits

BRANCH: Final = 16
LIST_AT: Final = 32
FIRST_LIST_AT: Final = 256  # in the first answer: a short differing tail goes across in one list
PROBES: Final = (16, 256, 4096, 65536)  # tail sizes whose prefix the first message fingerprints
BASE_SLACK: Final = 1 << 16  # room a message keeps beside a base, for the section's other parts
_CID_PREFIX: Final = b"\x01\x71\x12\x20"  # CIDv1, dag-cbor, sha2-256, 32 bytes: every record's


def cid_of(digest: bytes) -> CID:
    """The record CID whose sha2-256 digest is `digest`."""
    return CID(_CID_PREFIX + digest)


@dataclass
class Outcome:
    """What the local replica did with records a peer sent."""

    accepted: list[bytes] = field(default_factory=list)  # digests now in the set
    quarantined: int = 0
    rejected: list[tuple[bytes | None, str, str]] = field(default_factory=list)  # digest, rule, why
    report: tuple[Reported, ...] = ()  # the fate of each record handed in (`sync.fates`)
    adopted: list[Key] = field(default_factory=list)  # keys a base added (their digests in `accepted` too)

    def merge(self, other: Outcome) -> None:
        self.accepted += other.accepted
        self.quarantined += other.quarantined
        self.rejected += other.rejected
        self.report += other.report
        self.adopted += other.adopted


class SyncPeer(Protocol):
    """The replica a state machine speaks for; the shell implements it over a store."""

    def keys(self, conv: str) -> KeySet:
        """The conversation's current key set (empty when we hold none of it)."""
        ...

    def fetch(self, digests: Sequence[bytes]) -> list[bytes | None]:
        """The records' bytes, in order; None for one compacted away (or unknown)."""
        ...

    def heads(self, conv: str) -> list[CID]:
        """The conversation's heads: the records of its set that no record of it names as a parent."""
        ...

    def ingest(self, conv: str, records: Sequence[bytes], *, report: bool = True) -> Outcome:
        """Validate and store records a peer sent for `conv`; a bad one never stops the rest.

        The outcome's `report` holds one entry per record, in order (`sync.fates`): a
        responder sends it as its reply's report part. With `report=False` (an initiator,
        which sends no report) it may be left empty, and its look-ups skipped.
        """
        ...

    def base(self, conv: str) -> Base | None:
        """The base of `conv`'s latest compaction, which covers every record we hold as a
        header only; None when we never compacted or adopted it."""
        ...

    def adopt(self, conv: str, base: Base) -> Outcome:
        """Adopt a base a peer sent for `conv` (if our policy trusts its signer): the keys it
        adds count as accepted; a refusal is one rejection, naming the checkpoint."""
        ...


@dataclass
class Step:
    """Our answer to one section: a new cover, wants, and keys to push."""

    cover: list[tuple[Bound, Bound, Range]] = field(default_factory=list)  # (lower, upper, range)
    wants: list[Want] = field(default_factory=list)
    pushes: list[Key] = field(default_factory=list)


def split(keys: KeySet, lo: Bound, hi: Bound, salt: bytes, step: Step, *, list_at: int = LIST_AT) -> None:
    """Ask about `[lo, hi)`: list our keys there when few, else fingerprint BRANCH parts."""
    i, j = keys.index(lo), keys.index(hi)
    if j - i <= list_at:
        hashes = tuple(item_hash(salt, d) for d in keys.digests(i, j))
        step.cover.append((lo, hi, Range(hi, Mode.IDS, hashes=hashes)))
        return
    cuts = [i + (j - i) * k // BRANCH for k in range(1, BRANCH)]
    bounds = [separating(keys.keys[c - 1], keys.keys[c]) for c in cuts]
    for a, b, lower, upper in zip([i, *cuts], [*cuts, j], [lo, *bounds], [*bounds, hi], strict=True):
        step.cover.append((lower, upper, Range(upper, Mode.FINGERPRINT, fp=keys.fingerprint(a, b))))


def answer(section: Section, keys: KeySet, salt: bytes, received: set[bytes]) -> Step:
    """Reconcile every range and want of `section` against `keys`.

    `received` holds the item hashes of records that came with this very message: they
    are no longer lacking, whatever the peer's lists say.
    """
    step = Step()
    lo = MINUS_INFINITY
    for r in section.ranges or ():
        i, j = keys.index(lo), keys.index(r.upper)
        if r.mode is Mode.FINGERPRINT and keys.fingerprint(i, j) != r.fp:
            split(keys, lo, r.upper, salt, step)
        else:
            if r.mode is Mode.IDS:
                theirs = set(r.hashes)
                # a list of pairs, not a dict: two of our keys may share a 3-byte hash, and
                # each must still be pushed when the peer lists neither
                mine = [(item_hash(salt, k[1]), k) for k in keys.keys[i:j]]
                step.pushes += [k for h, k in mine if h not in theirs]
                held = {h for h, _ in mine}
                lacking = tuple(h for h in r.hashes if h not in held and h not in received)
                if lacking:
                    step.wants.append(Want(lo, r.upper, lacking))
            step.cover.append((lo, r.upper, Range(r.upper, Mode.SKIP)))
        lo = r.upper
    for w in section.wants:
        wanted = set(w.hashes)
        i, j = keys.index(w.lower), keys.index(w.upper)
        step.pushes += [k for k in keys.keys[i:j] if item_hash(salt, k[1]) in wanted]
    return step


def reopen(step: Step, keys: KeySet, start: Bound) -> None:
    """Fingerprint every SKIP range at or past `start` again: pushes there did not fit in
    this message, so the peer must ask for that part once more."""
    painted: list[tuple[Bound, Bound, Range]] = []
    for lo, hi, r in step.cover or [(MINUS_INFINITY, INFINITY, Range(INFINITY, Mode.SKIP))]:
        if r.mode is not Mode.SKIP or hi <= start:
            painted.append((lo, hi, r))
            continue
        if lo < start:
            painted.append((lo, start, Range(start, Mode.SKIP)))
        fp = keys.fingerprint(keys.index(max(lo, start)), keys.index(hi))
        painted.append((max(lo, start), hi, Range(hi, Mode.FINGERPRINT, fp=fp)))
    step.cover = painted


def cover(step: Step) -> tuple[Range, ...] | None:
    """The step's ranges with neighbouring SKIPs merged; None when all of it is SKIP."""
    merged: list[Range] = []
    for _, _, r in step.cover:
        if merged and r.mode is Mode.SKIP and merged[-1].mode is Mode.SKIP:
            merged[-1] = r
        else:
            merged.append(r)
    if all(r.mode is Mode.SKIP for r in merged):
        return None
    if merged[-1].upper != INFINITY:  # a cover always reaches infinity
        merged.append(Range(INFINITY, Mode.SKIP))
    return tuple(merged)


def received_hashes(salt: bytes, records: Iterable[bytes], adopted: Iterable[Key] = ()) -> set[bytes]:
    """Item hashes of what arrived with a message: its records, and the keys its base added."""
    return {item_hash(salt, hashlib.sha256(data).digest()) for data in records} | {
        item_hash(salt, d) for _, d in adopted}


def refusal(checkpoint: bytes, rule: str, why: str) -> Outcome:
    """A base not adopted: one rejection naming its checkpoint's digest, which is also the
    entry that leads the reply's report (`docs/sync.md`, *Compacted history*)."""
    entry = Reported(Fate.REJECTED, checkpoint, rule=rule)
    return Outcome(rejected=[(checkpoint, rule, why)], report=(entry,))


def take_in(peer: SyncPeer, section: Section, *, report: bool = True) -> Outcome:
    """Adopt the section's base, then ingest its records (which may build on the base);
    `report=False` when nobody reads the records' report (`SyncPeer.ingest`)."""
    outcome = Outcome()
    if section.base is not None:
        outcome.merge(peer.adopt(section.conv, section.base))
    if section.records:
        outcome.merge(peer.ingest(section.conv, section.records, report=report))
    return outcome


def base_for(peer: SyncPeer, conv: str, limits: WireLimits) -> Base | None:
    """Our base of `conv` when it can travel: a message must hold it whole, with room to spare."""
    base = peer.base(conv)
    return base if base is not None and base.size() <= limits.max_message - BASE_SLACK else None


def summary(keys: KeySet, accepted: Iterable[bytes] = ()) -> tuple[int, bytes]:
    """(count, strong fingerprint) of `keys` plus the digests in `accepted`."""
    extra = list(accepted)
    total = keys.total() + sum(int.from_bytes(d, "little") for d in extra)
    count = len(keys) + len(extra)
    return count, fingerprint(total, count, STRONG_LEN)


def probes(keys: KeySet) -> tuple[tuple[Bound, bytes], ...]:
    """Fingerprints of our prefixes that leave out the last 16, 256, ... keys: a peer that
    shares one of them can skip straight to the tail where we differ."""
    found = []
    for size in sorted(PROBES, reverse=True):
        pos = len(keys) - size
        if pos > 0:
            found.append((separating(keys.keys[pos - 1], keys.keys[pos]), keys.fingerprint(0, pos)))
    return tuple(found)
