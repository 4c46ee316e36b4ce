"""Rooted conversations through the replica: `create` writes the genesis, and a replica as
shipped refuses to write into a legacy conversation while still ingesting it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from convgraph import (
    Config,
    Draft,
    GenesisError,
    LegacyConversationError,
    ManualClock,
    Record,
    Replica,
    SchemaError,
    conv_id,
    is_rooted,
    sync_replicas,
)

pytestmark = pytest.mark.usefixtures("product_defaults")  # these replicas run as shipped


def test_create_writes_the_genesis_of_an_id_derived_from_key_and_nonce(replica: Replica) -> None:
    nonce = bytes(range(16))
    conv = replica.create("design review", nonce=nonce)
    assert conv == conv_id(replica.actor, nonce) and is_rooted(conv)
    (genesis,) = replica.records(conv)
    assert (genesis.kind, genesis.seq, genesis.parents, genesis.branch) == ("genesis", 1, (), None)
    assert genesis.payload == {"nonce": nonce, "title": "design review"}
    assert genesis.actor == replica.actor and replica.heads(conv) == [genesis.cid]


def test_create_picks_a_fresh_random_nonce_and_leaves_out_an_absent_title(replica: Replica) -> None:
    a, b = replica.create(), replica.create()
    assert a != b and is_rooted(a) and is_rooted(b)
    (genesis,) = replica.records(a)
    assert set(genesis.payload) == {"nonce"} and len(genesis.payload["nonce"]) == 16
    assert conv_id(replica.actor, genesis.payload["nonce"]) == a


def test_a_second_genesis_for_one_id_is_refused_and_writes_nothing(replica: Replica) -> None:
    conv = replica.create("first", nonce=bytes(16))
    with pytest.raises(GenesisError, match="exists already"):
        replica.create("second", nonce=bytes(16))
    assert [r.payload.get("title") for r in replica.records(conv)] == ["first"]
    with pytest.raises(SchemaError):
        replica.create(nonce=b"short")


def test_writes_follow_the_genesis_and_another_replica_takes_them(clock: ManualClock) -> None:
    owner, other = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    conv = owner.create("trip")
    said = owner.say(conv, "user", "Plan three days in Lisbon.")
    (genesis,) = (r for r in owner.records(conv) if r.kind == "genesis")
    assert said.parents == (genesis.cid,) and said.seq == 2
    report = other.ingest([r.data for r in owner.records(conv)])
    assert len(report.accepted) == 2 and other.heads(conv) == [said.cid]
    assert [t.text for t in other.transcript(conv)] == ["Plan three days in Lisbon."]


_WRITES: dict[str, Callable[[Replica, str, Record], Any]] = {
    "write": lambda r, c, _: r.write(c, "user_message", {"content": "x"}),
    "write_many": lambda r, c, _: r.write_many(c, [Draft("user_message", {"content": "x"})]),
    "write_many of nothing": lambda r, c, _: r.write_many(c, []),
    "say": lambda r, c, _: r.say(c, "user", "x"),
    "record_response": lambda r, c, _: r.record_response(
        c, {"role": "assistant", "content": [{"type": "text", "text": "x"}]}, provider="anthropic"),
    "branch": lambda r, c, at: r.branch(c, "alt", at.cid),
    "merge": lambda r, c, _: r.merge(c, "alt"),
    "checkpoint": lambda r, c, _: r.checkpoint(c),
    "checkpoint --compact": lambda r, c, _: r.checkpoint(c, compact=True),
}


@pytest.mark.parametrize("how", sorted(_WRITES))
def test_every_local_write_into_a_legacy_conversation_is_refused(how: str, clock: ManualClock) -> None:
    old = Replica.in_memory(clock=clock, config=Config(legacy_writes=True))
    first = old.write("demo", "user_message", {"content": "from before"})
    replica = Replica.in_memory(clock=clock)
    assert replica.ingest([first.data]).accepted == [first.cid]  # ingest is unchanged
    with pytest.raises(LegacyConversationError) as caught:
        _WRITES[how](replica, "demo", first)
    assert caught.value.conv == "demo" and caught.value.rule == "legacy"
    assert "'demo' is a legacy conversation" in str(caught.value)
    assert "convgraph migrate demo" in str(caught.value)
    assert replica.records("demo") == [first] and replica.store.snapshot("demo") is None


def test_the_refusal_names_a_shell_safe_migrate_command(replica: Replica) -> None:
    with pytest.raises(LegacyConversationError, match=r"convgraph migrate 'team chat; rm -rf x'"):
        replica.say("team chat; rm -rf x", "user", "hi")
    assert replica.conversations() == []


def test_a_new_conversation_on_a_fresh_replica_needs_create(tmp_path: Path) -> None:
    with Replica.open(tmp_path / "r") as replica:
        with pytest.raises(LegacyConversationError):
            replica.write("default", "user_message", {"content": "hi"})
        conv = replica.create()
        assert replica.write(conv, "user_message", {"content": "hi"}).seq == 2
        assert replica.conversations() == [conv]


def test_legacy_writes_is_a_replica_option(clock: ManualClock) -> None:
    assert Config().legacy_writes is False
    replica = Replica.in_memory(clock=clock, config=Config(legacy_writes=True))
    assert replica.say("demo", "user", "still allowed").seq == 1


def test_a_legacy_writer_and_a_product_replica_sync_both_ways(clock: ManualClock) -> None:
    writer = Replica.in_memory(clock=clock, config=Config(legacy_writes=True))
    product = Replica.in_memory(clock=clock)
    writer.say("demo", "user", "one")
    conv = product.create("rooted")
    report = sync_replicas(writer, product, ["demo", conv])
    assert report.converged
    assert writer.heads("demo") == product.heads("demo") and writer.heads(conv) == product.heads(conv)
