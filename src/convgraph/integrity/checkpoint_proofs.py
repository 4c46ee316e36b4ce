"""What a `divergent_fork` or `unverifiable_checkpoint` bundle proves (docs/integrity.md §7.5).

Pure: the bundle's records arrive decoded and verified (`evidence.verify_bundle` step 2),
and each check of §7.2 or the extension walk of §7.1 runs over them alone. Invariant: a
claim is proven only when the same `checkpoints.check` / `checkpoints.divergent` a replica
runs over its store gives the claimed answer over the bundle's records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import fingerprint
from convgraph.core.record import Record
from convgraph.errors import NoteError
from convgraph.integrity import cosignature as cosignature_
from convgraph.integrity.checkpoints import CHECKS, Checkpoint, Fetch, Status, check, divergent
from convgraph.integrity.consistency import Lookup, Verdict, region
from convgraph.integrity.findings import DIVERGENT_FORK


class Unproven(Exception):  # noqa: N818 - a verdict, not a failure: the bundle says too little
    """The claim is not proven by the bundle, and why."""


def record_lookup(records: Mapping[CID, Record]) -> Lookup:
    """(hlc, parents) of the records at hand; None for any other."""

    def lookup(cid: CID) -> tuple[Hlc, tuple[CID, ...]] | None:
        r = records.get(cid)
        return None if r is None else (r.hlc, r.parents)

    return lookup


def prove(kind: str, claim: Mapping[str, Any], records: Mapping[CID, Record],
          cosignatures: Sequence[Any]) -> str:
    """The reason the claim of a §7 `kind` holds over `records`; `Unproven` when it does not."""
    if kind == DIVERGENT_FORK:
        return _prove_fork(claim["a"], claim["b"], records, cosignatures)
    return _prove_false(claim["checkpoint"], claim["check"], records)


def _checkpoint(cid: CID, records: Mapping[CID, Record]) -> Checkpoint:
    record = records.get(cid)
    if record is None:
        raise Unproven(f"the claim names {cid}, which is not among the bundle's records")
    if record.kind != "checkpoint":
        raise Unproven(f"record {cid} is a {record.kind}, not a checkpoint")
    return Checkpoint.of(record)


def _prove_false(cid: CID, which: str, records: Mapping[CID, Record]) -> str:
    cp = _checkpoint(cid, records)

    def fetch(c: CID) -> bytes | None:
        r = records.get(c)
        return None if r is None else r.data

    result = check_named(cp, which, record_lookup(records), fetch)
    if result is None:
        raise Unproven(f"check {which} of checkpoint {cid} holds over the bundle's records")
    return f"checkpoint {cid} by {fingerprint(cp.actor)} fails check {which}: {result}"


def check_named(cp: Checkpoint, which: str, lookup: Lookup, fetch: Fetch) -> str | None:
    """Why `cp` fails the check `which` of §7.2, the first of the three to fail, or None when
    it does not; `Unproven` when a record of its causal past is missing, so none can run."""
    if which not in CHECKS:
        raise Unproven(f"{which!r} is not one of the checks {list(CHECKS)}")
    result = check(cp, lookup, fetch)
    if result.status is Status.UNVERIFIED:
        raise Unproven(f"{len(result.missing)} records of the causal past of checkpoint {cp.cid} "
                       "are not in the bundle")
    return result.detail if result.status is Status.FALSE and result.check == which else None


def _prove_fork(a_cid: CID, b_cid: CID, records: Mapping[CID, Record], cosignatures: Sequence[Any]) -> str:
    if a_cid == b_cid:
        raise Unproven("a divergent fork names two different checkpoints")
    a, b = _checkpoint(a_cid, records), _checkpoint(b_cid, records)
    signers = _cosigners(records, cosignatures)
    if a.actor == b.actor:
        who = f"author {fingerprint(a.actor)}"
    else:
        both = signers.get(a_cid, set()) & signers.get(b_cid, set())
        if not both:
            raise Unproven("the two checkpoints have neither one author nor one witness that cosigned both")
        who = f"witness {fingerprint(min(both))}"
    if divergent(a, b, record_lookup(records)) is not Verdict.YES:
        raise Unproven("one of the two checkpoints is not shown not to extend the other (§7.1)")
    return f"{who} signed checkpoints {a_cid} and {b_cid}, neither of which extends the other"


def _cosigners(records: Mapping[CID, Record], cosignatures: Sequence[Any]) -> dict[CID, set[bytes]]:
    """Every listed cosignature, each verified against its checkpoint: the witness keys per checkpoint."""
    out: dict[CID, set[bytes]] = {}
    for i, m in enumerate(cosignatures):
        try:
            c = cosignature_.cosignature_of_map(m)
        except NoteError as exc:
            raise Unproven(f"cosignature {i} is malformed: {exc}") from exc
        record = records.get(c.checkpoint)
        if record is None or not cosignature_.verify(c, record):
            raise Unproven(f"cosignature {i} does not verify against checkpoint {c.checkpoint} in the bundle")
        out.setdefault(c.checkpoint, set()).add(c.key)
    return out


def fork_region(a: Checkpoint, b: Checkpoint, lookup: Lookup) -> set[CID]:
    """The records whose (hlc, parents) decide that neither of `a`, `b` extends the other."""
    return region(a.heads, b.heads, lookup) | region(b.heads, a.heads, lookup) | {a.cid, b.cid}
