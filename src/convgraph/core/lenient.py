"""A lenient reading of CBOR: would these bytes be a DAG-CBOR value in *some* encoding?

`codec.decode` accepts only the canonical encoding. When it refuses an input, this reader
decides the error class (docs/format.md §2.7): an input that is one well-formed CBOR item
(RFC 8949) made only of DAG-CBOR values is merely non-canonical; anything else is not
DAG-CBOR at all, and that wins wherever in the input it sits. The reader builds no values
and walks without recursion, so its cost is one pass over the bytes whatever their nesting.
Invariant: `invalidity(b)` is None exactly when `b` is such an item, in any encoding: heads
of any width, indefinite lengths, 16/32/64-bit finite floats, map keys in any order.
"""

from __future__ import annotations

from typing import Final

from convgraph.core.cid import CID
from convgraph.errors import DecodeError

_BREAK: Final = 0xFF
_TAG_LINK: Final = 42
_SIMPLE_OK: Final = frozenset({20, 21, 22})  # false, true, null
_FLOAT_WIDTH: Final = {25: 2, 26: 4, 27: 8}
_EXP_ALL_ONES: Final = {2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000}  # NaN or Infinity


class _NotAValueError(Exception):
    """Raised inside the walk: the input is not a DAG-CBOR value in any encoding."""


def invalidity(data: bytes) -> str | None:
    """Why `data` is not one DAG-CBOR value in any encoding (the first reason met), or None."""
    try:
        end = _Reader(data).read_item()
    except _NotAValueError as exc:
        return str(exc)
    if end != len(data):
        return f"trailing bytes after the data item, from byte {end}"
    return None


