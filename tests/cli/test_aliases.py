"""Local aliases: how a `--conv` value resolves, which names can be aliases, and the file that
keeps them (read strictly, replaced atomically, edited under a lock)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from convgraph import conv_id
from convgraph.cli import aliases
from convgraph.errors import AliasError

ID = conv_id(bytes(32), bytes(16))
OTHER = conv_id(bytes(32), bytes(range(16)))


def test_resolve_an_alias_to_its_id_and_anything_else_to_itself() -> None:
    table = {"review": ID}
    assert aliases.resolve(table, "review") == ID
    assert aliases.resolve(table, OTHER) == OTHER  # an id names itself
    assert aliases.resolve(table, "demo") == "demo"  # a legacy conversation, by its literal name
    assert aliases.names_of({"b": ID, "a": ID, "c": OTHER}, ID) == ["a", "b"]


@pytest.mark.parametrize("name", ["", "   ", ID, "two\nlines", "tab\there", "x" * 201, "\udcff"])
def test_a_name_that_cannot_be_an_alias_is_refused(name: str) -> None:
    with pytest.raises(AliasError):
        aliases.check_name(name)


def test_a_name_that_can_be_an_alias() -> None:
    for name in ("default", "design review", "démo", "x" * 200, ID[:-1]):
        assert aliases.check_name(name) == name


@pytest.mark.parametrize("data", [b"{nope", b"[]", b'{"a": "demo"}', b'{"a": 1}', f'{{"{ID}": "{ID}"}}'.encode(),
                                  b"\xff"])
def test_a_malformed_alias_file_is_an_error_not_a_guess(data: bytes) -> None:
    with pytest.raises(AliasError):
        aliases.parse(data)


def test_the_file_round_trips_sorted_and_readable(tmp_path: Path) -> None:
    assert aliases.load(tmp_path) == {}
    with aliases.editing(tmp_path) as table:
        table.update({"review": ID, "default": OTHER})
    body = (tmp_path / aliases.ALIASES_FILE).read_text()
    assert body.index('"default"') < body.index('"review"') and body.endswith("}\n")
    assert aliases.load(tmp_path) == {"default": OTHER, "review": ID}
    assert sorted(p.name for p in tmp_path.iterdir()) == [aliases.LOCK_FILE, aliases.ALIASES_FILE]


def test_an_edit_that_fails_or_changes_nothing_writes_nothing(tmp_path: Path) -> None:
    with aliases.editing(tmp_path):
        pass
    assert not (tmp_path / aliases.ALIASES_FILE).exists()

    def fail_midway() -> None:
        with aliases.editing(tmp_path) as table:
            table["review"] = ID
            raise RuntimeError

    with pytest.raises(RuntimeError):
        fail_midway()
    assert aliases.load(tmp_path) == {}
    with pytest.raises(AliasError), aliases.editing(tmp_path) as table:
        table["review"] = "demo"  # only a rooted id can be named
    assert aliases.load(tmp_path) == {}


def test_concurrent_editors_lose_no_alias(tmp_path: Path) -> None:
    barrier = threading.Barrier(8)

    def add(i: int) -> None:
        barrier.wait()
        with aliases.editing(tmp_path) as table:
            table[f"a{i}"] = conv_id(bytes(32), bytes([i]) * 16)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(aliases.load(tmp_path)) == [f"a{i}" for i in range(8)]
