"""Checkpoints as claims to check: chaining, the three checks, divergent forks, the witness rule.

docs/integrity.md §7. Pure: the records a replica holds are reached through a `Lookup`
(hlc and parents, headers count) and a `Fetch` (bytes, None for a header only). Invariants:
an honest author's checkpoints each extend the one before (`extends` is YES), and a witness
that cosigns only when `decide_cosign` says so never cosigns two checkpoints neither of
which extends the other.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import Record
from convgraph.errors import IntegrityError
from convgraph.graph import Closure, closure
from convgraph.integrity.consistency import Lookup, Verdict, covered
from convgraph.projections import state as state_

# the bytes of a held record as stored (verified on ingest), None when held as a header only
Fetch = Callable[[CID], bytes | None]
CHECKS: Final = ("heads", "count", "snapshot")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What a checkpoint record claims: by `actor`, of `conv`, these heads, count and snapshot."""

    cid: CID
    conv: str
    actor: bytes
    hlc: Hlc
    heads: tuple[CID, ...]
    count: int
    snapshot: CID
    previous: CID | None

    @classmethod
    def of(cls, record: Record) -> Checkpoint:
        """The claim of a checkpoint record (valid: its payload was checked on ingest)."""
        if record.kind != "checkpoint":
            raise IntegrityError(f"a {record.kind} record is not a checkpoint", cid=record.cid)
        p = record.payload
        return cls(record.cid, record.conv, record.actor, record.hlc, tuple(sorted(p["heads"])),
                   p["count"], p["snapshot"], p.get("previous"))


def previous_checkpoint(entries: Iterable[state_.Entry], actor: bytes) -> CID | None:
    """The newest (canonical order) checkpoint by `actor` among `entries`: §7.1's `previous`."""
    mine = [e for e in entries if e.kind == "checkpoint" and e.actor == actor]
    return max(mine, key=lambda e: e.order_key).cid if mine else None


def extends(later: Checkpoint, earlier: Checkpoint, lookup: Lookup) -> Verdict:
    """§7.1: `later.count ≥ earlier.count` and every head of `earlier` covered by `later`'s heads."""
    if later.conv != earlier.conv or later.count < earlier.count:
        return Verdict.NO
    verdicts = {covered(h, later.heads, lookup) for h in earlier.heads}
    if Verdict.NO in verdicts:
        return Verdict.NO
    return Verdict.UNDECIDED if Verdict.UNDECIDED in verdicts else Verdict.YES


def divergent(a: Checkpoint, b: Checkpoint, lookup: Lookup) -> Verdict:
    """§7.3: YES when neither of two checkpoints of one conversation extends the other.

    The caller says why the pair must be a chain: one author, or one witness cosigned both.
    """
    if a.conv != b.conv:
        return Verdict.NO
    ab, ba = extends(a, b, lookup), extends(b, a, lookup)
    if Verdict.YES in (ab, ba):
        return Verdict.NO
    return Verdict.YES if ab is ba is Verdict.NO else Verdict.UNDECIDED


class Status(enum.Enum):
    """How far §7.2 could check a checkpoint, and whether it held."""

    VERIFIED = "verified"
    PARTLY_VERIFIED = "partly_verified"
    UNVERIFIED = "unverified"
    FALSE = "false"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The status; for FALSE the failed check (`heads`, `count`, `snapshot`); for UNVERIFIED
    the records of the causal past that are not held (as far as the walk reached)."""

    status: Status
    check: str | None = None
    detail: str = ""
    missing: frozenset[CID] = frozenset()


def causal_past(heads: Iterable[CID], lookup: Lookup) -> Closure:
    """§7.2's causal past of `heads` over the records held: `graph.closure` read through a `Lookup`."""

    def parents_of(cid: CID) -> tuple[CID, ...] | None:
        meta = lookup(cid)
        return None if meta is None else meta[1]

    return closure(heads, parents_of)


def check(cp: Checkpoint, lookup: Lookup, fetch: Fetch) -> CheckResult:
    """§7.2, in order: heads maximal, count = |causal past|, snapshot CID of their fold."""
    past = causal_past(cp.heads, lookup)
    if past.missing:
        detail = f"{len(past.missing)} records of its causal past are not held"
        return CheckResult(Status.UNVERIFIED, detail=detail, missing=past.missing)
    inner = sorted(set(cp.heads) & past.parents)
    if inner:
        return CheckResult(Status.FALSE, "heads", f"head {inner[0]} is an ancestor of another head")
    if len(past.held) != cp.count:
        return CheckResult(Status.FALSE, "count",
                           f"its heads cover {len(past.held)} records, it claims {cp.count}")
    folded = state_.ConvState()
    for cid in sorted(past.held):
        data = fetch(cid)
        if data is None:
            return CheckResult(Status.PARTLY_VERIFIED, detail=f"record {cid} is held as a header only")
        state_.apply(folded, state_.entry_from_bytes(cid, data))
    got = state_.snapshot_cid(state_.snapshot(folded))
    if got != cp.snapshot:
        return CheckResult(Status.FALSE, "snapshot", f"the fold of its records is snapshot {got}")
    return CheckResult(Status.VERIFIED)


class Refusal(enum.Enum):
    """Why a witness refuses to cosign (§7.4), in the order it checks."""

    UNKNOWN_CHECKPOINT = "unknown_checkpoint"
    UNVERIFIED = "unverified"
    FALSE_CHECKPOINT = "false_checkpoint"
    NOT_EXTENDING = "not_extending"


@dataclass(frozen=True, slots=True)
class Decision:
    """A witness's answer: cosign (`refusal` None) or the reason not to, with a human line."""

    refusal: Refusal | None
    detail: str = ""

    @property
    def cosign(self) -> bool:
        """True when the witness may cosign."""
        return self.refusal is None


def decide_cosign(
    candidate: Checkpoint | None, last: Checkpoint | None, lookup: Lookup, fetch: Fetch
) -> Decision:
    """§7.4: cosign `candidate` only if held, checked (verified or partly) and extending `last`,
    the checkpoint of its conversation this witness cosigned last (None: none yet). A
    checkpoint extends itself, so the last one may be cosigned again."""
    if candidate is None:
        return Decision(Refusal.UNKNOWN_CHECKPOINT, "the witness does not hold the checkpoint")
    if last is not None and last.conv != candidate.conv:
        raise IntegrityError("the last cosigned checkpoint is of another conversation", cid=last.cid)
    result = check(candidate, lookup, fetch)
    if result.status is Status.UNVERIFIED:
        return Decision(Refusal.UNVERIFIED, result.detail + ": sync the records first")
    if result.status is Status.FALSE:
        return Decision(Refusal.FALSE_CHECKPOINT, f"check {result.check} fails: {result.detail}")
    if last is None:
        return Decision(None)
    verdict = extends(candidate, last, lookup)
    if verdict is Verdict.NO:
        return Decision(Refusal.NOT_EXTENDING, f"it does not extend {last.cid}, cosigned before")
    if verdict is Verdict.UNDECIDED:
        # never cosign on a guess: only the records of `last` can be missing, and syncing brings them
        return Decision(Refusal.UNVERIFIED, f"whether it extends {last.cid} is undecided: sync first")
    return Decision(None)
