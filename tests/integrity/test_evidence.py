"""Evidence bundles (docs/integrity.md §6, docs/format.md §16): builders, verifier, tampering.

Each scenario is a small real conversation (signed records) and real signed statements; the
builders take only a `fetch` of record bytes, and what they return must verify from its
bytes alone. Tampering with any byte of a proving bundle must make it not prove.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import Record, sign_record
from convgraph.errors import ConvgraphError, EvidenceError, IntegrityError, StatementError
from convgraph.integrity.builders import (
    record_equivocation_finding,
    self_inconsistent_finding,
    statements_finding,
)
from convgraph.integrity.evidence import Proof, decode_bundle, encode_bundle, verify_bundle
from convgraph.integrity.findings import FINDING_KINDS, STATEMENT_KINDS, Finding
from convgraph.integrity.statement import ORDER_SLACK_MS, Statement, sign_statement

SERVER = SigningKey(bytes(range(32)))
ALICE = SigningKey(bytes([7]) * 32)
BOB = SigningKey(bytes([9]) * 32)
CONV = "c"
T = 1_700_000_000_000


class Conv:
    """A conversation's records by CID, and the fetch a replica's store would give."""

    def __init__(self) -> None:
        self.records: dict[CID, Record] = {}
        self.seq: dict[bytes, int] = {}

    def write(self, key: SigningKey, wall: int, *parents: Record, text: str = "hi", seq: int | None = None) -> Record:
        n = seq if seq is not None else self.seq.get(key.public, 0) + 1
        self.seq[key.public] = max(n, self.seq.get(key.public, 0))
        r = sign_record(key, conv=CONV, seq=n, hlc=Hlc(wall, 0), parents=[p.cid for p in parents],
                        kind="user_message", payload={"content": text})
        self.records[r.cid] = r
        return r

    def fetch(self, cid: CID) -> bytes | None:
        r = self.records.get(cid)
        return None if r is None else r.data


def stmt(records: Iterable[Record], time_ms: int, stored: Iterable[Record] = (), count: int | None = None) -> Statement:
    members = list(records)
    named = {p for r in members for p in r.parents}
    heads = [r.cid for r in members if r.cid not in named]
    return sign_statement(SERVER, CONV, len(members) if count is None else count, heads, time_ms,
                          stored=[r.cid for r in stored])


@dataclass(frozen=True)
class Chain:
    c: Conv
    a1: Record
    b1: Record
    a2: Record
    b2: Record
    a3: Record
    f: Record


@pytest.fixture
def ch() -> Chain:
    """a1 <- b1 <- a2 <- b2 <- a3, and a fork f off a2 by Bob at b2's seq (2): an equivocation."""
    c = Conv()
    a1 = c.write(ALICE, 1)
    b1 = c.write(BOB, 2, a1)
    a2 = c.write(ALICE, 3, b1)
    b2 = c.write(BOB, 4, a2)
    a3 = c.write(ALICE, 5, b2)
    f = c.write(BOB, 6, a2, seq=2)
    return Chain(c, a1, b1, a2, b2, a3, f)


def proves(finding: Finding | None) -> Finding:
    assert finding is not None
    proof = verify_bundle(finding.bundle)
    assert proof.ok, proof.reason
    assert proof.kind == finding.kind and proof.conv == CONV
    assert finding.id == CID.of_record(finding.bundle)
    return finding


def test_rollback_by_count_alone_needs_no_records(ch: Chain) -> None:
    earlier = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T)
    later = stmt([ch.a1, ch.b1], T + ORDER_SLACK_MS + 1)
    found = proves(statements_finding("rollback", earlier, later, ch.c.fetch, 42))
    assert found.cites == () and found.found_ms == 42
    assert found.statements == (earlier, later)
    assert decode_bundle(found.bundle).records == ()


