"""Migrating a legacy conversation: a rooted copy of its visible transcript, signed by the
migrating key, the original untouched, and a second run copying nothing twice."""

from __future__ import annotations

import pytest

from convgraph import (
    Config,
    ManualClock,
    MigrationError,
    NotFoundError,
    Record,
    Replica,
    SigningKey,
    ToolCall,
    is_rooted,
    migrate,
)
from convgraph.core.cid import CID
from convgraph.replica.migration import find_migration, migrated_cid

pytestmark = pytest.mark.usefixtures("product_defaults")

OLD = "demo"


@pytest.fixture
def legacy(clock: ManualClock) -> Replica:
    """Two version-1 writers' conversation, as this replica received it."""
    alice = Replica.in_memory(SigningKey(bytes([1]) * 32), clock=clock, config=Config(legacy_writes=True))
    bob = Replica.in_memory(SigningKey(bytes([2]) * 32), clock=clock, config=Config(legacy_writes=True))
    alice.say(OLD, "user", "Plan three days in Lisbon.")
    clock.advance(10)
    bob.ingest([r.data for r in alice.records(OLD)])
    bob.say(OLD, "assistant", "Checking the weather.", tool_calls=[ToolCall("c1", "weather", {"city": "Lisbon"})])
    clock.advance(10)
    bob.say(OLD, "tool", "sunny", tool_use_id="c1")
    clock.advance(10)
    typo = bob.say(OLD, "assistant", "Day 1: Alfma.")
    clock.advance(10)
    bob.write(OLD, "supersession", {"target": typo.cid, "content": "Day 1: Alfama."})
    clock.advance(10)
    oops = alice.write(OLD, "user_message", {"speaker": "alice", "text": "ignore this"})  # legacy shape
    alice.ingest([r.data for r in bob.records(OLD)])
    clock.advance(10)
    alice.write(OLD, "retraction", {"target": oops.cid})
    clock.advance(10)
    alice.write(OLD, "user_message", {"speaker": "alice", "text": "Budget 800 EUR.", "meta": {"app": "x"}})
    bob.ingest([r.data for r in alice.records(OLD)])
    here = Replica.in_memory(clock=clock)
    assert len(here.ingest([r.data for r in bob.records(OLD)]).accepted) == 8
    return here


def _copies(replica: Replica, conv: str) -> list[Record]:
    return [r for r in replica.records(conv) if r.kind != "genesis"]


def test_migrate_roots_a_copy_of_the_visible_transcript(legacy: Replica) -> None:
    before = legacy.records(OLD)
    result = migrate(legacy, OLD)
    assert is_rooted(result.conv) and (result.created, result.copied, result.already) == (True, 5, 0)
    (genesis,) = [r for r in legacy.records(result.conv) if r.kind == "genesis"]
    assert genesis.actor == legacy.actor and genesis.payload["migrated_from"] == OLD
    assert set(genesis.refs) == set(legacy.heads(OLD)) and "title" not in genesis.payload

    old_turns, new_turns = legacy.transcript(OLD), legacy.transcript(result.conv)
    assert [(t.role, t.content, t.tool_calls, t.tool_use_id) for t in new_turns] == [
        (t.role, t.content, t.tool_calls, t.tool_use_id) for t in old_turns
    ]
    assert [t.text for t in new_turns][-2:] == ["Day 1: Alfama.", "Budget 800 EUR."]  # superseded, retracted
    copies = _copies(legacy, result.conv)
    assert all(r.actor == legacy.actor for r in copies)
    assert [r.kind for r in copies] == ["user_message", "agent_message", "tool_result", "agent_message",
                                         "user_message"]
    for copy, turn in zip(copies, old_turns, strict=True):
        assert copy.payload["meta"]["migrated"] == {
            "cid": turn.op, "actor": turn.author, "hlc": [turn.hlc.wall_ms, turn.hlc.counter],
        }
    assert copies[0].payload["conversation_id"] == result.conv  # `say` named the old conversation
    assert copies[-1].payload["meta"]["app"] == "x" and copies[-1].payload["speaker"] == "alice"
    assert "text" not in copies[3].payload  # the superseded turn carries what was shown, once
    assert legacy.records(OLD) == before  # the legacy conversation is left as it was
    assert find_migration(legacy, OLD) == result.conv


def test_a_second_migrate_copies_nothing_twice_and_continues_with_what_is_new(
    legacy: Replica, clock: ManualClock
) -> None:
    first = migrate(legacy, OLD)
    again = migrate(legacy, OLD)
    assert (again.conv, again.created, again.copied, again.already) == (first.conv, False, 0, 5)
    assert len(_copies(legacy, first.conv)) == 5

    late = Replica.in_memory(SigningKey(bytes([3]) * 32), clock=clock, config=Config(legacy_writes=True))
    late.ingest([r.data for r in legacy.records(OLD)])
    clock.advance(10)
    news = late.say(OLD, "user", "One more thing.")
    legacy.ingest([news.data])
    third = migrate(legacy, OLD)
    assert (third.conv, third.created, third.copied, third.already) == (first.conv, False, 1, 5)
    assert [migrated_cid(r.payload) for r in _copies(legacy, first.conv)][-1] == news.cid
    assert sum(r.kind == "genesis" for r in legacy.records(first.conv)) == 1


def test_a_merge_shows_its_synthesis_and_the_copy_says_it(clock: ManualClock) -> None:
    v1 = Replica.in_memory(clock=clock, config=Config(legacy_writes=True))
    start = v1.say(OLD, "user", "A or B?")
    v1.branch(OLD, "alt", start.cid)
    v1.say(OLD, "assistant", "B, on a branch", branch="alt")
    merge = v1.merge(OLD, "alt", summary="we took B")
    here = Replica.in_memory(clock=clock)
    here.ingest([r.data for r in v1.records(OLD)])
    result = migrate(here, OLD)
    assert [t.text for t in here.transcript(result.conv)] == ["A or B?", "we took B"]
    synthesis = _copies(here, result.conv)[-1]
    assert synthesis.kind == "agent_message" and migrated_cid(synthesis.payload) == merge.cid
    assert all(r.branch is None for r in here.records(result.conv))


def test_migration_of_another_key_is_not_continued(legacy: Replica, clock: ManualClock) -> None:
    other = Replica.in_memory(clock=clock)
    other.ingest([r.data for r in legacy.records(OLD)])
    theirs = migrate(other, OLD)
    legacy.ingest([r.data for r in other.records(theirs.conv)])
    mine = migrate(legacy, OLD)
    assert mine.created and mine.conv != theirs.conv and mine.copied == 5


def test_only_a_legacy_conversation_that_is_held_can_be_migrated(replica: Replica) -> None:
    with pytest.raises(NotFoundError, match="no conversation 'nothing'"):
        migrate(replica, "nothing")
    rooted = replica.create()
    with pytest.raises(MigrationError, match="rooted conversation already"):
        migrate(replica, rooted)
    assert replica.conversations() == [rooted]


def test_migrated_cid_reads_only_a_cid() -> None:
    cid = CID.of_record(b"x")
    assert migrated_cid({"meta": {"migrated": {"cid": cid}}}) == cid
    assert migrated_cid({"meta": {"migrated": {"cid": str(cid)}}}) is None
    assert migrated_cid({"meta": {"migrated": "x"}}) is None
    assert migrated_cid({"meta": "x"}) is None
    assert migrated_cid({}) is None
