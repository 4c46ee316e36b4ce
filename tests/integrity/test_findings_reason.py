"""A finding's reason: its summary without the kind, so a line that names the kind says it once."""

from __future__ import annotations

from convgraph.integrity.findings import reason


def test_the_kind_is_cut_from_the_front_only() -> None:
    assert reason("deletion", "deletion: the server receipted x") == "the server receipted x"
    assert reason("deletion", "the server receipted x") == "the server receipted x"
    assert reason("rollback", "deletion: x") == "deletion: x"
