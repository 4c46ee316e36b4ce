"""A sync message's one binary form (the grammar is `docs/sync.md`, "Message grammar").

Invariant: `decode(encode(m)) == m` (`sync.decoder`): each part is written only when the
section carries it, and its flag says so.
"""

from __future__ import annotations

from convgraph.core.cid import CID
from convgraph.sync.keyset import Bound
from convgraph.sync.messages import (
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
    VERSIONS,
    Fate,
    Message,
    Mode,
    Reported,
    Section,
)
from convgraph.sync.varint import uvarint


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
        (F_SUMMARY if s.count is not None else 0) | (F_TIP if s.tip is not None else 0)
        | (F_PROBES if s.probes else 0) | (F_RANGES if s.ranges is not None else 0)
        | (F_WANTS if s.wants else 0) | (F_RECORDS if s.records else 0)
        | (F_GONE if s.gone else 0) | (F_REPORT if s.report is not None else 0)
        | (F_BASE if s.base is not None else 0) | (F_STATEMENT if s.statement is not None else 0)
        | (F_GOSSIP if s.gossip else 0) | (F_NEEDS if s.needs else 0) | (F_BLOCKS if s.blocks else 0)
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
