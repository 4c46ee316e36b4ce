"""Authority at the replica's doors: local writes, ingest and the views (docs/authority.md §9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from convgraph import MemoryStore, Replica, SqliteStore
from convgraph.core import codec
from convgraph.core.hlc import ManualClock
from convgraph.core.keys import SigningKey
from convgraph.core.record import sign_record, signing_bytes
from convgraph.core.rooted import conv_id
from convgraph.errors import AuthorityError, ForgedMergeError, UnknownKindError
from convgraph.replica.adoption import compaction_of

T0 = 1_700_000_000_000
NONCE = bytes(range(16))


def device(i: int, clock: ManualClock) -> Replica:
    return Replica.in_memory(SigningKey(bytes([i + 70]) * 32), clock=clock)


def sync(a: Replica, b: Replica) -> None:
    """Both ways, every record: what each holds, the other ingests."""
    for src, dst in ((a, b), (b, a)):
        dst.ingest([r.data for r in src.iter_records()])


def rooted(owner: Replica) -> str:
    conv = conv_id(owner.actor, NONCE)
    owner.write(conv, "genesis", {"nonce": NONCE, "title": "design review"})
    return conv


def grant(by: Replica, conv: str, to: Replica, *rights: str) -> None:
    by.write(conv, "grant", {"grantee": to.actor, "rights": sorted(rights)})


def test_a_device_without_write_fails_before_signing_and_is_told_why() -> None:
    clock = ManualClock(T0)
    owner, other = device(0, clock), device(1, clock)
    conv = rooted(owner)
    sync(owner, other)
    with pytest.raises(AuthorityError) as caught:
        other.say(conv, "user", "let me in")
    assert caught.value.capability == "write" and caught.value.cid is None
    assert "convgraph why" in str(caught.value)
    assert other.store.count(conv) == 1  # nothing was signed or stored


def test_a_granted_device_writes_and_a_strangers_records_are_rejected_on_ingest() -> None:
    clock = ManualClock(T0)
    owner, laptop, stranger = device(0, clock), device(1, clock), device(2, clock)
    conv = rooted(owner)
    grant(owner, conv, laptop, "read", "write")
    sync(owner, laptop)
    laptop.say(conv, "user", "hello from the laptop")
    sync(owner, laptop)
    # the stranger signs directly, skipping its own replica's check, and pushes the record
    forged = sign_record(stranger.key, conv=conv, seq=1, hlc=(T0 + 1_000, 0),
                         parents=owner.heads(conv), kind="agent_message",
                         payload={"content": "the team agreed to ship"})
    report = owner.ingest([forged.data])
    assert [r.rule for r in report.rejected] == ["authority"]
    assert [t.text for t in owner.transcript(conv)] == ["hello from the laptop"]


def test_a_revocation_excludes_what_it_is_concurrent_with_from_the_transcript() -> None:
    clock = ManualClock(T0)
    owner, phone = device(0, clock), device(1, clock)
    conv = rooted(owner)
    grant(owner, conv, phone, "read", "write")
    sync(owner, phone)
    clock.advance(10)
    owner.write(conv, "revocation", {"grantee": phone.actor, "rights": ["read"], "reason": "lost"})
    phone.say(conv, "user", "written by whoever found the phone")  # has not seen the revocation
    sync(owner, phone)
    assert owner.transcript(conv) == phone.transcript(conv) == []
    (excluded,) = owner.authority(conv).excluded()
    assert excluded.reason == "revoked_concurrently"
    with pytest.raises(AuthorityError):
        phone.say(conv, "user", "and again")


def test_merging_a_branch_that_does_not_exist_is_refused() -> None:
    clock = ManualClock(T0)
    owner = device(0, clock)
    conv = rooted(owner)
    owner.say(conv, "user", "hi")
    with pytest.raises(ForgedMergeError):
        owner.merge(conv, "nosuchbranch", summary="hi")
    assert [t.text for t in owner.transcript(conv)] == ["hi"]


def test_an_admin_may_retract_anyones_turn_in_a_rooted_conversation() -> None:
    clock = ManualClock(T0)
    owner, writer = device(0, clock), device(1, clock)
    conv = rooted(owner)
    grant(owner, conv, writer, "read", "write")
    sync(owner, writer)
    turn = writer.say(conv, "user", "spam")
    sync(owner, writer)
    owner.write(conv, "retraction", {"target": turn.cid, "reason": "spam"})
    sync(owner, writer)
    assert owner.transcript(conv) == writer.transcript(conv) == []


def test_the_authority_projection_answers_with_chains() -> None:
    clock = ManualClock(T0)
    owner, laptop = device(0, clock), device(1, clock)
    conv = rooted(owner)
    grant(owner, conv, laptop, "read", "write")
    authority = owner.authority(conv)
    answer = authority.who_can(laptop.actor, "write")
    assert answer.allowed and len(answer.chain) == 2 and answer.chain[0] == authority.genesis
    assert set(authority.members()) == {owner.actor, laptop.actor}


def answers(r: Replica, conv: str) -> tuple[object, ...]:
    authority = r.authority(conv, at_ms=T0 + 10**9)
    members = {a: [(x.capability, x.chain) for x in v] for a, v in authority.members().items()}
    return authority.excluded(), members, [t.text for t in r.transcript(conv)]


def team_with_a_revoked_phone(clock: ManualClock) -> tuple[Replica, Replica, Replica, str]:
    owner, laptop, phone = device(0, clock), device(1, clock), device(2, clock)
    conv = rooted(owner)
    grant(owner, conv, laptop, "read", "write")
    grant(owner, conv, phone, "read", "write")
    for d in (laptop, phone):
        sync(owner, d)
    laptop.say(conv, "user", "from the laptop")
    clock.advance(10)
    owner.write(conv, "revocation", {"grantee": phone.actor, "rights": ["read"]})
    phone.say(conv, "user", "from the lost phone")  # concurrent with its revocation
    for d in (laptop, phone):
        sync(owner, d)
    return owner, laptop, phone, conv


def test_a_compacted_rooted_conversation_answers_as_the_full_one() -> None:
    clock = ManualClock(T0)
    owner, laptop, phone, conv = team_with_a_revoked_phone(clock)
    before = answers(owner, conv)
    assert before[2] == ["from the laptop"] and len(before[0]) == 1
    owner.checkpoint(conv, compact=True)
    assert answers(owner, conv) == before
    owner._folds.authorities.clear()  # rebuilt from the snapshot and the headers alone
    assert answers(owner, conv) == before
    laptop.say(conv, "user", "after the checkpoint")
    sync(owner, laptop)
    with pytest.raises(AuthorityError):
        phone.say(conv, "user", "still locked out")


def test_a_fresh_replica_adopts_a_compacted_rooted_conversation_and_judges_what_follows() -> None:
    clock = ManualClock(T0)
    owner, laptop, phone, conv = team_with_a_revoked_phone(clock)
    owner.checkpoint(conv, compact=True)
    late = laptop.say(conv, "user", "written after the checkpoint")
    found = compaction_of(owner.store, conv)
    assert found is not None
    fresh = device(3, clock)
    fresh.ingest([late.data])  # waits for its parents
    report = fresh.adopt(found.record, found.snapshot, found.cover)
    assert late.cid in report.accepted
    assert answers(fresh, conv)[:2] == answers(owner, conv)[:2]
    own = [r for r in phone.records(conv) if r.actor == phone.actor][-1]
    forged = sign_record(phone.key, conv=conv, seq=own.seq + 1, hlc=(T0 + 1_000, 0),
                         parents=[*fresh.heads(conv), own.cid],
                         kind="user_message", payload={"content": "let me back in"})
    assert [r.rule for r in fresh.ingest([forged.data]).rejected] == ["authority"]


@pytest.mark.parametrize("batch", [1, 7, 40, 1000])
def test_a_rooted_conversation_ingests_whole_in_batches_of_any_size(batch: int) -> None:
    clock = ManualClock(T0)
    owner, writer = device(0, clock), device(1, clock)
    conv = rooted(owner)
    grant(owner, conv, writer, "read", "write")
    sync(owner, writer)
    for i in range(60):
        writer.say(conv, "user", f"turn {i}")
    datas = [r.data for r in writer.records(conv)]
    fresh = device(2, clock)
    for lo in range(0, len(datas), batch):
        report = fresh.ingest(datas[lo:lo + batch])
        assert not report.rejected
    assert fresh.transcript(conv) == writer.transcript(conv)
    assert len(fresh.transcript(conv)) == 60


def test_writes_and_ingests_keep_one_authority_state_not_a_rebuild_each() -> None:
    clock = ManualClock(T0)
    owner, laptop = device(0, clock), device(1, clock)
    conv = rooted(owner)
    grant(owner, conv, laptop, "read", "write")
    state = owner.authority(conv).state
    for i in range(20):
        owner.say(conv, "user", f"turn {i}")
        laptop.ingest([r.data for r in owner.records(conv)])
        laptop.say(conv, "user", f"reply {i}")
        owner.ingest([r.data for r in laptop.records(conv)])
    assert owner.authority(conv).state is state  # kept and extended, never rebuilt


def hand_signed(key: SigningKey, conv: str, wall: int, kind: str, payload: dict[str, object]) -> bytes:
    """A parentless record signed without `sign_record`'s checks, as a hostile peer would."""
    unsigned = {"conv": conv, "actor": key.public, "seq": 1, "hlc": [wall, 0], "parents": [],
                "kind": kind, "payload": payload, "refs": []}
    return codec.encode({**unsigned, "sig": key.sign(signing_bytes(unsigned))})


