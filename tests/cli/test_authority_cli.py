"""The README's walkthrough, as processes: an owner, a second device, a stranger (issue 10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import init, run

from convgraph import Replica
from convgraph.cli.sync import _whole_allow
from convgraph.core.keys import actor_text
from convgraph.errors import AccessConfigError


def test_two_devices_and_a_stranger(tmp_path: Path) -> None:
    laptop, phone, stranger = tmp_path / "laptop", tmp_path / "phone", tmp_path / "stranger"
    init(laptop, phone, stranger)
    conv = json.loads(run(laptop, "new", "team plan", "--alias", "team", "--json").stdout)["conv"]
    run(laptop, "say", "--conv", "team", "Kick-off at 10.")
    device = json.loads(run(phone, "device", "add", "--json").stdout)
    key = device["actor"]
    assert device["grant_command"] == f"convgraph grant {key} read write --conv CONVERSATION"
    run(laptop, "grant", key, "write", "--conv", "team")
    run(phone, "sync", str(laptop), "--conv", conv)
    run(phone, "say", "--conv", conv, "On my way.")
    run(laptop, "sync", str(phone), "--conv", "team")
    run(stranger, "sync", str(laptop), "--conv", conv)
    refused = run(stranger, "say", "--conv", conv, "Ship it.", ok=False)
    assert refused.returncode == 2 and "lacks `write`" in refused.stderr and "convgraph why" in refused.stderr
    why = json.loads(run(laptop, "why", key, "write", "--conv", "team", "--json").stdout)
    assert why["allowed"] and len(why["chain"]) == 2
    listed = json.loads(run(laptop, "members", "--conv", "team", "--json").stdout)
    assert {m["actor"] for m in listed["members"]} == {key, listed["owner"]}
    revocation = run(laptop, "revoke", key, "--conv", "team").stdout.strip()
    run(phone, "sync", str(laptop), "--conv", conv)
    again = run(phone, "say", "--conv", conv, "still here?", ok=False)
    assert again.returncode == 2 and f"revoked by {revocation}" in again.stderr.replace("\n", "")
    why_not = json.loads(run(laptop, "why", key, "write", "--conv", "team", "--json").stdout)
    assert not why_not["allowed"] and why_not["blocked_by"] == [revocation]
    turns = json.loads(run(laptop, "transcript", "--conv", "team", "--format", "json").stdout)["turns"]
    assert [t["content"][0]["text"] for t in turns] == ["Kick-off at 10.", "On my way."]


def test_why_reads_the_chain_from_a_compacted_conversation(tmp_path: Path) -> None:
    laptop, phone = tmp_path / "laptop", tmp_path / "phone"
    init(laptop, phone)
    run(laptop, "new", "plan", "--alias", "team")
    key = json.loads(run(phone, "device", "add", "--json").stdout)["actor"]
    grant = run(laptop, "grant", key, "write", "--conv", "team").stdout.strip()
    run(laptop, "checkpoint", "--compact", "--conv", "team")  # the grant's bytes are gone
    why = run(laptop, "why", key, "write", "--conv", "team").stdout
    assert "may write" in why and grant in why and "grants" in why


def test_an_actor_may_be_cut_short_where_one_is_taken(tmp_path: Path) -> None:
    laptop, phone = tmp_path / "laptop", tmp_path / "phone"
    init(laptop, phone)
    run(laptop, "new", "team plan", "--alias", "team")
    device = json.loads(run(phone, "device", "add", "--json").stdout)
    key, print_ = device["actor"], device["fingerprint"]
    unknown = run(laptop, "grant", key[:8], "write", "--conv", "team", ok=False)  # never seen here
    assert unknown.returncode == 2 and "a short id names only a key the replica knows" in unknown.stderr
    assert "whole 52-character actor id" in unknown.stderr.replace("\n", " ")
    run(laptop, "grant", key, "write", "--conv", "team")  # a new key is given whole
    for short in (key[:6], print_[:8]):  # the start of the id, or of the fingerprint `log` prints
        why = json.loads(run(laptop, "why", short, "write", "--conv", "team", "--json").stdout)
        assert why["actor"] == key and why["allowed"]
    taken = run(laptop, "revoke", print_[:8], "write", "--conv", "team").stdout.strip()
    assert json.loads(run(laptop, "why", key, "write", "--conv", "team", "--json").stdout)["blocked_by"] == [taken]
    lost = run(laptop, "device", "revoke", key[:10], "--conv", "team").stdout.strip()
    gone = json.loads(run(laptop, "why", key, "read", "--conv", "team", "--json").stdout)
    assert not gone["allowed"] and gone["blocked_by"] == [lost]
    twins = ["a" * 50 + "ea", "a" * 50 + "ia"]  # two keys whose ids share 50 characters
    for twin in twins:
        run(laptop, "grant", twin, "read", "--conv", "team")
    both = run(laptop, "why", "aaaaaaaa", "read", "--conv", "team", ok=False)
    assert both.returncode == 2 and all(t in both.stderr.replace("\n", "") for t in twins)
    assert "matches 2 keys" in both.stderr and "give more characters" in both.stderr.replace("\n", " ")


def test_members_prints_short_ids_and_json_whole_ones(tmp_path: Path) -> None:
    laptop = tmp_path / "laptop"
    init(laptop)
    run(laptop, "new", "team plan", "--alias", "team")
    key = "b" * 51 + "q"
    grant = run(laptop, "grant", key, "write", "--conv", "team").stdout.strip()
    table = run(laptop, "members", "--conv", "team").stdout
    assert key[:12] in table and key not in table and grant[-10:] in table and grant not in table
    assert max(len(line) for line in table.splitlines()) < 90  # unwrapped at 200 columns; whole ids took 175
    listed = json.loads(run(laptop, "members", "--conv", "team", "--json").stdout)
    assert key in {m["actor"] for m in listed["members"]}
    assert any(c["chain"][-1] == grant for m in listed["members"] for c in m["capabilities"])


def test_serve_allow_takes_a_short_actor_the_server_replica_knows(tmp_path: Path) -> None:
    with Replica.open(tmp_path / "server") as server:
        conv = server.create("held")
        me = actor_text(server.actor)
        rules = [f"{me[:6]}={conv}", f"*={conv}:read", f"{me}=x"]
        assert _whole_allow(rules, server) == [f"{me}={conv}"]  # whole ones are left as given
        with pytest.raises(AccessConfigError, match="a short id names only a key the replica knows"):
            _whole_allow([f"{'zzzzzz' if not me.startswith('zz') else 'yyyyyy'}={conv}"], server)
