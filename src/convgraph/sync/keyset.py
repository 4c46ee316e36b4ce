"""The set sync reconciles: one conversation's records as sorted keys with range fingerprints.

A key is `(wall_ms, digest)`, the record's wall time and the sha2-256 digest of its CID.
A range is `[lower, upper)` between two `Bound`s. Its fingerprint is
`sha256(sum of the digests as little-endian integers mod 2**256 || varint(count))`,
truncated: the sum makes any range's fingerprint two prefix-sum look-ups, so a split costs
O(log n) whatever the range's size. Invariant: equal key sets give equal fingerprints on
every replica; the keys are only ever read, never reordered.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Final

from convgraph.sync.varint import uvarint

Key = tuple[int, bytes]

DIGEST_LEN: Final = 32
STRONG_LEN: Final = 16  # a whole conversation's fingerprint: the convergence check
RANGE_LEN: Final = 4  # a sub-range's: a collision only delays, the strong check catches it
HASH_LEN: Final = 3  # an item in an id list: salted per session, so no one can aim a collision
_MOD: Final = 1 << 256


@dataclass(frozen=True, order=True)
class Bound:
    """A point between keys: everything with `(wall_ms, digest) < (wall_ms, prefix)` is below it.

    `prefix` is the shortest digest prefix that separates the two keys on either side, so
    most bounds carry none. `INFINITY` lies above every key.
    """

    wall_ms: int
    prefix: bytes = b""

    @property
    def infinite(self) -> bool:
        return self.wall_ms == INFINITE_MS


INFINITE_MS: Final = 1 << 64
MINUS_INFINITY: Final = Bound(0)
INFINITY: Final = Bound(INFINITE_MS)


def separating(below: Key, above: Key) -> Bound:
    """The shortest bound `b` with `below < b <= above`. Precondition: `below < above`."""
    if below[0] != above[0]:
        return Bound(above[0])
    a, b = below[1], above[1]
    n = next(i for i in range(DIGEST_LEN) if a[i] != b[i])
    return Bound(above[0], b[: n + 1])


def fingerprint(total: int, count: int, length: int) -> bytes:
    """The fingerprint of a range whose digests sum to `total` (mod 2**256) over `count` keys."""
    body = (total % _MOD).to_bytes(32, "little") + uvarint(count)
    return hashlib.sha256(body).digest()[:length]


def item_hash(salt: bytes, digest: bytes) -> bytes:
    """A record's short name in an id list: keyed by the session's salt."""
    return hashlib.blake2b(digest, digest_size=HASH_LEN, key=salt).digest()


class KeySet:
    """One conversation's sorted keys with prefix sums of their digests."""

    __slots__ = ("_sums", "keys")

    def __init__(self, keys: Sequence[Key]) -> None:
        """`keys` must be sorted and unique (as `Store.sync_keys` returns them)."""
        self.keys = keys
        self._sums = [0, *accumulate(int.from_bytes(d, "little") for _, d in keys)]

    @classmethod
    def of(cls, keys: Iterable[Key]) -> KeySet:
        """A key set from keys in any order, duplicates dropped."""
        return cls(sorted(set(keys)))

    def adding(self, new: Iterable[Key]) -> KeySet:
        """This set with `new` keys added; cheap when they land near the end, as fresh ones do."""
        fresh = sorted({k for k in new if not self._has(k)})
        if not fresh:
            return self
        first = bisect_left(self.keys, fresh[0])
        tail = sorted([*self.keys[first:], *fresh])
        out = KeySet.__new__(KeySet)
        out.keys = [*self.keys[:first], *tail]
        added = accumulate((int.from_bytes(d, "little") for _, d in tail), initial=self._sums[first])
        out._sums = [*self._sums[:first], *added]
        return out

    def _has(self, key: Key) -> bool:
        i = bisect_left(self.keys, key)
        return i < len(self.keys) and self.keys[i] == key

    def __len__(self) -> int:
        return len(self.keys)

    def index(self, bound: Bound) -> int:
        """How many keys lie below `bound`."""
        if bound.infinite:
            return len(self.keys)
        return bisect_left(self.keys, (bound.wall_ms, bound.prefix))

    def fingerprint(self, lo: int, hi: int, length: int = RANGE_LEN) -> bytes:
        """The fingerprint of the keys at positions `[lo, hi)`."""
        return fingerprint(self._sums[hi] - self._sums[lo], hi - lo, length)

    def total(self) -> int:
        """The sum of all digests (not reduced): lets a caller add keys it learns of."""
        return self._sums[-1]

    def digests(self, lo: int, hi: int) -> list[bytes]:
        return [d for _, d in self.keys[lo:hi]]
