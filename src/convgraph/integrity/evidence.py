"""Evidence bundles (docs/format.md §16, docs/integrity.md §6): encode, verify, and build findings.

A bundle is one canonical DAG-CBOR map that carries every statement and record its claim
needs, so `verify_bundle` reads nothing but its bytes. Invariant: every `Finding` a builder
here returns carries a bundle for which `verify_bundle(bundle).ok` is True.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import fingerprint
from convgraph.core.record import Record, decode_record
from convgraph.errors import ConvgraphError, EvidenceError, IntegrityError, StatementError
from convgraph.integrity import checkpoint_proofs
from convgraph.integrity.checkpoints import CHECKS, Checkpoint, Status, causal_past, check, divergent
from convgraph.integrity.consistency import (
    Lookup,
    Verdict,
    covered,
    extends,
    inconsistent,
    missing,
    region,
    self_inconsistent,
)
from convgraph.integrity.cosignature import Cosignature
from convgraph.integrity.findings import (
    DIVERGENT_FORK,
    FINDING_KINDS,
    RECORD_EQUIVOCATION,
    ROLLBACK,
    SERVER_EQUIVOCATION,
    STATEMENT_KINDS,
    UNVERIFIABLE_CHECKPOINT,
    WITHHOLDING,
    Finding,
)
from convgraph.integrity.statement import MAX_CONV_BYTES, Statement, decode_statement

BUNDLE_TYPE: Final = "convgraph/evidence"
MAX_BUNDLE_BYTES: Final = 256 << 20
_KEYS: Final = frozenset({"v", "type", "kind", "conv", "statements", "records", "claim"})
_CLAIM_KEYS: Final[dict[str, frozenset[str]]] = {
    **{k: frozenset({"earlier", "later"}) for k in STATEMENT_KINDS},
    RECORD_EQUIVOCATION: frozenset(),
    DIVERGENT_FORK: frozenset({"a", "b"}),
    UNVERIFIABLE_CHECKPOINT: frozenset({"checkpoint", "check"}),
}
_COSIGNATURES: Final = "cosignatures"  # a bundle key of `divergent_fork` only (§7.5)

Fetch = Callable[[CID], bytes | None]
"""The bytes of a record the caller holds, or None."""


@dataclass(frozen=True, slots=True)
class Bundle:
    """A bundle whose form is right (step 1 of §6.3); its items are not yet checked."""

    kind: str
    conv: str
    statements: tuple[bytes, ...]
    records: tuple[bytes, ...]
    claim: dict[str, Any]
    cosignatures: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Proof:
    """The verifier's answer: `ok` when the bundle proves its claim; `reason` says why (not)."""

    ok: bool
    kind: str
    reason: str
    conv: str = ""


def encode_bundle(
    kind: str, conv: str, statements: Sequence[bytes], records: Iterable[bytes], claim: dict[str, Any],
    *, cosignatures: Sequence[dict[str, Any]] | None = None,
) -> bytes:
    """The canonical bundle bytes; `records` sorted by CID so one piece of evidence has one id;
    `cosignatures` (sorted likewise) only for a `divergent_fork` by a witness."""
    ordered = sorted(set(records), key=lambda data: bytes(CID.of_record(data)))
    m: dict[str, Any] = {
        "v": 1, "type": BUNDLE_TYPE, "kind": kind, "conv": conv,
        "statements": list(statements), "records": ordered, "claim": claim,
    }
    if cosignatures is not None:
        m[_COSIGNATURES] = sorted(cosignatures, key=codec.encode)
    data = codec.encode(m)
    decode_bundle(data)  # a builder never emits what a verifier would call not-a-bundle
    return data