def test_rollback_to_a_fork_carries_the_walk(ch: Chain) -> None:
    earlier = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T)
    later = stmt([ch.a1, ch.b1, ch.a2, ch.f], T + 5_000)  # same count, other branch: b2 is not covered
    found = proves(statements_finding("rollback", earlier, later, ch.c.fetch, 0))
    assert ch.b2.cid in found.cites and ch.f.cid in found.cites
    assert ch.a1.cid not in found.cites  # below b2's hlc: the walk never goes there
    # within the slack the same pair proves nothing of the kind (and no finding is made)
    close = stmt([ch.a1, ch.b1, ch.a2, ch.f], T + ORDER_SLACK_MS)
    assert statements_finding("rollback", earlier, close, ch.c.fetch, 0) is None
    # but it is a fork: neither extends the other, so it is a server equivocation
    proves(statements_finding("server_equivocation", earlier, close, ch.c.fetch, 0))
    proves(statements_finding("server_equivocation", close, earlier, ch.c.fetch, 0))


def test_deletion_needs_a_receipted_record(ch: Chain) -> None:
    receipt = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T, stored=[ch.b2])
    later = stmt([ch.a1, ch.b1, ch.a2, ch.f], T + 5_000)
    found = proves(statements_finding("deletion", receipt, later, ch.c.fetch, 0))
    assert "receipted" in found.summary
    plain = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T)
    assert statements_finding("deletion", plain, later, ch.c.fetch, 0) is None
    proves(statements_finding("rollback", plain, later, ch.c.fetch, 0))
    # withholding between two statements is proved as deletion is
    proves(statements_finding("withholding", receipt, later, ch.c.fetch, 0))


def test_an_honest_successor_is_never_a_finding(ch: Chain) -> None:
    receipt = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T, stored=[ch.b2, ch.a2])
    later = stmt([ch.a1, ch.b1, ch.a2, ch.b2, ch.a3, ch.f], T + 5_000)
    for kind in STATEMENT_KINDS:
        assert statements_finding(kind, receipt, later, ch.c.fetch, 0) is None
        assert statements_finding(kind, later, receipt, ch.c.fetch, 0) is None  # swapped: never later
    assert self_inconsistent_finding(receipt, ch.c.fetch, 0) is None


def test_undecided_without_the_records_is_no_finding(ch: Chain) -> None:
    receipt = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T, stored=[ch.b2])
    later = stmt([ch.a1, ch.b1, ch.a2, ch.f], T + 5_000)
    without_f = {k: v for k, v in ch.c.records.items() if k != ch.f.cid}
    assert statements_finding("deletion", receipt, later, lambda x: without_f[x].data if x in without_f else None,
                              0) is None


def test_self_inconsistent_receipt_is_withholding(ch: Chain) -> None:
    liar = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T, stored=[ch.f])  # names f as stored; its heads do not cover f
    found = proves(self_inconsistent_finding(liar, ch.c.fetch, 0))
    assert found.kind == "withholding" and found.statements == (liar,)
    assert decode_bundle(found.bundle).claim == {"earlier": 0, "later": 0}


def test_record_equivocation(ch: Chain) -> None:
    found = proves(record_equivocation_finding(ch.b2.data, ch.f.data, 0))
    assert found.cites == tuple(sorted((ch.b2.cid, ch.f.cid)))
    # the same evidence found in the other order is the same finding
    assert record_equivocation_finding(ch.f.data, ch.b2.data, 1).id == found.id
    with pytest.raises(IntegrityError):
        record_equivocation_finding(ch.a1.data, ch.a2.data, 0)  # one actor, two seqs: no equivocation


def test_one_finding_per_piece_of_evidence(ch: Chain) -> None:
    earlier = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T)
    later = stmt([ch.a1, ch.b1, ch.a2, ch.f], T)
    one = proves(statements_finding("server_equivocation", earlier, later, ch.c.fetch, 0))
    two = proves(statements_finding("server_equivocation", later, earlier, ch.c.fetch, 9))
    assert one.id == two.id and one.bundle == two.bundle


