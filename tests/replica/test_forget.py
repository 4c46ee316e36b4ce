"""`Replica.forget`: a conversation leaves this replica's disk and only it. Its records and
artifacts (those no other conversation names) go, its id stays as a tombstone, so neither sync
nor a write brings it back; other replicas keep it whole and verify it as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from convgraph import ForgottenConversationError, Replica, UnknownConversationError
from convgraph.sync.local import sync_replicas


def _two(replica: Replica) -> tuple[str, str]:
    one, two = replica.create("one"), replica.create("two")
    for i in range(5):
        replica.say(one, "user", f"secret {i}")
        replica.say(two, "user", f"kept {i}")
    return one, two


def test_forget_drops_the_conversation_and_keeps_the_others(tmp_path: Path) -> None:
    with Replica.open(tmp_path / "a") as replica:
        one, two = _two(replica)
        shared, alone = replica.put(b"shared bytes"), replica.put(b"only one names these")
        replica.write(one, "user_message", {"content": "see"}, refs=[shared, alone])
        replica.write(two, "user_message", {"content": "see too"}, refs=[shared])
        kept = replica.transcript(two)
        replica.forget(one)
        assert replica.conversations() == [two] and replica.forgotten(one) and not replica.forgotten(two)
        assert replica.transcript(one) == [] and replica.heads(one) == [] and replica.records(one) == []
        assert replica.transcript(two) == kept
        assert replica.get_artifact(shared) == b"shared bytes"
        assert replica.store.has_blocks([alone]) == set()
        assert replica.verify().ok


def test_forgetting_a_conversation_not_held_is_a_typed_error() -> None:
    replica = Replica.in_memory()
    one, _ = _two(replica)
    with pytest.raises(UnknownConversationError, match="is not held") as caught:
        replica.forget("cg1nothingheldhere")
    assert caught.value.conv == "cg1nothingheldhere" and one in caught.value.known
    replica.forget(one)
    with pytest.raises(UnknownConversationError, match="forgotten already"):
        replica.forget(one)


def test_a_forgotten_conversation_is_never_written_again() -> None:
    replica = Replica.in_memory()
    one, _ = _two(replica)
    replica.forget(one)
    with pytest.raises(ForgottenConversationError) as caught:
        replica.say(one, "user", "back?")
    assert caught.value.conv == one and caught.value.rule == "forgotten"
    assert replica.heads(one) == []


def test_sync_does_not_bring_it_back_and_the_peer_keeps_it_whole() -> None:
    ours, peer = Replica.in_memory(), Replica.in_memory()
    one, two = _two(ours)
    sync_replicas(ours, peer)
    whole = [r.cid for r in peer.records(one)]
    ours.forget(one)
    report = sync_replicas(ours, peer)  # every conversation either side holds: not ours forgotten
    assert report.converged and one not in report.convs
    assert ours.conversations() == [two] and ours.heads(one) == []
    assert [r.cid for r in peer.records(one)] == whole and peer.verify().ok
    report = sync_replicas(peer, ours)  # the peer pushes it: refused, rule `forgotten`
    assert ours.heads(one) == [] and ours.conversations() == [two]
    refused = report.convs[one]
    assert not refused.converged and len(refused.rejected_there) == len(whole)
    assert {r.rule for r in refused.rejected_there} == {"forgotten"}
    # pushed one by one by ingest too: each refused with its rule, nothing stored
    ingested = ours.ingest([r.data for r in peer.records(one)])
    assert ingested.accepted == [] and {r.rule for r in ingested.rejected} == {"forgotten"}
    assert ours.verify().ok and peer.verify().ok


def test_vacuum_on_every_store(tmp_path: Path) -> None:
    for replica in (Replica.in_memory(), Replica.open(tmp_path / "v")):
        with replica:
            one, two = _two(replica)
            replica.forget(one)
            replica.vacuum()
            assert replica.conversations() == [two] and replica.verify().ok
