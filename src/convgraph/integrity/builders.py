"""Building findings: what a replica calls when its checks find a lie (docs/integrity.md §6.3,
*Building*). Invariant: every `Finding` returned here carries a bundle for which
`evidence.verify_bundle(bundle).ok` is True; when the records at hand cannot prove the
claim, the builder returns None and the check stays pending.
"""

from __future__ import annotations

from collections.abc import Sequence

from convgraph.artifacts import claims
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import decode_record
from convgraph.errors import ConvgraphError, EvidenceError, IntegrityError
from convgraph.integrity import checkpoint_proofs
from convgraph.integrity.checkpoints import Checkpoint, Status, causal_past, check, divergent
from convgraph.integrity.consistency import (
    Lookup,
    Verdict,
    covered_each,
    region,
)
from convgraph.integrity.cosignature import Cosignature
from convgraph.integrity.evidence import Fetch, decode_bundle, encode_bundle, verify_bundle
from convgraph.integrity.findings import (
    ARTIFACT_KINDS,
    DIVERGENT_FORK,
    RECORD_EQUIVOCATION,
    ROLLBACK,
    SERVER_EQUIVOCATION,
    STATEMENT_KINDS,
    UNVERIFIABLE_CHECKPOINT,
    WITHHOLDING,
    Finding,
)
from convgraph.integrity.statement import Statement


def _fetch_lookup(conv: str, fetch: Fetch) -> tuple[Lookup, dict[CID, bytes]]:
    # decode_record verifies each fetched record in full: the builder stands on exactly
    # what the verifier will accept, and one bad stored record cannot make a false finding
    seen: dict[CID, tuple[Hlc, tuple[CID, ...]] | None] = {}
    raw: dict[CID, bytes] = {}

    def lookup(cid: CID) -> tuple[Hlc, tuple[CID, ...]] | None:
        if cid not in seen:
            seen[cid] = None
            data = fetch(cid)
            if data is not None:
                try:
                    record = decode_record(data, expected_cid=cid)
                except ConvgraphError:
                    return None
                if record.conv == conv:
                    raw[cid] = data
                    seen[cid] = (record.hlc, record.parents)
        return seen[cid]

    return lookup, raw


def _not_covered(earlier: Statement, later: Statement, lookup: Lookup, *, stored_only: bool) -> list[CID]:
    candidates = set(earlier.stored) if stored_only else set(earlier.heads) | set(earlier.stored)
    return [x for x, v in covered_each(candidates, later.heads, lookup).items() if v is Verdict.NO]


def _witness_region(
    earlier: Statement, later: Statement, lookup: Lookup, *, stored_only: bool
) -> set[CID] | None:
    """The records that show `later` not extending `earlier`, or None if nothing shows it."""
    if not stored_only and later.count < earlier.count:
        return set()
    gone = _not_covered(earlier, later, lookup, stored_only=stored_only)
    if not gone:
        return None
    # the walk for the newest target is the shortest: its region is within every other's
    best = max(gone, key=lambda x: (_hlc(x, lookup), bytes(x)))
    return region(later.heads, {best}, lookup)


def _hlc(cid: CID, lookup: Lookup) -> Hlc:
    meta = lookup(cid)
    if meta is None:
        raise IntegrityError(f"record {cid} was decided not covered but is not held", cid=cid)
    return meta[0]


def statements_finding(
    kind: str, earlier: Statement, later: Statement, fetch: Fetch, found_ms: int
) -> Finding | None:
    """A finding of a statement kind about `earlier` and `later`, or None if no bundle built
    from the records `fetch` gives proves it. For `withholding`, `earlier is later` (or equal)
    asks for a self-inconsistent receipt."""
    if kind not in STATEMENT_KINDS:
        raise IntegrityError(f"`{kind}` is not a kind about statements")
    if earlier.key != later.key or earlier.conv != later.conv:
        return None
    lookup, raw = _fetch_lookup(earlier.conv, fetch)
    same = earlier == later
    pair = [earlier] if same else [earlier, later]
    if kind == SERVER_EQUIVOCATION:
        pair.sort(key=lambda s: (s.time_ms, s.data))
        needed = _equivocation_region(pair[0], pair[-1], lookup) if not same else None
    elif same:
        needed = _witness_region(earlier, earlier, lookup, stored_only=True) if kind == WITHHOLDING else None
    else:
        needed = _witness_region(earlier, later, lookup, stored_only=kind != ROLLBACK)
    if needed is None:
        return None
    claim = {"earlier": 0, "later": len(pair) - 1}
    records = [raw[c] for c in needed if c in raw]
    bundle = encode_bundle(kind, earlier.conv, [s.data for s in pair], records, claim)
    return _finding(bundle, tuple(pair), found_ms)


