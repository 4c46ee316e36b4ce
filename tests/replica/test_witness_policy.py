"""The witness policy (docs/integrity.md §7.4): two configured witnesses never share a name or a
key, whether added one by one, by `convgraph witness add`, or read from `witnesses.json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.test_sync_cli import run
from convgraph.errors import WitnessConfigError
from convgraph.replica.witness_policy import POLICY_FILE, WitnessPolicy, load, save, witness

KEY_A, KEY_B = "aa" * 32, "bb" * 32


def test_adding_a_second_witness_with_the_same_key_is_refused() -> None:
    policy = WitnessPolicy().add(witness("one", KEY_A, "http://127.0.0.1:1"))
    with pytest.raises(WitnessConfigError, match="share a name or a key"):
        policy.add(witness("two", KEY_A, "http://127.0.0.1:2"))
    # the same name replaces the witness, whatever its key
    assert policy.add(witness("one", KEY_B, "http://127.0.0.1:2")).witnesses[0].key.hex() == KEY_B
    both = policy.add(witness("two", KEY_B, "http://127.0.0.1:2"))
    assert [w.name for w in both.witnesses] == ["one", "two"]


@pytest.mark.parametrize("shared", ["key", "name"])
def test_a_configuration_file_naming_one_key_or_name_twice_is_refused_when_loaded(
    tmp_path: Path, shared: str,
) -> None:
    save(tmp_path, WitnessPolicy().add(witness("one", KEY_A, "http://127.0.0.1:1")))
    body = json.loads((tmp_path / POLICY_FILE).read_text())
    twin = dict(body["witnesses"][0], url="http://127.0.0.1:2")
    twin["name" if shared == "key" else "key"] = "two" if shared == "key" else KEY_B
    body["witnesses"].append(twin)
    (tmp_path / POLICY_FILE).write_text(json.dumps(body))
    with pytest.raises(WitnessConfigError, match="share a name or a key"):
        load(tmp_path)


def test_witness_add_refuses_a_key_already_configured_and_keeps_the_policy(tmp_path: Path) -> None:
    run(tmp_path, "init")
    run(tmp_path, "witness", "add", "one", KEY_A, "http://127.0.0.1:1")
    refused = run(tmp_path, "witness", "add", "two", KEY_A, "http://127.0.0.1:2", ok=False)
    assert refused.returncode != 0 and "share a name or a key" in refused.stderr
    listed = json.loads(run(tmp_path, "witness", "list", "--json").stdout)
    assert [w["name"] for w in listed["witnesses"]] == ["one"]
