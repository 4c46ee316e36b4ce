"""Sync messages as values: the kinds, the parts a section carries, and the limits a receiver keeps.

The grammar is `docs/sync.md` ("Message grammar"); `sync.encoder` writes these values and
`sync.decoder` reads them back. Invariant: every value here is frozen, so a message decoded once
is the message every later step sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

from convgraph.artifacts.blocks import CHUNK_SIZE
from convgraph.core.cid import CID
from convgraph.sync.keyset import Bound, Key

VERSION: Final = 4  # 2: the report names every pushed record's fate; 3: signed statements, gossip;
# 4: artifact blocks (`needs`, `blocks`). A version-3 message is still read and answered in
# version 3, without those parts, so an older initiator keeps syncing records
VERSIONS: Final = frozenset({3, 4})
SALT_LEN: Final = 8
MAX_GOSSIP: Final = 16  # statements by other keys in one section (docs/integrity.md §5)
MAX_NEEDS: Final = 1 << 16  # artifact CIDs named by one `needs` part
MAX_BLOCK: Final = CHUNK_SIZE  # a block's bytes: one chunk; a manifest is smaller (docs/format.md §17)
BLOCK_CODECS: Final = (0x55, 0x71)  # raw leaves and dag-cbor manifests, sha2-256 both
MAX_PARENTS: Final = 1024  # parents named by one QUARANTINED entry (a record's own bound)


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


# the parts of a section: one bit each in its flags, in the order they are written
(F_SUMMARY, F_TIP, F_PROBES, F_RANGES, F_WANTS, F_RECORDS, F_GONE, F_REPORT, F_BASE,
 F_STATEMENT, F_GOSSIP, F_NEEDS, F_BLOCKS) = (1 << i for i in range(13))
ALL_PARTS: Final = (1 << 13) - 1
STEP_PARTS = F_RANGES | F_WANTS | F_RECORDS
ARTIFACT_PARTS: Final = F_NEEDS | F_BLOCKS  # version 4 only
# (parts a section of this kind may carry, parts it must carry); `docs/sync.md`, *Parts*
PARTS: Final = {
    Kind.INITIATE: (F_SUMMARY | F_TIP | F_PROBES | F_GOSSIP, F_SUMMARY),
    Kind.REPLY: (ALL_PARTS & ~F_PROBES, F_SUMMARY | F_STATEMENT),
    Kind.CONTINUE: (STEP_PARTS | F_BASE | ARTIFACT_PARTS, 0),
}
