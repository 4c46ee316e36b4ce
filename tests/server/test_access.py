"""The access configuration: nobody unless named; writers read too; `*` means every conversation."""

from __future__ import annotations

import json
import re
import shlex
from itertools import pairwise
from pathlib import Path

import pytest

from convgraph import SigningKey
from convgraph.core.keys import actor_text
from convgraph.errors import AccessConfigError, ConvgraphError, ForbiddenError
from convgraph.server.access import Access

A, B, C = (SigningKey(bytes([i]) * 32).public for i in (1, 2, 3))


def test_rules_grant_exactly_what_they_say() -> None:
    access = Access.from_rules([f"{actor_text(A)}=team", f"{actor_text(B)}=team:read", f"{actor_text(C)}=*"])
    assert access.can_write(A, "team") and access.can_read(A, "team") and not access.can_read(A, "other")
    assert access.can_read(B, "team") and not access.can_write(B, "team")
    assert access.can_write(C, "anything") and access.writable(B, ["team"]) == set()
    with pytest.raises(ForbiddenError) as caught:
        access.check_read(A, ["team", "secret", "hr"])
    assert "hr, secret" in caught.value.reason and caught.value.status == 403


def test_nobody_has_access_by_default() -> None:
    with pytest.raises(ForbiddenError):
        Access().check_read(A, ["c"])


def test_a_configuration_file(tmp_path: Path) -> None:
    path = tmp_path / "access.json"
    path.write_text(json.dumps({"conversations": {"c": {"write": [actor_text(A)], "read": [actor_text(B)]}}}))
    access = Access.load(path).merged(Access.from_rules([f"{actor_text(C)}=d"]))
    assert access.can_write(A, "c") and access.can_read(B, "c") and access.can_write(C, "d")


@pytest.mark.parametrize("raw", [
    [], {"conversations": []}, {"conversations": {"c": {"admin": []}}}, {"conversations": {"c": {"write": "x"}}},
    {"conversations": {"c": {"write": ["not an actor"]}}},
])
def test_a_malformed_configuration_is_refused(raw: object) -> None:
    with pytest.raises(AccessConfigError) as caught:
        Access.from_json(raw)
    assert isinstance(caught.value, ConvgraphError) and caught.value.rule == "access_config"


def test_a_malformed_rule_is_refused() -> None:
    with pytest.raises(AccessConfigError, match="ACTOR=CONV"):
        Access.from_rules(["nobody"])


def test_a_key_reads_what_it_is_granted_and_writes_only_where_it_may() -> None:
    access = Access.from_rules([f"{actor_text(A)}=team", f"{actor_text(B)}=team:read", f"{actor_text(C)}=*"])
    for key in (A, B, C):
        access.check_read(key, ["team"])  # raises nothing
    access.check_read(C, ["team", "hr"])
    assert access.writable(A, ["team", "hr"]) == {"team"}
    assert access.writable(C, ["team", "hr"]) == {"team", "hr"}
    with pytest.raises(ForbiddenError) as caught:
        access.check_read(B, ["team", "secret", "hr", "secret"])
    assert caught.value.message == "no access"
    assert caught.value.reason == f"key {actor_text(B)} may not read conversation(s) hr, secret"


@pytest.mark.parametrize(("raw", "why"), [
    ([], "configuration: expected an object with a 'conversations' object"),
    ({"conversations": []}, "configuration: expected an object with a 'conversations' object"),
    ({"conversations": {"c": {"admin": []}}}, "configuration: conversation 'c' needs {'read': [...], 'write': [...]}"),
    ({"conversations": {"c": "write"}}, "configuration: conversation 'c' needs {'read': [...], 'write': [...]}"),
    ({"conversations": {"c": {"write": "x"}}}, "configuration: 'c'.write must be a list of actor ids"),
    ({"conversations": {"c": {"read": [5]}}}, "configuration: 'c'.read must be a list of actor ids"),
    ({"conversations": {"c": {"write": ["not an actor"]}}}, "configuration: 'c'.write: not an actor id: 'not an actor'"),
    ({"conversations": {"c": {"read": [actor_text(A)[:-1]]}}},
     f"configuration: 'c'.read: not an actor id: {actor_text(A)[:-1]!r}"),
])
def test_a_malformed_configuration_is_refused_saying_where(raw: object, why: str) -> None:
    with pytest.raises(AccessConfigError) as caught:
        Access.from_json(raw)
    assert caught.value.message == why