def _bundle(kind: str, statements: list[Statement], records: list[Record], claim: dict[str, Any]) -> bytes:
    return encode_bundle(kind, CONV, [s.data for s in statements], [r.data for r in records], claim)


def test_the_verifier_refuses_what_does_not_prove(ch: Chain) -> None:
    earlier = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T)
    later = stmt([ch.a1, ch.b1, ch.a2, ch.f], T + 5_000)
    claim = {"earlier": 0, "later": 1}
    # the walk from f towards b2 reaches a2 (to learn that its hlc is below b2's) and stops
    assert verify_bundle(_bundle("rollback", [earlier, later], [ch.a2, ch.b2, ch.f], claim)).ok
    cases = {
        "a reached record is not in the bundle": _bundle("rollback", [earlier, later], [ch.b2, ch.f], claim),
        "a head is not in the bundle": _bundle("rollback", [earlier, later], [ch.a2, ch.b2], claim),
        "the target itself is not in the bundle": _bundle("rollback", [earlier, later], [ch.a2, ch.f], claim),
        "the claim is backwards": _bundle("rollback", [earlier, later], [ch.a2, ch.b2, ch.f], {"earlier": 1, "later": 0}),
        "an index past the statements": _bundle("rollback", [earlier, later], [ch.a2, ch.b2, ch.f], {"earlier": 0, "later": 2}),
        "one statement twice": _bundle("server_equivocation", [earlier], [ch.a2, ch.b2, ch.f], {"earlier": 0, "later": 0}),
        "no receipt": _bundle("deletion", [earlier, later], [ch.a2, ch.b2, ch.f], claim),
        "by two keys": _bundle("rollback", [earlier, sign_statement(ALICE, CONV, 4, [ch.f.cid], T + 5_000)],
                               [ch.a2, ch.b2, ch.f], claim),
        "one record": _bundle("record_equivocation", [], [ch.b2], {}),
        "two records, two seqs": _bundle("record_equivocation", [], [ch.a1, ch.a2], {}),
        "a checkpoint kind": _bundle("divergent_fork", [], [ch.a1, ch.a2], {"a": ch.a1.cid, "b": ch.a2.cid}),
    }
    twice = codec.decode(_bundle("rollback", [earlier, later], [ch.a2, ch.b2, ch.f], claim))
    twice["records"].append(twice["records"][0])  # encode_bundle would de-duplicate
    cases["a record twice"] = codec.encode(twice)
    for name, data in cases.items():
        proof = verify_bundle(data)
        assert not proof.ok, name
        assert proof.reason, name


def test_other_conversation_records_do_not_count(ch: Chain) -> None:
    other = sign_record(ALICE, conv="d", seq=1, hlc=Hlc(1, 0), parents=[], kind="user_message",
                        payload={"content": "x"})
    b = codec.decode(record_equivocation_finding(ch.b2.data, ch.f.data, 0).bundle)
    b["records"] = [other.data, ch.a1.data]
    assert not verify_bundle(codec.encode(b)).ok


def test_not_a_bundle() -> None:
    good = {"v": 1, "type": "convgraph/evidence", "kind": "rollback", "conv": CONV,
            "statements": [], "records": [], "claim": {"earlier": 0, "later": 1}}
    assert not verify_bundle(codec.encode(good)).ok  # a bundle, claiming what it cannot show
    bad: list[Any] = [
        {**good, "v": 2}, {**good, "type": "evidence"}, {**good, "kind": "lie"},
        {**good, "conv": ""}, {**good, "statements": ["x"]}, {**good, "records": {}},
        {**good, "claim": {"earlier": 0}}, {**good, "claim": {"earlier": -1, "later": 0}},
        {**good, "claim": {"earlier": True, "later": 0}}, {**good, "extra": 1},
        {k: v for k, v in good.items() if k != "records"},
        {**good, "kind": "record_equivocation"}, {**good, "kind": "divergent_fork", "claim": {"a": 1, "b": 2}},
        [1, 2],
    ]
    for value in bad:
        with pytest.raises(EvidenceError):
            verify_bundle(codec.encode(value))
    with pytest.raises(EvidenceError):
        verify_bundle(b"\xa0\x00")  # trailing bytes
    with pytest.raises(EvidenceError):
        verify_bundle(bytes.fromhex("a2616101616102")[::-1])
    assert set(FINDING_KINDS) >= set(STATEMENT_KINDS)


