"""Evidence bundles (docs/format.md §16, docs/integrity.md §6): encode, verify, and build findings.

A bundle is one canonical DAG-CBOR map that carries every statement, record and (for the
artifact kinds, §6.4) artifact block its claim needs, so `verify_bundle` reads nothing but its
bytes. Invariant: every `Finding` a builder
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
from convgraph.errors import ConvgraphError, EvidenceError, StatementError
from convgraph.integrity import artifact_proofs, checkpoint_proofs
from convgraph.integrity.checkpoints import CHECKS
from convgraph.integrity.consistency import (
    Lookup,
    Verdict,
    extends,
    inconsistent,
    missing,
    self_inconsistent,
)
from convgraph.integrity.findings import (
    ARTIFACT_KINDS,
    DIVERGENT_FORK,
    FINDING_KINDS,
    RECORD_EQUIVOCATION,
    ROLLBACK,
    SERVER_EQUIVOCATION,
    STATEMENT_KINDS,
    UNVERIFIABLE_CHECKPOINT,
    WITHHOLDING,
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
    **{k: frozenset({"record", "check"}) for k in ARTIFACT_KINDS},
}
_CHECKS: Final[dict[str, tuple[str, ...]]] = {UNVERIFIABLE_CHECKPOINT: CHECKS, **artifact_proofs.CHECKS_OF}
_COSIGNATURES: Final = "cosignatures"  # a bundle key of `divergent_fork` only (§7.5)
_BLOCKS: Final = "blocks"  # a bundle key of the artifact kinds only, and required there (§6.4)

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
    blocks: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class Proof:
    """The verifier's answer: `ok` when the bundle proves its claim; `reason` says why (not)."""

    ok: bool
    kind: str
    reason: str
    conv: str = ""


def encode_bundle(
    kind: str, conv: str, statements: Sequence[bytes], records: Iterable[bytes], claim: dict[str, Any],
    *, cosignatures: Sequence[dict[str, Any]] | None = None, blocks: Iterable[bytes] | None = None,
) -> bytes:
    """The canonical bundle bytes; `records` sorted by CID so one piece of evidence has one id;
    `cosignatures` (sorted likewise) only for a `divergent_fork` by a witness; `blocks` (sorted
    bytewise, without duplicates) for the artifact kinds, and only for them."""
    ordered = sorted(set(records), key=lambda data: bytes(CID.of_record(data)))
    m: dict[str, Any] = {
        "v": 1, "type": BUNDLE_TYPE, "kind": kind, "conv": conv,
        "statements": list(statements), "records": ordered, "claim": claim,
    }
    if cosignatures is not None:
        m[_COSIGNATURES] = sorted(cosignatures, key=codec.encode)
    if blocks is not None:
        m[_BLOCKS] = sorted(set(blocks))
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
    if type(m) is not dict or not _KEYS.issubset(m) or set(m) - _KEYS - {_COSIGNATURES, _BLOCKS}:
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
    blocks = m.get(_BLOCKS)
    if (blocks is not None) != (kind in ARTIFACT_KINDS) or (
            blocks is not None and (type(blocks) is not list or any(type(b) is not bytes for b in blocks))):
        raise EvidenceError("`blocks` is a list of byte strings, in a bundle of an artifact kind "
                            f"({', '.join(ARTIFACT_KINDS)}) only, and required there")
    return Bundle(kind, conv, tuple(m["statements"]), tuple(m["records"]), m["claim"],
                  tuple(cosignatures or ()), tuple(blocks or ()))


def _check_claim(kind: str, claim: Any) -> None:
    want = _CLAIM_KEYS[kind]
    if type(claim) is not dict or set(claim) != want:
        raise EvidenceError(f"a `{kind}` claim is a map with exactly the keys {sorted(want)}")
    for name, value in claim.items():
        is_index = kind in STATEMENT_KINDS
        if is_index and (type(value) is not int or value < 0):
            raise EvidenceError(f"claim `{name}` must be a statement index (an integer ≥ 0)")
        if name == "check":
            if type(value) is not str or value not in _CHECKS[kind]:
                raise EvidenceError(f"claim `check` must be one of {list(_CHECKS[kind])}")
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
    elif bundle.kind in ARTIFACT_KINDS:
        try:
            reason = artifact_proofs.prove(bundle.kind, bundle.claim, records, bundle.blocks)
        except artifact_proofs.Unproven as exc:
            raise _UnprovenError(str(exc)) from exc
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
