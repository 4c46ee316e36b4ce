"""A store that counts the calls made to it, by method, and passes each on: what the cost
tests compare (how many look-ups, how many blocks read), never a time."""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

from convgraph.store.base import Store


class CountingStore:
    """Wraps a real store; `calls` counts each method called, `args` keeps what each was given."""

    def __init__(self, store: Store) -> None:
        self.inner = store
        self.calls: Counter[str] = Counter()
        self.args: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            # an iterator argument is read here once, and the same items passed on
            args = tuple(list(a) if hasattr(a, "__next__") else a for a in args)
            self.calls[name] += 1
            self.args.append((name, args))
            return attr(*args, **kwargs)

        return counted

    def reset(self) -> None:
        self.calls.clear()
        self.args.clear()

    @property
    def store(self) -> Store:
        return cast(Store, self)