@pytest.mark.parametrize("attack", ["backdated genesis", "concurrent genesis", "parentless turn"])
@pytest.mark.parametrize("first", [True, False], ids=["stranger syncs first", "owner first"])
def test_a_stranger_cannot_claim_the_root(attack: str, first: bool) -> None:
    clock = ManualClock(T0)
    owner, stranger, fresh = device(0, clock), device(2, clock), device(3, clock)
    conv = rooted(owner)
    kind, payload = ("user_message", {"content": "first!"}) if attack == "parentless turn" else (
        "genesis", {"nonce": NONCE, "title": "mine now"})
    wall = 1 if attack == "backdated genesis" else T0
    forged = hand_signed(stranger.key, conv, wall, kind, payload)
    honest = [r.data for r in owner.records(conv)]
    batches = [[forged], honest] if first else [honest, [forged]]
    rules = [r.rule for batch in batches for r in fresh.ingest(batch).rejected]
    assert rules == ["genesis"]
    assert fresh.authority(conv).owner == owner.actor
    assert not fresh.authority(conv).who_can(stranger.actor, "read").allowed


def test_a_kind_the_format_does_not_know_is_refused_as_such_in_a_rooted_conversation() -> None:
    owner = device(0, ManualClock(T0))
    conv = rooted(owner)
    with pytest.raises(UnknownKindError):
        owner.write(conv, "telepathy", {"content": "x"})


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "sqlite"])
def test_the_authority_state_follows_commits_rollbacks_and_a_second_writer_on_one_store(
    tmp_path: Path, on_disk: bool,
) -> None:
    clock = ManualClock(T0)
    owner, laptop = device(0, clock), device(1, clock)
    conv = rooted(owner)
    grant(owner, conv, laptop, "read", "write")
    revoked = owner.write(conv, "revocation", {"grantee": laptop.actor, "rights": ["write"]})
    regranted = owner.write(conv, "grant", {"grantee": laptop.actor, "rights": ["read", "write"]})
    store = SqliteStore(tmp_path / "shared.sqlite") if on_disk else MemoryStore()
    here, there = (Replica(store, SigningKey(bytes([i + 90]) * 32), clock=clock) for i in range(2))
    genesis_and_grant = [r.data for r in owner.records(conv)][:2]

    def may_write() -> bool:
        return here.authority(conv).who_can(laptop.actor, "write").allowed

    here.ingest(genesis_and_grant)
    assert may_write()
    def revoke_then_roll_back() -> None:
        with store.transaction():
            here.ingest([revoked.data])
            assert not may_write()
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError, match="roll back"):
        revoke_then_roll_back()
    assert may_write()  # the revocation went with the transaction
    there.ingest([revoked.data])  # stored by another replica: read back from the store
    assert not may_write()
    here.ingest([regranted.data])  # added while planning: not read back, the cursor moves past it
    assert may_write()
    again = owner.write(conv, "revocation", {"grantee": laptop.actor, "rights": ["write"]})
    there.ingest([again.data])  # after that cursor, by the other replica
    assert not may_write()
