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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import Final, overload

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


class _Prefix(Sequence[Key]):
    """The first `n` items of a list that only ever grows at its end: a view that never changes."""

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[Key], n: int) -> None:
        self._items, self._n = items, n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Key: ...

    @overload
    def __getitem__(self, i: slice) -> list[Key]: ...

    def __getitem__(self, i: int | slice) -> Key | list[Key]:
        if isinstance(i, slice):
            return self._items[slice(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("key index out of range")
        return self._items[i]

    def __iter__(self) -> Iterator[Key]:
        return islice(self._items, self._n)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(other) == self._n and all(
            a == b for a, b in zip(self, other, strict=False))

    def __hash__(self) -> int:
        raise TypeError("a key view is not hashable")

    def __repr__(self) -> str:
        return f"_Prefix({list(self)!r})"


class KeySet:
    """One conversation's sorted keys with prefix sums of their digests.

    A set made by `adding(..., share=True)` keys past the end shares its lists with the set it
    grew from, each seeing only its own prefix, so growing a large set by a few keys costs
    those keys. Invariant: a set never changes once made (its `keys` and sums are fixed
    prefixes of lists that only grow at their end).
    """

    __slots__ = ("_items", "_n", "_sums", "keys")

    def __init__(self, keys: Sequence[Key]) -> None:
        """`keys` must be sorted and unique (as `Store.sync_keys` returns them)."""
        items = list(keys)
        self._set(items, [0, *accumulate(int.from_bytes(d, "little") for _, d in items)], len(items))

    def _set(self, items: list[Key], sums: list[int], n: int) -> None:
        self._items, self._sums, self._n = items, sums, n
        self.keys: Sequence[Key] = _Prefix(items, n)

    @classmethod
    def of(cls, keys: Iterable[Key]) -> KeySet:
        """A key set from keys in any order, duplicates dropped."""
        return cls(sorted(set(keys)))

    def adding(self, new: Iterable[Key], *, share: bool = False) -> KeySet:
        """This set with `new` keys added. With `share`, keys that all land past the end extend
        this set's lists instead of copying them: the caller must be the only one growing
        this set's line of sets at a time (`ConvCache` holds a lock per conversation)."""
        fresh = sorted({k for k in new if not self._has(k)})
        if not fresh:
            return self
        out = KeySet.__new__(KeySet)
        n = self._n
        # nobody grew these lists past us: extend them (other sets keep seeing their prefix)
        if share and len(self._items) == n and (n == 0 or fresh[0] > self._items[n - 1]):
            sums = accumulate((int.from_bytes(d, "little") for _, d in fresh), initial=self._sums[n])
            self._sums.extend(islice(sums, 1, None))  # `initial` is the sum already at n
            self._items.extend(fresh)
            out._set(self._items, self._sums, n + len(fresh))
            return out
        first = bisect_left(self.keys, fresh[0])
        tail = sorted([*self._items[first:n], *fresh])
        added = accumulate((int.from_bytes(d, "little") for _, d in tail), initial=self._sums[first])
        items = [*self._items[:first], *tail]
        out._set(items, [*self._sums[:first], *added], len(items))
        return out

    def _has(self, key: Key) -> bool:
        i = bisect_left(self._items, key, 0, self._n)
        return i < self._n and self._items[i] == key

    def __len__(self) -> int:
        return self._n

    def index(self, bound: Bound) -> int:
        """How many keys lie below `bound`."""
        if bound.infinite:
            return self._n
        return bisect_left(self._items, (bound.wall_ms, bound.prefix), 0, self._n)

    def fingerprint(self, lo: int, hi: int, length: int = RANGE_LEN) -> bytes:
        """The fingerprint of the keys at positions `[lo, hi)`."""
        return fingerprint(self._sums[hi] - self._sums[lo], hi - lo, length)

    def total(self) -> int:
        """The sum of all digests (not reduced): lets a caller add keys it learns of."""
        return self._sums[self._n]

    def digests(self, lo: int, hi: int) -> list[bytes]:
        return [d for _, d in self._items[lo:min(hi, self._n)]]
