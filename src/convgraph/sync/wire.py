"""Sync messages as values, and their one binary form (the grammar is `docs/sync.md`).

Decoding is strict: a version byte first, minimal varints, every length and count within
`WireLimits`, bounds strictly increasing where the grammar says so, no trailing bytes.
Each message kind carries only the parts the grammar allows it. Anything else raises
`ProtocolError`, with a `reason` the spec lists, before any of the message is acted on. Invariant:
`decode(encode(m)) == m` and `encode(decode(b)) == b` for every `b` that decodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import pairwise
from typing import Final, NoReturn

from convgraph.artifacts.blocks import CHUNK_SIZE
from convgraph.core.cid import CID
from convgraph.errors import ProtocolError
from convgraph.integrity.statement import MAX_STATEMENT_BYTES
from convgraph.sync.keyset import (
    DIGEST_LEN,
    HASH_LEN,
    INFINITE_MS,
    INFINITY,
    RANGE_LEN,
    STRONG_LEN,
    Bound,
    Key,
)
from convgraph.sync.varint import uvarint

VERSION: Final = 4  # 2: the report names every pushed record's fate; 3: signed statements, gossip;
# 4: artifact blocks (`needs`, `blocks`). A version-3 message is still read and answered in
# version 3, without those parts, so an older initiator keeps syncing records
VERSIONS: Final = frozenset({3, 4})
SALT_LEN: Final = 8
MAX_GOSSIP: Final = 16  # statements by other keys in one section (docs/integrity.md §5)
MAX_NEEDS: Final = 1 << 16  # artifact CIDs named by one `needs` part
MAX_BLOCK: Final = CHUNK_SIZE  # a block's bytes: one chunk; a manifest is smaller (docs/format.md §17)
_BLOCK_CODECS: Final = (0x55, 0x71)  # raw leaves and dag-cbor manifests, sha2-256 both


class Kind(IntEnum):
    INITIATE = 1  # the first message of a session: summaries, tips, probes
    REPLY = 2  # the responder's answer to any message
    CONTINUE = 3  # the initiator's later messages


class Mode(IntEnum):
    SKIP = 0  # nothing to do in this range
    FINGERPRINT = 1  # compare your fingerprint of this range with mine
    IDS = 2  # my whole set here: send what I lack, ask for what you lack


@dataclass(frozen=True)
class WireLimits:
    """What a receiver accepts; a peer that exceeds any of them is refused, not trusted."""

    max_message: int = 16 << 20
    max_sections: int = 1024
    max_ranges: int = 1 << 16  # per section
    max_hashes: int = 1 << 20  # per message, in id lists and wants together
    max_records: int = 1 << 16  # per message
    max_name: int = 256


DEFAULT_LIMITS: Final = WireLimits()


@dataclass(frozen=True)
class Range:
    """One piece of a section's cover: from the previous range's upper bound to `upper`."""

    upper: Bound
    mode: Mode
    fp: bytes = b""  # FINGERPRINT
    hashes: tuple[bytes, ...] = ()  # IDS, in key order


@dataclass(frozen=True)
class Want:
    """Item hashes I lack that you listed for `[lower, upper)`: send me those records."""

    lower: Bound
    upper: Bound
    hashes: tuple[bytes, ...]


class Fate(IntEnum):
    """What the receiver did with one pushed record (or one it released because of them)."""

    ACCEPTED = 1  # stored
    RELEASED = 2  # stored now, because a parent (or the clock) it waited for arrived
    DUPLICATE = 3  # already stored or already waiting
    QUARANTINED = 4  # waiting for the parents named in `parents`
    HELD = 5  # its clock is ahead of the receiver's: offer it again from `retry_ms`
    REJECTED = 6  # invalid for good: never offer it again
    REJECTED_AT = 7  # invalid for good, named by `index`: bytes over the record size limit
    EVICTED = 8  # it waited, but the full quarantine dropped it: it may be offered again


@dataclass(frozen=True)
class Reported:
    """One line of a report: a record's digest (or its index in the pushed list) and fate."""

    fate: Fate
    digest: bytes = b""  # sha256 of the record's bytes; empty for REJECTED_AT
    index: int = 0  # REJECTED_AT: the record's place in the message's `records` part
    rule: str = ""  # REJECTED and REJECTED_AT: a rule from the spec's closed list
    parents: tuple[bytes, ...] = ()  # QUARANTINED: digests of the parents it waits for
    retry_ms: int = 0  # HELD: the receiver's wall-clock time from which it can take it


@dataclass(frozen=True)
class Base:
    """A compacted conversation's base: its latest checkpoint record, the snapshot that
    checkpoint names and its cover (`docs/format.md` 11.5), for a peer to adopt."""

    checkpoint: bytes
    snapshot: bytes
    cover: bytes

    def size(self) -> int:
        return len(self.checkpoint) + len(self.snapshot) + len(self.cover)


