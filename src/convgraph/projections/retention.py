"""Retention rules: which part of a surface a view keeps.

`LastN(n)` keeps the last n items in canonical order; it applies to event streams (the
transcript's turns) and is refused for replay streams, whose every value depends on all
earlier records. Invariant: a rule is a pure function of the items it is given, so
retention over a compacted replica equals retention over a full fold of the same records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from convgraph.errors import ProjectionError
from convgraph.projections.surfaces import Surface, check_retention

T = TypeVar("T")


@dataclass(frozen=True)
class LastN:
    """Keep the final `n` items (n ≥ 0) in canonical order."""

    n: int

    def __post_init__(self) -> None:
        if type(self.n) is not int or self.n < 0:
            raise ProjectionError(f"LastN needs a count >= 0, not {self.n!r}")

    def keep(self, items: Sequence[T], surface: Surface = Surface.EVENT) -> list[T]:
        """The retained items; a replay `surface` raises `RetentionRefusedError`."""
        check_retention(surface)
        return list(items[len(items) - self.n :]) if self.n else []