def _all_findings(ch: Chain) -> list[Finding]:
    receipt = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T, stored=[ch.b2])
    later = stmt([ch.a1, ch.b1, ch.a2, ch.f], T + 5_000)
    return [proves(x) for x in (
        statements_finding("rollback", stmt([ch.a1, ch.b1, ch.a2], T), stmt([ch.a1], T + 2_000), ch.c.fetch, 0),
        statements_finding("deletion", receipt, later, ch.c.fetch, 0),
        statements_finding("server_equivocation", receipt, stmt([ch.a1, ch.b1, ch.a2, ch.f], T), ch.c.fetch, 0),
        self_inconsistent_finding(stmt([ch.a1, ch.b1], T, stored=[ch.a2]), ch.c.fetch, 0),
        record_equivocation_finding(ch.b2.data, ch.f.data, 0),
    )]


def _still_proves(data: bytes) -> bool:
    try:
        return verify_bundle(data).ok
    except EvidenceError:
        return False


def test_flipping_any_bit_of_any_proving_bundle_unproves_it(ch: Chain) -> None:
    for finding in _all_findings(ch):
        data = finding.bundle
        for i in range(len(data)):
            for mask in (0x01, 0x80):
                tampered = data[:i] + bytes([data[i] ^ mask]) + data[i + 1:]
                assert not _still_proves(tampered), (finding.kind, i, mask)


@given(st.data())
def test_any_byte_edit_unproves(data: st.DataObject) -> None:
    c = Conv()
    a1 = c.write(ALICE, 1)
    b1 = c.write(BOB, 2, a1)
    f1 = c.write(BOB, 3, a1, seq=1)
    bundle = proves(statements_finding("server_equivocation", stmt([a1, b1], T), stmt([a1, f1], T + 10), c.fetch,
                                       0)).bundle
    i = data.draw(st.integers(0, len(bundle) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda v: v != bundle[i]))
    edit = data.draw(st.sampled_from(["replace", "insert", "delete"]))
    if edit == "replace":
        tampered = bundle[:i] + bytes([value]) + bundle[i + 1:]
    elif edit == "insert":
        tampered = bundle[:i] + bytes([value]) + bundle[i:]
    else:
        tampered = bundle[:i] + bundle[i + 1:]
    assert not _still_proves(tampered)


# ---- found by mutation testing: the words of every refusal, the proof's conversation ----

def _why_unproven(prove: Any, unproven: type[Exception], *args: Any) -> str:
    with pytest.raises(unproven) as caught:
        prove(*args)
    return str(caught.value)