@dataclass(frozen=True)
class Section:
    """Everything one message says about one conversation."""

    conv: str
    count: int | None = None  # with `strong`: the sender's whole set, after this message's records
    strong: bytes = b""
    tip: Key | None = None  # the sender's newest key (INITIATE only)
    probes: tuple[tuple[Bound, bytes], ...] = ()  # (bound, fingerprint of all keys below it)
    ranges: tuple[Range, ...] | None = None  # None: no reconciliation step in this message
    wants: tuple[Want, ...] = ()
    records: tuple[bytes, ...] = ()
    gone: tuple[bytes, ...] = ()  # digests asked for that the sender can no longer serve
    report: tuple[Reported, ...] | None = None  # REPLY: the fate of the records it answers
    base: Base | None = None  # sent instead of `gone` for records the sender holds as headers
    # REPLY: the responder's signed statement of this conversation after this message
    # (docs/integrity.md §2), a receipt when the report names records stored; bytes as signed
    statement: bytes | None = None
    gossip: tuple[bytes, ...] = ()  # statements by other keys about this conversation (§5)
    # version 4: artifact CIDs the sender lacks in this conversation's scope, in CID order
    needs: tuple[CID, ...] = ()
    blocks: tuple[tuple[CID, bytes], ...] = ()  # version 4: artifact blocks, (CID, bytes)


@dataclass(frozen=True)
class Message:
    kind: Kind
    salt: bytes
    sections: tuple[Section, ...] = field(default=())
    version: int = VERSION  # 3 only to answer an older initiator in its own version


(_F_SUMMARY, _F_TIP, _F_PROBES, _F_RANGES, _F_WANTS, _F_RECORDS, _F_GONE, _F_REPORT, _F_BASE,
 _F_STATEMENT, _F_GOSSIP, _F_NEEDS, _F_BLOCKS) = (1 << i for i in range(13))
_ALL: Final = (1 << 13) - 1
_STEP = _F_RANGES | _F_WANTS | _F_RECORDS
_ARTIFACTS: Final = _F_NEEDS | _F_BLOCKS  # version 4 only
# (parts a section of this kind may carry, parts it must carry); `docs/sync.md`, *Parts*
_PARTS: Final = {
    Kind.INITIATE: (_F_SUMMARY | _F_TIP | _F_PROBES | _F_GOSSIP, _F_SUMMARY),
    Kind.REPLY: (_ALL & ~_F_PROBES, _F_SUMMARY | _F_STATEMENT),
    Kind.CONTINUE: (_STEP | _F_BASE | _ARTIFACTS, 0),
}
MAX_PARENTS: Final = 1024  # parents named by one QUARANTINED entry (a record's own bound)


def encode(message: Message) -> bytes:
    """The message's bytes (`docs/sync.md`)."""
    if message.version not in VERSIONS:
        raise ValueError(f"no sync protocol version {message.version}")
    if message.version < 4 and any(s.needs or s.blocks for s in message.sections):
        raise ValueError("artifact parts need version 4")
    out = bytearray((message.version, message.kind))
    out += message.salt
    out += uvarint(len(message.sections))
    for s in message.sections:
        _section(out, s)
    return bytes(out)


def _section(out: bytearray, s: Section) -> None:
    flags = (
        (_F_SUMMARY if s.count is not None else 0) | (_F_TIP if s.tip is not None else 0)
        | (_F_PROBES if s.probes else 0) | (_F_RANGES if s.ranges is not None else 0)
        | (_F_WANTS if s.wants else 0) | (_F_RECORDS if s.records else 0)
        | (_F_GONE if s.gone else 0) | (_F_REPORT if s.report is not None else 0)
        | (_F_BASE if s.base is not None else 0) | (_F_STATEMENT if s.statement is not None else 0)
        | (_F_GOSSIP if s.gossip else 0) | (_F_NEEDS if s.needs else 0) | (_F_BLOCKS if s.blocks else 0)
    )
    name = s.conv.encode()
    if not name:
        raise ValueError("a section names its conversation: conv is str(1..256)")
    out += uvarint(len(name)) + name
    out += uvarint(flags)  # a varint: one byte, as it always was, until a part past the eighth is set
    if s.count is not None:
        out += uvarint(s.count) + s.strong
    if s.tip is not None:
        out += uvarint(s.tip[0]) + s.tip[1]
    if s.probes:
        out += uvarint(len(s.probes))
        prev = [0]
        for bound, fp in s.probes:
            _bound(out, bound, prev)
            out += fp
    if s.ranges is not None:
        out += uvarint(len(s.ranges))
        prev = [0]
        for r in s.ranges:
            _bound(out, r.upper, prev, r.mode)
            if r.mode is Mode.FINGERPRINT:
                out += r.fp
            elif r.mode is Mode.IDS:
                out += uvarint(len(r.hashes)) + b"".join(r.hashes)
    if s.wants:
        out += uvarint(len(s.wants))
        prev = [0]
        for w in s.wants:
            _bound(out, w.lower, prev)
            _bound(out, w.upper, prev)
            out += uvarint(len(w.hashes)) + b"".join(w.hashes)
    if s.records:
        out += uvarint(len(s.records))
        for data in s.records:
            out += uvarint(len(data)) + data
    if s.gone:
        out += uvarint(len(s.gone)) + b"".join(s.gone)
    if s.report is not None:
        out += uvarint(len(s.report))
        for e in s.report:
            _entry(out, e)
    if s.base is not None:
        for part in (s.base.checkpoint, s.base.snapshot, s.base.cover):
            out += uvarint(len(part)) + part
    if s.statement is not None:
        out += uvarint(len(s.statement)) + s.statement
    if s.gossip:
        out += uvarint(len(s.gossip))
        for part in s.gossip:
            out += uvarint(len(part)) + part
    if s.needs:
        out += uvarint(len(s.needs))
        for cid in s.needs:
            out += _block_cid(cid)
    if s.blocks:
        out += uvarint(len(s.blocks))
        for cid, data in s.blocks:
            out += _block_cid(cid) + uvarint(len(data)) + data


