"""The access configuration: nobody unless named; writers read too; `*` means every conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from convgraph import SigningKey
from convgraph.core.keys import actor_text
from convgraph.errors import ConvgraphError, ForbiddenError
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
    with pytest.raises(ConvgraphError):
        Access.from_json(raw)


def test_a_malformed_rule_is_refused() -> None:
    with pytest.raises(ConvgraphError, match="ACTOR=CONV"):
        Access.from_rules(["nobody"])
