"""Checkpoints checked against the records a replica holds (docs/integrity.md §7.2-§7.3).

A false checkpoint that arrives becomes an `unverifiable_checkpoint` finding, one that waits
for records is checked when they land, two by one author (or cosigned by one witness) that
fork become a `divergent_fork`; each finding's bundle verifies on its own, and a tampered one
does not. Compaction keeps the records a finding cites. On SQLite, so the store is real.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checkpoint_world import CONV, checkpoint_at, copy, replica, say, true_payload
from convgraph import Config, Replica
from convgraph.core.cid import CID
from convgraph.core.keys import SigningKey
from convgraph.errors import EvidenceError, UnwitnessedError
from convgraph.integrity.checkpoints import Status
from convgraph.integrity.cosignature import cosign_checkpoint
from convgraph.integrity.evidence import decode_bundle, encode_bundle, verify_bundle
from convgraph.replica import witness_policy
from convgraph.replica.checkpointing import ConvView, cosignatures_of
from convgraph.replica.witness_policy import Witness, WitnessPolicy
from convgraph.sync.witness_client import compact_witnessed


def _sqlite(tmp_path: Path, name: str) -> Replica:
    return Replica.open(tmp_path / name, config=Config(legacy_writes=True))


def test_an_honest_checkpoint_is_verified_here_and_where_it_arrives(tmp_path: Path) -> None:
    a, b = replica(1), _sqlite(tmp_path, "b")
    say(a, 5)
    cp = a.checkpoint(CONV)
    copy(a, b)
    assert a.checkpoint_status(cp.cid).status is Status.VERIFIED
    assert b.checkpoint_status(cp.cid).status is Status.VERIFIED
    assert b.findings(CONV) == []


@pytest.mark.parametrize(("override", "check"), [({"count": 99}, "count"), ({"snapshot": None}, "snapshot")])
def test_a_false_checkpoint_that_arrives_is_a_finding_whose_bundle_proves_it(
    tmp_path: Path, override: dict[str, object], check: str
) -> None:
    a, b = replica(1), _sqlite(tmp_path, "b")
    first = say(a, 4)
    if override.get("snapshot", 1) is None:  # a snapshot of another state: the first record's alone
        override = {"snapshot": true_payload(a, [first[0].cid])["snapshot"]}
    bad = checkpoint_at(a, a.heads(CONV), **override)
    copy(a, b)
    result = b.checkpoint_status(bad.cid)
    assert (result.status, result.check) == (Status.FALSE, check)
    found = b.findings(CONV)
    assert [f.kind for f in found] == ["unverifiable_checkpoint"]
    proof = verify_bundle(found[0].bundle)
    assert proof.ok, proof.reason
    assert bad.cid in found[0].cites


def test_the_finding_is_raised_on_ingest_without_being_asked(tmp_path: Path) -> None:
    a, b = replica(1), _sqlite(tmp_path, "b")
    say(a, 3)
    checkpoint_at(a, a.heads(CONV), count=1)
    copy(a, b)
    # read the store directly: no lazy rescan ran
    assert [row.kind for row in b.store.findings(CONV)] == ["unverifiable_checkpoint"]


def test_a_checkpoint_naming_a_record_not_held_is_unverified_then_checked_when_it_lands(tmp_path: Path) -> None:
    a, other, b = replica(1), replica(2), _sqlite(tmp_path, "b")
    say(a, 2)
    copy(a, other)
    x = say(other, 1)[0]  # a record a never sees: its checkpoint names it anyway, with a false count
    bad = a.write(CONV, "checkpoint", {**true_payload(other, other.heads(CONV)), "count": 17})
    copy(a, b)
    assert b.checkpoint_status(bad.cid).status is Status.UNVERIFIED
    assert b.store.findings(CONV) == []
    b.ingest([x.data])
    assert [row.kind for row in b.store.findings(CONV)] == ["unverifiable_checkpoint"]


def test_a_tampered_bundle_does_not_prove(tmp_path: Path) -> None:
    a, b = replica(1), _sqlite(tmp_path, "b")
    say(a, 3)
    checkpoint_at(a, a.heads(CONV), count=2)
    copy(a, b)
    bundle = decode_bundle(b.findings(CONV)[0].bundle)
    honest = encode_bundle(bundle.kind, bundle.conv, [], bundle.records, {**bundle.claim, "check": "snapshot"})
    assert not verify_bundle(honest).ok  # the count fails first: naming another check proves nothing
    short = encode_bundle(bundle.kind, bundle.conv, [], bundle.records[1:], bundle.claim)
    assert not verify_bundle(short).ok
    with pytest.raises(EvidenceError):
        verify_bundle(b.findings(CONV)[0].bundle[:-1])


def test_two_checkpoints_by_one_author_that_fork_are_a_divergent_fork(tmp_path: Path) -> None:
    a, c, b = replica(1), replica(2), _sqlite(tmp_path, "b")
    say(a, 2)
    copy(a, c)
    mine, theirs = say(a, 1)[0], say(c, 1)[0]
    copy(c, a)
    # each true, of one side of the fork: neither extends the other
    later, back = checkpoint_at(a, [mine.cid]), checkpoint_at(a, [theirs.cid])
    copy(a, b)
    assert b.checkpoint_status(back.cid).status is Status.VERIFIED
    found = [f for f in b.findings(CONV) if f.kind == "divergent_fork"]
    assert len(found) == 1
    proof = verify_bundle(found[0].bundle)
    assert proof.ok, proof.reason
    assert {later.cid, back.cid} <= set(found[0].cites)


def test_an_honest_chain_is_no_fork(tmp_path: Path) -> None:
    a, b = replica(1), _sqlite(tmp_path, "b")
    for _ in range(3):
        say(a, 2)
        a.checkpoint(CONV)
    copy(a, b)
    assert b.findings(CONV) == []


def test_two_forked_checkpoints_cosigned_by_one_witness_are_a_divergent_fork(tmp_path: Path) -> None:
    a, c, b = replica(1), replica(2), _sqlite(tmp_path, "b")
    say(a, 2)
    copy(a, c)
    say(a, 1)
    say(c, 1)  # a and c diverge; each checkpoints its own side
    one, two = a.checkpoint(CONV), c.checkpoint(CONV)
    witness = SigningKey(bytes([9]) * 32)
    a.write(CONV, "attestation", cosign_checkpoint(witness, one, 1_700_000_000).payload())
    c.write(CONV, "attestation", cosign_checkpoint(witness, two, 1_700_000_001).payload())
    copy(a, b)
    copy(c, b)
    found = [f for f in b.findings(CONV) if f.kind == "divergent_fork"]
    assert len(found) == 1
    assert verify_bundle(found[0].bundle).ok
    assert len(decode_bundle(found[0].bundle).cosignatures) == 2


def test_compaction_keeps_what_a_finding_cites_and_waits_for_witnesses(tmp_path: Path) -> None:
    a, b = replica(1), _sqlite(tmp_path, "b")
    say(a, 3)
    bad = checkpoint_at(a, a.heads(CONV), count=1)
    copy(a, b)
    cited = set(b.findings(CONV)[0].cites)
    say(b, 2)
    cp = b.checkpoint(CONV)
    witness = SigningKey(bytes([9]) * 32)
    policy = WitnessPolicy((Witness("w", witness.public, "http://127.0.0.1:1"),), 1)
    with pytest.raises(UnwitnessedError):
        compact_witnessed(b, cp, policy)
    assert all(b.store.get(c) is not None for c in b.store.metas(cited))
    b.write(CONV, "attestation", cosign_checkpoint(witness, cp, 1_700_000_000, "w").payload())
    assert b.witnessed(cp.cid, policy)
    compact_witnessed(b, cp, policy)
    everything = ConvView(b.store, CONV).lookup  # every record held, bytes or header
    dropped = [c for c in b.store.metas(cp.payload["heads"]) if everything(c) and b.store.get(c) is None]
    assert dropped, "nothing was compacted"
    assert bad.cid in cited
    assert all(b.store.get(c) is not None for c in cited), "a cited record lost its bytes"
    assert verify_bundle(b.findings(CONV)[0].bundle).ok


def _with_bytes(r: Replica) -> set[CID]:
    """The records of CONV (compacted ones included) whose bytes `r` still holds."""
    return {c for c in r.state(CONV).entries if r.store.get(c) is not None}


def _policy(witness: SigningKey) -> WitnessPolicy:
    return WitnessPolicy((Witness("w", witness.public, "http://127.0.0.1:1"),), 1)


def _with_a_finding(b: Replica) -> set[CID]:
    """Give `b` a finding (a false checkpoint by another author) and two turns of its own;
    the records the finding cites."""
    a = replica(1)
    say(a, 3)
    checkpoint_at(a, a.heads(CONV), count=1)
    copy(a, b)
    say(b, 2)
    return set(b.findings(CONV)[0].cites)


def test_checkpoint_compact_in_python_applies_the_configured_policy(tmp_path: Path) -> None:
    b = _sqlite(tmp_path, "b")
    cited = _with_a_finding(b)
    witness = SigningKey(bytes([9]) * 32)
    assert b.home is not None
    witness_policy.save(b.home, _policy(witness))  # what `convgraph witness add/policy` writes
    heads, held = b.heads(CONV), _with_bytes(b)
    with pytest.raises(UnwitnessedError) as refused:
        b.checkpoint(CONV, compact=True)
    assert (refused.value.got, refused.value.k) == (0, 1)
    assert b.heads(CONV) == heads, "a refused checkpoint was written"
    assert _with_bytes(b) == held, "a refused compaction dropped records"
    cp = b.checkpoint(CONV)
    with pytest.raises(UnwitnessedError) as unwitnessed:
        b.compact_behind(cp.cid)
    assert (unwitnessed.value.cid, unwitnessed.value.got, unwitnessed.value.k) == (str(cp.cid), 0, 1)
    assert _with_bytes(b) == held | {cp.cid}
    b.write(CONV, "attestation", cosign_checkpoint(witness, cp, 1_700_000_000, "w").payload())
    b.compact_behind(cp.cid)  # witnessed now
    dropped = held - _with_bytes(b)
    assert dropped, "nothing was compacted"
    assert cited <= _with_bytes(b), "a cited record lost its bytes"
    assert verify_bundle(b.findings(CONV)[0].bundle).ok


def test_a_policy_passed_in_is_applied_and_without_one_compaction_keeps_what_findings_cite() -> None:
    b = replica(2)  # in memory: no home, so no configured policy
    cited = _with_a_finding(b)
    held = _with_bytes(b)
    with pytest.raises(UnwitnessedError):
        b.checkpoint(CONV, compact=True, policy=_policy(SigningKey(bytes([9]) * 32)))
    assert _with_bytes(b) == held
    cp = b.checkpoint(CONV, compact=True)
    assert held - _with_bytes(b), "nothing was compacted"
    assert cited <= _with_bytes(b), "a cited record lost its bytes"
    assert cp.cid in _with_bytes(b)


def test_a_fork_hidden_among_a_long_chain_is_found_by_comparing_neighbours(tmp_path: Path) -> None:
    a, c, b = replica(1), replica(2), _sqlite(tmp_path, "b")
    say(a, 2)
    copy(a, c)
    side = say(c, 1)[0]
    for _ in range(4):  # an honest chain, each extending the one before
        say(a, 2)
        a.checkpoint(CONV)
    copy(c, a)
    fork = checkpoint_at(a, [side.cid])  # of the side branch alone: count 3, it extends none of them
    copy(a, b)
    found = [f for f in b.findings(CONV) if f.kind == "divergent_fork"]
    assert found, "the fork was not found"
    assert all(fork.cid in f.cites and verify_bundle(f.bundle).ok for f in found)


def test_a_cosignature_of_an_earlier_checkpoint_does_not_witness_a_later_one(tmp_path: Path) -> None:
    b = _sqlite(tmp_path, "b")
    say(b, 2)
    first = b.checkpoint(CONV)
    witness = SigningKey(bytes([9]) * 32)
    policy = _policy(witness)
    b.write(CONV, "attestation", cosign_checkpoint(witness, first, 1_700_000_000, "w").payload())
    say(b, 2)
    second = b.checkpoint(CONV)
    assert b.witnessed(first.cid, policy) and not b.witnessed(second.cid, policy)
    entries = lambda conv: b.state(conv).entries.values()  # noqa: E731 - as witness_client passes it
    assert witness_policy.cosigners(b.store, second.cid, policy, entries) == set()
    assert witness_policy.cosigners(b.store, first.cid, policy, entries) == {"w"}
    held = _with_bytes(b)
    with pytest.raises(UnwitnessedError):  # nothing behind the second checkpoint is dropped
        b.compact_behind(second.cid, policy=policy)
    assert _with_bytes(b) == held
    # what `checkpoint export --note` attaches to the second checkpoint: none of the first's lines
    view = ConvView(b.store, CONV)
    assert [c.checkpoint for _, c in cosignatures_of(view, entries(CONV), second.cid)] == []
    assert [c.checkpoint for _, c in cosignatures_of(view, entries(CONV), first.cid)] == [first.cid]