def decode_bundle(data: bytes) -> Bundle:
    """Step 1 of §6.3: the bytes are a bundle in form, or `EvidenceError` says why not."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise EvidenceError(f"a bundle of {len(data)} bytes exceeds {MAX_BUNDLE_BYTES}")
    try:
        m = codec.decode(data)
    except ConvgraphError as exc:
        raise EvidenceError(f"not canonical DAG-CBOR: {exc}") from exc
    if type(m) is not dict or set(m) - {_COSIGNATURES} != _KEYS:
        got = sorted(str(k)[:32] for k in m) if type(m) is dict else type(m).__name__
        raise EvidenceError(f"a bundle is a map with exactly the keys {sorted(_KEYS)}, not {got}")
    if type(m["v"]) is not int or m["v"] != 1:
        raise EvidenceError(f"bundle version {m['v']!r} is not 1")
    if m["type"] != BUNDLE_TYPE:
        raise EvidenceError(f"bundle `type` is {str(m['type'])[:64]!r}, not {BUNDLE_TYPE!r}")
    kind, conv = m["kind"], m["conv"]
    if type(kind) is not str or kind not in FINDING_KINDS:
        raise EvidenceError(f"bundle `kind` {str(kind)[:64]!r} is not one of {list(FINDING_KINDS)}")
    if type(conv) is not str or not 1 <= len(conv.encode("utf-8", "surrogatepass")) <= MAX_CONV_BYTES:
        raise EvidenceError("bundle `conv` must be 1 to 256 bytes of text")
    for name in ("statements", "records"):
        if type(m[name]) is not list or any(type(item) is not bytes for item in m[name]):
            raise EvidenceError(f"bundle `{name}` must be a list of byte strings")
    _check_claim(kind, m["claim"])
    cosignatures = m.get(_COSIGNATURES)
    if cosignatures is not None and (kind != DIVERGENT_FORK or type(cosignatures) is not list
                                     or any(type(c) is not dict for c in cosignatures)):
        raise EvidenceError("`cosignatures` is a list of maps, in a `divergent_fork` bundle only")
    return Bundle(kind, conv, tuple(m["statements"]), tuple(m["records"]), m["claim"],
                  tuple(cosignatures or ()))


def _check_claim(kind: str, claim: Any) -> None:
    want = _CLAIM_KEYS[kind]
    if type(claim) is not dict or set(claim) != want:
        raise EvidenceError(f"a `{kind}` claim is a map with exactly the keys {sorted(want)}")
    for name, value in claim.items():
        is_index = kind in STATEMENT_KINDS
        if is_index and (type(value) is not int or value < 0):
            raise EvidenceError(f"claim `{name}` must be a statement index (an integer ≥ 0)")
        if name == "check":
            if type(value) is not str or value not in CHECKS:
                raise EvidenceError(f"claim `check` must be one of {list(CHECKS)}")
        elif not is_index and not isinstance(value, CID):
            raise EvidenceError(f"claim `{name}` must be a link")


def verify_bundle(data: bytes) -> Proof:
    """Check a bundle (§6.3) using nothing but `data`; `EvidenceError` when it is not one."""
    bundle = decode_bundle(data)
    try:
        return _prove(bundle)
    except _UnprovenError as exc:
        return Proof(False, bundle.kind, str(exc), bundle.conv)


class _UnprovenError(Exception):
    """Internal: the claim is not proved, and why."""


def _prove(bundle: Bundle) -> Proof:
    statements = []
    for i, raw in enumerate(bundle.statements):
        try:
            statements.append(decode_statement(raw))
        except StatementError as exc:
            raise _UnprovenError(f"statement {i} is not valid ({exc.reason}): {exc}") from exc
    records: dict[CID, Record] = {}
    for i, raw in enumerate(bundle.records):
        try:
            record = decode_record(raw)
        except ConvgraphError as exc:
            raise _UnprovenError(f"record {i} is not valid: {exc}") from exc
        if record.conv != bundle.conv:
            raise _UnprovenError(f"record {record.cid} is not of the bundle's conversation")
        if record.cid in records:
            raise _UnprovenError(f"record {record.cid} is in the bundle twice")
        records[record.cid] = record
    if bundle.kind in STATEMENT_KINDS:
        reason = _prove_statements(bundle, statements, _lookup_of(records))
    elif bundle.kind == RECORD_EQUIVOCATION:
        reason = _prove_record_equivocation(records)
    else:
        try:
            reason = checkpoint_proofs.prove(bundle.kind, bundle.claim, records, bundle.cosignatures)
        except checkpoint_proofs.Unproven as exc:
            raise _UnprovenError(str(exc)) from exc
    return Proof(True, bundle.kind, reason, bundle.conv)


def _lookup_of(records: dict[CID, Record]) -> Lookup:
    def lookup(cid: CID) -> tuple[Hlc, tuple[CID, ...]] | None:
        r = records.get(cid)
        return None if r is None else (r.hlc, r.parents)

    return lookup


def _prove_statements(bundle: Bundle, statements: list[Statement], lookup: Lookup) -> str:
    i, j = bundle.claim["earlier"], bundle.claim["later"]
    if i >= len(statements) or j >= len(statements):
        raise _UnprovenError(f"the claim names statement {max(i, j)}; the bundle has {len(statements)}")
    a, b = statements[i], statements[j]
    if a.key != b.key:
        raise _UnprovenError("the two statements are signed by different keys")
    if a.conv != bundle.conv or b.conv != bundle.conv:
        raise _UnprovenError("a claimed statement is not about the bundle's conversation")
    who = f"key {fingerprint(a.key)}"
    if bundle.kind == WITHHOLDING and i == j:
        if self_inconsistent(a, lookup) is not Verdict.YES:
            raise _UnprovenError("the receipt's own heads are not shown to lack a record it names as stored")
        gone, _ = missing(a, a, lookup)
        return f"{who} receipted {min(gone)} in a statement whose own heads do not cover it"
    if i == j:
        raise _UnprovenError(f"a `{bundle.kind}` claim names two different statements")
    if bundle.kind == SERVER_EQUIVOCATION:
        if inconsistent(a, b, lookup) is not Verdict.YES:
            raise _UnprovenError("the two statements are not shown inconsistent (§2.5)")
        return f"{who} signed two inconsistent statements (times {a.time_ms} and {b.time_ms})"
    if not b.is_later_than(a):
        raise _UnprovenError(f"statement {j} (time {b.time_ms}) is not later than statement {i} "
                        f"(time {a.time_ms}) by more than the slack")
    if bundle.kind == ROLLBACK:
        if extends(b, a, lookup) is not Verdict.NO:
            raise _UnprovenError("the later statement is not shown to fail to extend the earlier one")
        return f"{who} signed a later state (time {b.time_ms}) that does not extend an earlier one"
    gone, _ = missing(a, b, lookup)
    dropped = sorted(gone & set(a.stored))
    if not dropped:
        raise _UnprovenError("no record the earlier statement names as stored is shown missing later")
    return f"{who} receipted {dropped[0]} and later signed a state without it"


def _prove_record_equivocation(records: dict[CID, Record]) -> str:
    if len(records) != 2:
        raise _UnprovenError(f"a record equivocation holds exactly two records, not {len(records)}")
    a, b = records.values()
    if a.actor != b.actor or a.seq != b.seq:
        raise _UnprovenError("the two records differ in actor or seq")
    return f"actor {fingerprint(a.actor)} signed two records at seq {a.seq}"


# -- builders: what a replica calls when its checks find a lie ------------------------------


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
    return [x for x in candidates if covered(x, later.heads, lookup) is Verdict.NO]


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
    past = causal_past(cp.heads, lookup)[0] | {cid}
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