class _Reader:
    """One left-to-right pass: heads, string bodies and the nesting of containers."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def head(self) -> tuple[int, int, int]:
        """(major type, additional info, argument); the argument is -1 for info 31."""
        data, pos = self.data, self.pos
        if pos >= len(data):
            raise _NotAValueError(f"truncated at byte {pos}")
        major, info = data[pos] >> 5, data[pos] & 31
        self.pos = pos + 1
        if info < 24:
            return major, info, info
        if info == 31:
            return major, info, -1
        if info > 27:
            raise _NotAValueError(f"reserved additional info {info} at byte {pos}")
        if major == 7:  # floats and two-byte simple values: the caller reads the payload
            return major, info, 0
        return major, info, self.uint(1 << (info - 24))

    def uint(self, size: int) -> int:
        return int.from_bytes(self.body(size), "big")

    def body(self, length: int) -> bytes:
        end = self.pos + length
        if end > len(self.data):
            raise _NotAValueError(f"truncated at byte {len(self.data)}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def string(self, major: int, length: int, at: int) -> bytes:
        """A byte or text string's content; chunks of an indefinite one must be its own kind."""
        if length >= 0:
            return self._checked(major, self.body(length), at)
        parts: list[bytes] = []
        while self.pos < len(self.data) and self.data[self.pos] != _BREAK:
            chunk_at = self.pos
            chunk_major, info, n = self.head()
            if chunk_major != major or info == 31:
                raise _NotAValueError(f"indefinite-length string at byte {at} holds a chunk that is not a "
                               f"definite-length string of its own type, at byte {chunk_at}")
            parts.append(self._checked(major, self.body(n), chunk_at))
        self.pos += 1  # the break (a missing one shows as truncation on the next read)
        if self.pos > len(self.data):
            raise _NotAValueError(f"truncated at byte {len(self.data)}")
        return b"".join(parts)

    @staticmethod
    def _checked(major: int, content: bytes, at: int) -> bytes:
        if major == 3:
            try:
                content.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _NotAValueError(f"text at byte {at} is not UTF-8: {exc.reason}") from None
        return content

    def link(self, tag: int, at: int) -> None:
        if tag != _TAG_LINK:
            raise _NotAValueError(f"tag {tag} at byte {at}: only tag 42 exists")
        inner_at = self.pos
        major, _, n = self.head()
        if major != 2:
            raise _NotAValueError(f"tag 42 at byte {at} holds major type {major}, not a byte string")
        content = self.string(2, n, inner_at)
        if content[:1] != b"\x00":
            raise _NotAValueError(f"link at byte {at} lacks the 0x00 multibase prefix")
        try:
            CID(content[1:])
        except DecodeError as exc:
            raise _NotAValueError(f"link at byte {at}: {exc.message}") from None

    def simple(self, info: int, at: int) -> None:
        if info in _SIMPLE_OK:
            return
        width = _FLOAT_WIDTH.get(info)
        if width is not None:
            if self.uint(width) & _EXP_ALL_ONES[width] == _EXP_ALL_ONES[width]:
                raise _NotAValueError(f"NaN or Infinity at byte {at}")
            return
        if info == 24:
            value = self.uint(1)
            if value < 32:
                raise _NotAValueError(f"simple value {value} in two bytes at byte {at}")
            raise _NotAValueError(f"simple value {value} at byte {at}")
        if info == 31:
            raise _NotAValueError(f"break byte outside an indefinite-length item at byte {at}")
        raise _NotAValueError(f"simple value {info} at byte {at}")

    def read_item(self) -> int:
        """Read one whole data item; return where it ends."""
        # Per open container: items still to read when definite (> 0), or -1 - items read so
        # far when indefinite (< 0); an item in an even position of a map is a key. Common
        # heads are parsed inline: on hostile input this loop runs once per byte.
        lefts: list[int] = []
        maps: list[bool] = []
        data, size, pos = self.data, len(self.data), self.pos
        while True:
            if lefts and lefts[-1] < 0 and pos < size and data[pos] == _BREAK:
                pos = self.end_indefinite(lefts[-1], maps[-1], pos)
                lefts[-1] = 0
            else:
                key = False
                if lefts:
                    left = lefts[-1]
                    key = maps[-1] and left % 2 == (left < 0)
                    lefts[-1] = left - 1
                if pos >= size:
                    raise _NotAValueError(f"truncated at byte {pos}")
                at, major, info = pos, data[pos] >> 5, data[pos] & 31
                pos += 1
                if key and major != 3:
                    raise _NotAValueError(f"map key at byte {at} is not a text string")
                arg = info
                if info >= 24:
                    if info == 31:
                        arg = -1
                    elif info > 27:
                        raise _NotAValueError(f"reserved additional info {info} at byte {at}")
                    elif major != 7:
                        width = 1 << (info - 24)
                        if pos + width > size:
                            raise _NotAValueError(f"truncated at byte {size}")
                        arg = int.from_bytes(data[pos : pos + width], "big")
                        pos += width
                if major in (4, 5):
                    width = 2 if major == 5 else 1
                    if arg > (size - pos) // width:
                        raise _NotAValueError(f"container at byte {at} claims more items than bytes remain")
                    if arg:
                        lefts.append(arg * width if arg > 0 else -1)
                        maps.append(major == 5)
                        continue
                elif (major == 2 and 0 <= arg <= size - pos) or (major == 3 and arg == 0):
                    pos += arg  # a definite byte string, or an empty text: nothing to check
                elif arg < 0 or (major > 1 and not (major == 7 and 20 <= info <= 22)):
                    self.pos = pos
                    self.rest(major, info, arg, at)
                    pos = self.pos
            while lefts and lefts[-1] == 0:
                lefts.pop()
                maps.pop()
            if not lefts:
                return pos

    @staticmethod
    def end_indefinite(left: int, is_map: bool, pos: int) -> int:
        """Where the item after the break at `pos` starts; a map may not end after a key."""
        if is_map and left % 2 == 0:
            raise _NotAValueError(f"map ends after a key, at byte {pos}")
        return pos + 1

    def rest(self, major: int, info: int, arg: int, at: int) -> None:
        """Read what follows a head the main loop does not finish itself: strings, tags, simple
        values and floats, and info 31 where it has no meaning."""
        if major in (0, 1, 6) and arg < 0:
            raise _NotAValueError(f"additional info 31 (indefinite length) on major type {major} "
                                  f"at byte {at}")
        if major in (2, 3):
            self.string(major, arg, at)
        elif major == 6:
            self.link(arg, at)
        else:
            self.simple(info, at)