def test_each_unproven_bundle_says_why(ch: Chain) -> None:
    from convgraph.core.keys import fingerprint
    from convgraph.core.record import decode_record
    from convgraph.integrity import artifact_proofs, checkpoint_proofs
    from convgraph.integrity.statement import decode_statement

    earlier = stmt([ch.a1, ch.b1, ch.a2, ch.b2], T)
    later = stmt([ch.a1, ch.b1, ch.a2, ch.f], T + 5_000)
    walk = [ch.a2, ch.b2, ch.f]
    claim = {"earlier": 0, "later": 1}
    proof = verify_bundle(_bundle("rollback", [earlier, later], walk, claim))
    assert proof.ok and proof.reason.startswith(f"key {fingerprint(SERVER.public)} signed a later state")
    elsewhere = sign_statement(SERVER, "d", 4, [ch.f.cid], T + 5_000)
    honest = stmt([ch.a1, ch.b1, ch.a2, ch.b2, ch.a3], T + 5_000)
    twice = codec.decode(_bundle("rollback", [earlier, later], walk, claim))
    twice["records"].append(twice["records"][0])
    with pytest.raises(StatementError) as not_a_statement:
        decode_statement(b"x")
    bad_statement = f"statement 0 is not valid ({not_a_statement.value.reason}): {not_a_statement.value}"
    with pytest.raises(ConvgraphError) as not_a_record:
        decode_record(b"x")
    bad_record = f"record 0 is not valid: {not_a_record.value}"
    fork = {"a": ch.a1.cid, "b": ch.a2.cid}
    records = {r.cid: r for r in (ch.a1, ch.a2)}
    not_a_fork = _why_unproven(checkpoint_proofs.prove, checkpoint_proofs.Unproven, "divergent_fork", fork, records, ())
    patch_claim = {"record": ch.a1.cid, "check": artifact_proofs.CHECKS_OF["false_patch"][0]}
    not_a_patch = _why_unproven(artifact_proofs.prove, artifact_proofs.Unproven, "false_patch", patch_claim,
                                {ch.a1.cid: ch.a1}, [])
    cases = {
        "the later statement is not shown to fail to extend the earlier one":
            _bundle("rollback", [earlier, later], [ch.b2, ch.f], claim),
        f"statement 0 (time {T}) is not later than statement 1 (time {T + 5_000}) by more than the slack":
            _bundle("rollback", [earlier, later], walk, {"earlier": 1, "later": 0}),
        "the claim names statement 2; the bundle has 2":
            _bundle("rollback", [earlier, later], walk, {"earlier": 0, "later": 2}),
        "a `server_equivocation` claim names two different statements":
            _bundle("server_equivocation", [earlier], walk, {"earlier": 0, "later": 0}),
        "the two statements are not shown inconsistent (§2.5)":
            _bundle("server_equivocation", [earlier, honest], [*walk, ch.a3], claim),
        "the receipt's own heads are not shown to lack a record it names as stored":
            _bundle("withholding", [earlier], walk, {"earlier": 0, "later": 0}),
        "no record the earlier statement names as stored is shown missing later":
            _bundle("deletion", [earlier, later], walk, claim),
        "the two statements are signed by different keys":
            _bundle("rollback", [earlier, sign_statement(ALICE, CONV, 4, [ch.f.cid], T + 5_000)], walk, claim),
        "a claimed statement is not about the bundle's conversation":
            _bundle("rollback", [earlier, elsewhere], walk, claim),
        "a record equivocation holds exactly two records, not 1": _bundle("record_equivocation", [], [ch.b2], {}),
        "the two records differ in actor or seq": _bundle("record_equivocation", [], [ch.a1, ch.a2], {}),
        f"record {CID.of_record(twice['records'][0])} is in the bundle twice": codec.encode(twice),
        bad_statement: encode_bundle("rollback", CONV, [b"x"], [], claim),
        bad_record: encode_bundle("record_equivocation", CONV, [], [b"x"], {}),
        not_a_fork: _bundle("divergent_fork", [], [ch.a1, ch.a2], fork),
        not_a_patch: encode_bundle("false_patch", CONV, [], [ch.a1.data], patch_claim, blocks=[]),
    }
    for reason, data in cases.items():
        assert verify_bundle(data) == Proof(False, decode_bundle(data).kind, reason, CONV), reason


def test_a_record_of_another_conversation_is_named(ch: Chain) -> None:
    other = sign_record(ALICE, conv="d", seq=1, hlc=Hlc(1, 0), parents=[], kind="user_message",
                        payload={"content": "x"})
    b = codec.decode(record_equivocation_finding(ch.b2.data, ch.f.data, 0).bundle)
    b["records"] = [other.data, ch.a1.data]
    assert verify_bundle(codec.encode(b)).reason == f"record {other.cid} is not of the bundle's conversation"