def _equivocation_region(a: Statement, b: Statement, lookup: Lookup) -> set[CID] | None:
    if b.is_later_than(a):
        return _witness_region(a, b, lookup, stored_only=False)
    forward = _witness_region(a, b, lookup, stored_only=False)
    backward = _witness_region(b, a, lookup, stored_only=False)
    if forward is None or backward is None:
        return None
    return forward | backward


def self_inconsistent_finding(s: Statement, fetch: Fetch, found_ms: int) -> Finding | None:
    """A `withholding` finding for a receipt whose own heads do not cover what it names."""
    return statements_finding(WITHHOLDING, s, s, fetch, found_ms)


def record_equivocation_finding(a: bytes, b: bytes, found_ms: int) -> Finding:
    """The finding for two records by one actor at one seq; `IntegrityError` if they are not."""
    first = decode_record(a)
    bundle = encode_bundle(RECORD_EQUIVOCATION, first.conv, [], [a, b], {})
    finding = _finding(bundle, (), found_ms)
    if finding is None:
        raise IntegrityError(
            f"records {first.cid} and {CID.of_record(b)} are not an equivocation of one actor "
            f"at one seq in one conversation", cid=first.cid,
        )
    return finding


def unverifiable_checkpoint_finding(cid: CID, conv: str, fetch: Fetch, found_ms: int) -> Finding | None:
    """The `unverifiable_checkpoint` finding for checkpoint `cid` of `conv` (§7.5), or None
    unless every record of its causal past is fetched with bytes and a check of §7.2 fails."""
    lookup, raw = _fetch_lookup(conv, fetch)
    cp = _held_checkpoint(cid, lookup, raw)
    if cp is None:
        return None
    result = check(cp, lookup, raw.get)
    if result.status is not Status.FALSE or result.check is None:
        return None
    past = causal_past(cp.heads, lookup).held | {cid}
    claim = {"checkpoint": cid, "check": result.check}
    return _finding(encode_bundle(UNVERIFIABLE_CHECKPOINT, conv, [], [raw[c] for c in past], claim),
                    (), found_ms)


def divergent_fork_finding(
    a: CID, b: CID, conv: str, fetch: Fetch, found_ms: int, *, cosignatures: Sequence[Cosignature] = (),
) -> Finding | None:
    """The `divergent_fork` finding for checkpoints `a` and `b` of `conv` (§7.3), or None unless
    the records `fetch` gives show that neither extends the other. Without `cosignatures` the
    two must share an author; with them, one witness must have cosigned both."""
    lookup, raw = _fetch_lookup(conv, fetch)
    first, second = _held_checkpoint(a, lookup, raw), _held_checkpoint(b, lookup, raw)
    if first is None or second is None or divergent(first, second, lookup) is not Verdict.YES:
        return None
    needed = checkpoint_proofs.fork_region(first, second, lookup)
    pair = sorted((a, b), key=bytes)
    bundle = encode_bundle(DIVERGENT_FORK, conv, [], [raw[c] for c in needed if c in raw],
                           {"a": pair[0], "b": pair[1]},
                           cosignatures=[c.to_map() for c in cosignatures] if cosignatures else None)
    return _finding(bundle, (), found_ms)


def artifact_claim_finding(data: bytes, get_block: claims.GetBlock, found_ms: int) -> Finding | None:
    """The `false_patch` or `false_snapshot` finding for the record `data` (§6.4), or None
    unless the blocks `get_block` gives show its claim false. The bundle carries the record and
    exactly the blocks the failing check read."""
    record = decode_record(data)
    kind = next((k for k, of in ARTIFACT_KINDS.items() if of == record.kind), None)
    answer = claims.check_claim(record, get_block) if kind is not None else None
    if kind is None or answer is None or answer.status is not claims.ClaimStatus.FALSE:
        return None
    claim = {"record": record.cid, "check": answer.check}
    try:
        bundle = encode_bundle(kind, record.conv, [], [data], claim, blocks=answer.blocks)
    except EvidenceError:  # a base over the bundle limit: the lie cannot be shown to others
        return None
    return _finding(bundle, (), found_ms)


def _held_checkpoint(cid: CID, lookup: Lookup, raw: dict[CID, bytes]) -> Checkpoint | None:
    if lookup(cid) is None:
        return None
    record = decode_record(raw[cid], expected_cid=cid)
    return Checkpoint.of(record) if record.kind == "checkpoint" else None


def _finding(bundle: bytes, statements: tuple[Statement, ...], found_ms: int) -> Finding | None:
    proof = verify_bundle(bundle)
    if not proof.ok:
        return None
    parsed = decode_bundle(bundle)
    return Finding(
        id=CID.of_record(bundle), kind=parsed.kind, conv=parsed.conv, bundle=bundle,
        cites=tuple(sorted(CID.of_record(r) for r in parsed.records)), statements=statements,
        summary=f"{parsed.kind}: {proof.reason}", found_ms=found_ms,
    )
