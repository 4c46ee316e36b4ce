"""`LastN`: keeps the final n items of an event stream, refuses replay streams."""

from __future__ import annotations

from typing import Any

import pytest

from convgraph.errors import ProjectionError, RetentionRefusedError
from convgraph.projections.retention import LastN
from convgraph.projections.surfaces import Surface

ITEMS = ("a", "b", "c", "d")


@pytest.mark.parametrize(
    ("n", "want"),
    [(0, []), (1, ["d"]), (3, ["b", "c", "d"]), (4, list(ITEMS)), (9, list(ITEMS))],
)
def test_keep_the_last_n(n: int, want: list[str]) -> None:
    assert LastN(n).keep(ITEMS) == want
    assert LastN(n).keep(list(ITEMS), Surface.EVENT) == want
    assert LastN(n).keep([]) == []


def test_keep_returns_a_new_list() -> None:
    items = ["a", "b"]
    kept = LastN(5).keep(items)
    kept.append("z")
    assert items == ["a", "b"]


@pytest.mark.parametrize("n", [-1, "3", 2.0, True, None])
def test_a_bad_count_is_a_projection_error(n: Any) -> None:
    with pytest.raises(ProjectionError) as info:
        LastN(n)
    assert info.value.rule == "projection"


@pytest.mark.parametrize("n", [0, 2])
def test_a_replay_stream_is_never_trimmed(n: int) -> None:
    with pytest.raises(RetentionRefusedError) as info:
        LastN(n).keep(ITEMS, Surface.REPLAY)
    assert info.value.rule == "retention"
    assert isinstance(info.value, ProjectionError)


@pytest.mark.parametrize("surface", [s for s in Surface if s is not Surface.REPLAY])
def test_other_surfaces_may_be_windowed(surface: Surface) -> None:
    assert LastN(2).keep(ITEMS, surface) == ["c", "d"]
