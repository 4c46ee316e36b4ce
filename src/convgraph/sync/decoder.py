"""Reading a sync message back from its bytes, strictly (the grammar is `docs/sync.md`).

A version byte first, minimal varints, every length and count within `WireLimits`, bounds
strictly increasing where the grammar says so, no trailing bytes; each message kind carries only
the parts the grammar allows it. Anything else raises `ProtocolError`, with a `reason` the spec
lists, before any of the message is acted on. Invariant: `encode(decode(b)) == b` for every `b`
that decodes (`sync.encoder`).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import NoReturn

from convgraph.core.cid import CID
from convgraph.errors import ProtocolError
from convgraph.integrity.statement import MAX_STATEMENT_BYTES
from convgraph.sync.keyset import DIGEST_LEN, HASH_LEN, INFINITE_MS, INFINITY, RANGE_LEN, STRONG_LEN, Bound
from convgraph.sync.messages import (
    ARTIFACT_PARTS,
    BLOCK_CODECS,
    DEFAULT_LIMITS,
    F_BASE,
    F_BLOCKS,
    F_GONE,
    F_GOSSIP,
    F_NEEDS,
    F_PROBES,
    F_RANGES,
    F_RECORDS,
    F_REPORT,
    F_STATEMENT,
    F_SUMMARY,
    F_TIP,
    F_WANTS,
    MAX_BLOCK,
    MAX_GOSSIP,
    MAX_NEEDS,
    MAX_PARENTS,
    PARTS,
    SALT_LEN,
    VERSION,
    VERSIONS,
    Base,
    Fate,
    Kind,
    Message,
    Mode,
    Range,
    Reported,
    Section,
    Want,
    WireLimits,
)


def decode(
    data: bytes, limits: WireLimits = DEFAULT_LIMITS, *, admit: Callable[[str], None] | None = None
) -> Message:
    """Parse and check a message; `ProtocolError` (with the byte offset) on any deviation.

    `admit(conv)` runs as each section's name is read, before the rest of that section: an
    error it raises ends decoding there, so a receiver can refuse a conversation for the
    price of the bytes before its name.
    """
    if len(data) > limits.max_message:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the limit of {limits.max_message}",
                            reason="limit")
    r = _Reader(data, limits)
    version = r.byte()
    if version not in VERSIONS:
        r.fail(f"unsupported sync protocol version {version} (this side speaks 3 and {VERSION})", "version")
    raw_kind = r.byte()
    if raw_kind not in Kind._value2member_map_:
        r.fail(f"unknown message kind {raw_kind}", "kind")
    kind = Kind(raw_kind)
    salt = r.take(SALT_LEN)
    n = r.count(limits.max_sections, "sections")
    if n == 0 and kind is Kind.CONTINUE:
        r.fail("a CONTINUE with no section", "part")
    sections: list[Section] = []
    for _ in range(n):
        conv = r.name()
        if sections and conv <= sections[-1].conv:
            r.fail("sections must be sorted by conversation, each once")
        if admit is not None:
            admit(conv)
        sections.append(r.section(conv, kind, version))
    if r.pos != len(data):
        r.fail(f"{len(data) - r.pos} trailing bytes")
    return Message(kind, salt, tuple(sections), version)


class _Reader:
    def __init__(self, data: bytes, limits: WireLimits) -> None:
        self.data, self.pos, self.limits = data, 0, limits
        self.hashes = 0

    def fail(self, why: str, reason: str = "malformed") -> NoReturn:
        raise ProtocolError(f"sync message refused at byte {self.pos} ({reason}): {why}", reason=reason)

    def byte(self) -> int:
        if self.pos >= len(self.data):
            self.fail("truncated")
        self.pos += 1
        return self.data[self.pos - 1]

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            self.fail(f"truncated: {n} bytes wanted, {len(self.data) - self.pos} left")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def varint(self) -> int:
        value, shift = 0, 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                if b == 0 and shift:
                    self.fail("non-minimal varint")
                if value >> 64:
                    self.fail("varint longer than 64 bits")
                return value
            shift += 7
            if shift > 63:
                self.fail("varint longer than 64 bits")

    def count(self, limit: int, what: str, *, least: int = 0) -> int:
        n = self.varint()
        if n < least:
            self.fail(f"an empty list of {what} (leave the flag unset instead)")
        if n > limit:
            self.fail(f"{n} {what} exceed the limit of {limit}", "limit")
        if n > len(self.data) - self.pos:  # each item takes at least a byte: refuse before looping
            self.fail(f"{n} {what} cannot fit in what is left")
        return n

    def hash_list(self, n_limit: int) -> tuple[bytes, ...]:
        n = self.count(n_limit, "hashes")
        self.hashes += n
        if self.hashes > self.limits.max_hashes:
            self.fail(f"more than {self.limits.max_hashes} hashes in one message", "limit")
        blob = self.take(n * HASH_LEN)
        return tuple(blob[i : i + HASH_LEN] for i in range(0, len(blob), HASH_LEN))

    def bound(self, prev: list[int], *, moded: bool = False) -> tuple[Bound, int]:
        delta = self.varint()
        tag = self.byte()
        mode, n = tag >> 6, tag & 0x3F
        if mode and not moded:
            self.fail("a mode on a bound that takes none")
        if delta == 0:
            if n:
                self.fail("a prefix on the infinite bound")
            return INFINITY, mode
        wall = prev[0] + delta - 1
        if wall >= INFINITE_MS:
            self.fail("bound beyond the largest wall time")
        prev[0] = wall
        if n > DIGEST_LEN:
            self.fail(f"bound prefix of {n} bytes")
        return Bound(wall, self.take(n)), mode

    def name(self) -> str:
        name_len = self.count(self.limits.max_name, "name bytes")
        if name_len == 0:  # no conversation is named by nothing: refused here, not by a later layer
            self.fail("an empty conversation name")
        try:
            return self.take(name_len).decode()
        except UnicodeDecodeError:
            self.fail("conversation name is not UTF-8")

    def section(self, conv: str, kind: Kind, version: int = VERSION) -> Section:
        flags = self.varint()
        allowed, required = PARTS[kind]
        if version < 4:
            allowed &= ~ARTIFACT_PARTS
        if flags & ~allowed:
            self.fail(f"{kind.name} section with parts {flags & ~allowed:#04x} it may not carry", "part")
        if flags & required != required or (kind is Kind.CONTINUE and not flags):
            self.fail(f"{kind.name} section without a part it must carry", "part")
        out: dict[str, object] = {}
        if flags & F_SUMMARY:
            out["count"], out["strong"] = self.varint(), self.take(STRONG_LEN)
        if kind is Kind.INITIATE and bool(flags & F_TIP) != bool(out["count"]):
            self.fail("an INITIATE section carries its tip when, and only when, its count is not 0", "part")
        if flags & F_TIP:
            wall = self.varint()
            out["tip"] = (wall, self.take(DIGEST_LEN))
        if flags & F_PROBES:
            out["probes"] = self.probes()
        if flags & F_RANGES:
            out["ranges"] = self.ranges()
        if flags & F_WANTS:
            out["wants"] = self.wants()
        if flags & F_RECORDS:
            n = self.count(self.limits.max_records, "records", least=1)
            out["records"] = tuple(self.take(self.count(self.limits.max_message, "record bytes"))
                                   for _ in range(n))
            if any(not rec for rec in out["records"]):  # type: ignore[attr-defined]
                self.fail("empty record")
        if flags & F_GONE:
            n = self.count(self.limits.max_hashes, "gone digests", least=1)
            blob = self.take(n * DIGEST_LEN)
            out["gone"] = tuple(blob[i : i + DIGEST_LEN] for i in range(0, len(blob), DIGEST_LEN))
        if flags & F_REPORT:
            n = self.count(self.limits.max_records + 1, "report entries", least=1)  # + the base's
            out["report"] = tuple(self.entry() for _ in range(n))
        if flags & F_BASE:
            parts = [self.take(self.count(self.limits.max_message, "base bytes", least=1)) for _ in range(3)]
            out["base"] = Base(*parts)
        if flags & F_STATEMENT:
            out["statement"] = self.statement()
        if flags & F_GOSSIP:
            n = self.count(MAX_GOSSIP, "gossiped statements", least=1)
            out["gossip"] = tuple(self.statement() for _ in range(n))
        self.artifact_parts(flags, out)
        return Section(conv, **out)  # type: ignore[arg-type]

    def artifact_parts(self, flags: int, out: dict[str, object]) -> None:
        if flags & F_NEEDS:
            n = self.count(MAX_NEEDS, "needed CIDs", least=1)
            needs = tuple(self.block_cid() for _ in range(n))
            if any(a >= b for a, b in pairwise(needs)):
                self.fail("needed CIDs must be sorted and distinct")
            out["needs"] = needs
        if flags & F_BLOCKS:
            n = self.count(self.limits.max_records, "blocks", least=1)
            out["blocks"] = tuple((self.block_cid(), self.take(self.count(MAX_BLOCK, "block bytes")))
                                  for _ in range(n))

    def block_cid(self) -> CID:
        codec = self.byte()
        if codec not in BLOCK_CODECS:
            self.fail(f"block codec {codec:#x} is neither raw (0x55) nor dag-cbor (0x71)")
        return CID(bytes((1, codec, 0x12, 0x20)) + self.take(DIGEST_LEN))  # prefix: `CID` checks it

    def statement(self) -> bytes:
        # only its size here: a statement is checked (decoded, verified) by whoever uses it
        return self.take(self.count(MAX_STATEMENT_BYTES, "statement bytes", least=1))

    def probes(self) -> tuple[tuple[Bound, bytes], ...]:
        n = self.count(64, "probes", least=1)
        prev, found = [0], list[tuple[Bound, bytes]]()
        for _ in range(n):
            b, _ = self.bound(prev)
            if b.infinite or (found and b <= found[-1][0]):
                self.fail("probes must be finite and increasing")
            found.append((b, self.take(RANGE_LEN)))
        return tuple(found)

    def ranges(self) -> tuple[Range, ...]:
        n = self.count(self.limits.max_ranges, "ranges", least=1)
        prev, found = [0], list[Range]()
        for i in range(n):
            upper, mode = self.bound(prev, moded=True)
            if found and upper <= found[-1].upper:
                self.fail("range bounds must increase")
            if upper.infinite != (i == n - 1):
                self.fail("only the last range may, and it must, end at infinity")
            if mode == Mode.SKIP:
                found.append(Range(upper, Mode.SKIP))
            elif mode == Mode.FINGERPRINT:
                found.append(Range(upper, Mode.FINGERPRINT, fp=self.take(RANGE_LEN)))
            elif mode == Mode.IDS:
                found.append(Range(upper, Mode.IDS, hashes=self.hash_list(self.limits.max_hashes)))
            else:
                self.fail(f"unknown range mode {mode}")
        return tuple(found)

    def wants(self) -> tuple[Want, ...]:
        n = self.count(self.limits.max_ranges, "wants", least=1)
        prev, found = [0], list[Want]()
        for _ in range(n):
            (lower, _), (upper, _) = self.bound(prev), self.bound(prev)
            if lower.infinite or upper <= lower or (found and lower < found[-1].upper):
                self.fail("wants must be non-empty, sorted and disjoint")
            found.append(Want(lower, upper, self.hash_list(self.limits.max_hashes)))
        return tuple(found)

    def entry(self) -> Reported:
        raw = self.byte()
        if raw not in Fate._value2member_map_:
            self.fail(f"unknown fate {raw} in a report")
        fate = Fate(raw)
        if fate is Fate.REJECTED_AT:
            index, digest = self.varint(), b""
        else:
            index, digest = 0, self.take(DIGEST_LEN)
        if fate in (Fate.REJECTED, Fate.REJECTED_AT):
            try:
                rule = self.take(self.count(64, "rule bytes", least=1)).decode()
            except UnicodeDecodeError:
                self.fail("rule name is not UTF-8")
            return Reported(fate, digest, index, rule=rule)
        if fate is Fate.QUARANTINED:
            k = self.count(MAX_PARENTS, "parents", least=1)
            blob = self.take(k * DIGEST_LEN)
            parents = tuple(blob[i : i + DIGEST_LEN] for i in range(0, len(blob), DIGEST_LEN))
            return Reported(fate, digest, parents=parents)
        if fate is Fate.HELD:
            return Reported(fate, digest, retry_ms=self.varint())
        return Reported(fate, digest)