def test_each_refusal_of_a_bundles_form_says_why(ch: Chain, monkeypatch: pytest.MonkeyPatch) -> None:
    from convgraph.integrity import evidence
    from convgraph.integrity.checkpoints import CHECKS
    from convgraph.integrity.findings import ARTIFACT_KINDS

    good = {"v": 1, "type": "convgraph/evidence", "kind": "rollback", "conv": CONV,
            "statements": [], "records": [], "claim": {"earlier": 0, "later": 1}}
    keys = sorted(good)
    fork = {"a": ch.a1.cid, "b": ch.a2.cid}
    long_key = "k" * 40
    cases: list[tuple[Any, str]] = [
        ([1, 2], f"a bundle is a map with exactly the keys {keys}, not list"),
        ({**good, long_key: 1}, f"a bundle is a map with exactly the keys {keys}, not {sorted([*keys, 'k' * 32])}"),
        ({**good, "v": 2}, "bundle version 2 is not 1"),
        ({**good, "type": "evidence"}, "bundle `type` is 'evidence', not 'convgraph/evidence'"),
        ({**good, "type": "t" * 70}, f"bundle `type` is {'t' * 64!r}, not 'convgraph/evidence'"),
        ({**good, "kind": "lie"}, f"bundle `kind` 'lie' is not one of {list(FINDING_KINDS)}"),
        ({**good, "kind": "l" * 70}, f"bundle `kind` {'l' * 64!r} is not one of {list(FINDING_KINDS)}"),
        ({**good, "conv": ""}, "bundle `conv` must be 1 to 256 bytes of text"),
        ({**good, "conv": "c" * 257}, "bundle `conv` must be 1 to 256 bytes of text"),
        ({**good, "statements": ["x"]}, "bundle `statements` must be a list of byte strings"),
        ({**good, "claim": {"earlier": 0}}, "a `rollback` claim is a map with exactly the keys ['earlier', 'later']"),
        ({**good, "claim": {"earlier": -1, "later": 0}}, "claim `earlier` must be a statement index (an integer ≥ 0)"),
        ({**good, "kind": "divergent_fork", "claim": {"a": 1, "b": 2}}, "claim `a` must be a link"),
        ({**good, "kind": "unverifiable_checkpoint", "claim": {"checkpoint": ch.a1.cid, "check": "nope"}},
         f"claim `check` must be one of {list(CHECKS)}"),
        ({**good, "kind": "divergent_fork", "claim": fork, "cosignatures": [1]},
         "`cosignatures` is a list of maps, in a `divergent_fork` bundle only"),
        ({**good, "blocks": []}, "`blocks` is a list of byte strings, in a bundle of an artifact kind "
                                 f"({', '.join(ARTIFACT_KINDS)}) only, and required there"),
    ]
    for value, message in cases:
        with pytest.raises(EvidenceError) as caught:
            decode_bundle(codec.encode(value))
        assert str(caught.value) == message
    assert decode_bundle(codec.encode({**good, "conv": "c" * 256})).conv == "c" * 256
    with pytest.raises(EvidenceError) as caught:
        decode_bundle(b"\xa0\x00")
    assert str(caught.value).startswith("not canonical DAG-CBOR: ")
    data = codec.encode(good)
    monkeypatch.setattr(evidence, "MAX_BUNDLE_BYTES", len(data))
    assert decode_bundle(data).kind == "rollback"  # exactly the limit is allowed
    monkeypatch.setattr(evidence, "MAX_BUNDLE_BYTES", len(data) - 1)
    with pytest.raises(EvidenceError) as caught:
        decode_bundle(data)
    assert str(caught.value) == f"a bundle of {len(data)} bytes exceeds {len(data) - 1}"
