"""The README's walkthrough, as processes: an owner, a second device, a stranger (issue 10)."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import init, run


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