def test_a_configuration_file_that_cannot_be_used_is_named(tmp_path: Path) -> None:
    path = tmp_path / "access.json"
    with pytest.raises(AccessConfigError, match=f"^cannot read access configuration {path}: "):
        Access.load(path)
    path.write_text("{not json")
    with pytest.raises(AccessConfigError, match=f"^cannot read access configuration {path}: "):
        Access.load(path)
    path.write_text(json.dumps({"conversations": {"c": {"write": "x"}}}))
    with pytest.raises(AccessConfigError) as caught:
        Access.load(path)
    assert caught.value.message == f"{path}: 'c'.write must be a list of actor ids"
    path.write_text(json.dumps({"conversations": {"c": {"write": ["nobody"]}}}))
    with pytest.raises(AccessConfigError) as caught:
        Access.load(path)
    assert caught.value.message == f"{path}: 'c'.write: not an actor id: 'nobody'"


def test_a_rule_splits_at_the_first_equals_sign_and_a_final_read() -> None:
    # conversation names may hold ':' and '=' themselves; actor ids never hold either
    access = Access.from_rules([f"{actor_text(A)}=a=b", f"{actor_text(B)}=x:y:read", f"{actor_text(C)}=x:y"])
    assert access.can_write(A, "a=b") and access.can_read(B, "x:y") and not access.can_write(B, "x:y")
    assert access.can_write(C, "x:y")
    for rule in ("nobody", f"{actor_text(A)}="):
        with pytest.raises(AccessConfigError) as caught:
            Access.from_rules([rule])
        assert caught.value.message == f"access rule {rule!r}: expected ACTOR=CONV or ACTOR=CONV:read"


@pytest.mark.parametrize("rule", ["=team", "nobody=team", f"{actor_text(A).upper()}=team:read"])
def test_a_rule_naming_no_actor_is_refused_naming_the_rule(rule: str) -> None:
    actor = rule.partition("=")[0]
    with pytest.raises(AccessConfigError) as caught:
        Access.from_rules([f"{actor_text(B)}=team", rule])
    assert caught.value.message == f"access rule {rule!r}: not an actor id: {actor!r} (or * for every key)"


def test_a_key_named_nowhere_is_refused_saying_so() -> None:
    access = Access.from_rules([f"{actor_text(A)}=team", f"{actor_text(B)}=*:read"])
    access.check_named(A)  # a writer somewhere, a reader everywhere: both raise nothing
    access.check_named(B)
    with pytest.raises(ForbiddenError) as caught:
        access.check_named(C)
    assert (caught.value.message, caught.value.reason) == (
        "no access", f"key {actor_text(C)} is admitted to no conversation")


def test_a_star_actor_admits_every_key_and_star_names_no_conversation() -> None:
    access = Access.from_rules(["*=team", f"{actor_text(A)}=*", "*=notes:read"])
    assert access.can_write(B, "team") and access.can_write(C, "team") and access.names(C)
    access.check_named(C)  # `--allow '*=team'` lets any key in
    assert access.can_read(B, "notes") and not access.can_write(B, "notes")
    assert not access.can_read(B, "other")
    assert access.can_write(A, "anything")
    # `*` means every conversation here, so a conversation of that name is admitted to nobody
    assert not access.can_write(A, "*") and not access.can_read(B, "*")
    with pytest.raises(ForbiddenError) as caught:
        access.check_read(A, ["*"])
    assert "not a conversation name" in caught.value.reason
    from_file = Access.from_json({"conversations": {"team": {"write": ["*"]}}})
    assert from_file.can_write(C, "team") and not from_file.can_write(C, "other")


def test_a_refusal_names_the_allow_rules_that_would_admit_the_key() -> None:
    access = Access.from_rules([f"{actor_text(A)}=team"])
    with pytest.raises(ForbiddenError) as caught:
        access.check_read(A, ["team", "hr", "it's here"])
    command = re.search(r"`convgraph serve ([^`]*)`", caught.value.hint)
    assert command, caught.value.hint
    words = shlex.split(command[1])  # quoted for a shell: a name may hold anything
    rules = [rule for flag, rule in pairwise(words) if flag == "--allow"]
    assert rules == [f"{actor_text(A)}=hr:read", f"{actor_text(A)}=it's here:read"]
    widened = access.merged(Access.from_rules(rules))
    widened.check_read(A, ["team", "hr", "it's here"])  # raises nothing now
    assert not widened.can_write(A, "hr")  # :read, as the hint says
    with pytest.raises(ForbiddenError) as nowhere:
        Access().check_named(B)
    assert f"`convgraph serve --allow {actor_text(B)}=CONVERSATION`" in nowhere.value.hint