def _block_cid(cid: CID) -> bytes:
    """A block's CID on the wire: its codec byte and sha2-256 digest (every `CID` is CIDv1)."""
    return bytes((cid.codec,)) + cid.digest


def _entry(out: bytearray, e: Reported) -> None:
    out.append(e.fate)
    out += uvarint(e.index) if e.fate is Fate.REJECTED_AT else e.digest
    if e.fate in (Fate.REJECTED, Fate.REJECTED_AT):
        rule = e.rule.encode()
        out += uvarint(len(rule)) + rule
    elif e.fate is Fate.QUARANTINED:
        out += uvarint(len(e.parents)) + b"".join(e.parents)
    elif e.fate is Fate.HELD:
        out += uvarint(e.retry_ms)


def _bound(out: bytearray, b: Bound, prev: list[int], mode: int = 0) -> None:
    # walls are delta-coded against the list's previous bound, so most take a byte or two;
    # a range's mode shares a byte with the prefix length (at most 32: six bits)
    if b.infinite:
        out += bytes((0, mode << 6))
        return
    out += uvarint(b.wall_ms - prev[0] + 1)
    prev[0] = b.wall_ms
    out.append(mode << 6 | len(b.prefix))
    out += b.prefix


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
        allowed, required = _PARTS[kind]
        if version < 4:
            allowed &= ~_ARTIFACTS
        if flags & ~allowed:
            self.fail(f"{kind.name} section with parts {flags & ~allowed:#04x} it may not carry", "part")
        if flags & required != required or (kind is Kind.CONTINUE and not flags):
            self.fail(f"{kind.name} section without a part it must carry", "part")
        out: dict[str, object] = {}
        if flags & _F_SUMMARY:
            out["count"], out["strong"] = self.varint(), self.take(STRONG_LEN)
        if kind is Kind.INITIATE and bool(flags & _F_TIP) != bool(out["count"]):
            self.fail("an INITIATE section carries its tip when, and only when, its count is not 0", "part")
        if flags & _F_TIP:
            wall = self.varint()
            out["tip"] = (wall, self.take(DIGEST_LEN))
        if flags & _F_PROBES:
            out["probes"] = self.probes()
        if flags & _F_RANGES:
            out["ranges"] = self.ranges()
        if flags & _F_WANTS:
            out["wants"] = self.wants()
        if flags & _F_RECORDS:
            n = self.count(self.limits.max_records, "records", least=1)
            out["records"] = tuple(self.take(self.count(self.limits.max_message, "record bytes"))
                                   for _ in range(n))
            if any(not rec for rec in out["records"]):  # type: ignore[attr-defined]
                self.fail("empty record")
        if flags & _F_GONE:
            n = self.count(self.limits.max_hashes, "gone digests", least=1)
            blob = self.take(n * DIGEST_LEN)
            out["gone"] = tuple(blob[i : i + DIGEST_LEN] for i in range(0, len(blob), DIGEST_LEN))
        if flags & _F_REPORT:
            n = self.count(self.limits.max_records + 1, "report entries", least=1)  # + the base's
            out["report"] = tuple(self.entry() for _ in range(n))
        if flags & _F_BASE:
            parts = [self.take(self.count(self.limits.max_message, "base bytes", least=1)) for _ in range(3)]
            out["base"] = Base(*parts)
        if flags & _F_STATEMENT:
            out["statement"] = self.statement()
        if flags & _F_GOSSIP:
            n = self.count(MAX_GOSSIP, "gossiped statements", least=1)
            out["gossip"] = tuple(self.statement() for _ in range(n))
        self.artifact_parts(flags, out)
        return Section(conv, **out)  # type: ignore[arg-type]

    def artifact_parts(self, flags: int, out: dict[str, object]) -> None:
        if flags & _F_NEEDS:
            n = self.count(MAX_NEEDS, "needed CIDs", least=1)
            needs = tuple(self.block_cid() for _ in range(n))
            if any(a >= b for a, b in pairwise(needs)):
                self.fail("needed CIDs must be sorted and distinct")
            out["needs"] = needs
        if flags & _F_BLOCKS:
            n = self.count(self.limits.max_records, "blocks", least=1)
            out["blocks"] = tuple((self.block_cid(), self.take(self.count(MAX_BLOCK, "block bytes")))
                                  for _ in range(n))

    def block_cid(self) -> CID:
        codec = self.byte()
        if codec not in _BLOCK_CODECS:
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
