"""A module imported on first use, so that importing convgraph does not pay for it.

`import convgraph` and the CLI's local commands never touch the network: deferring httpx
keeps its import (about a third of `import convgraph`) off their path. Invariant: the real
module is imported at the first attribute access, and every access after is the real one's.
"""

from __future__ import annotations

import importlib
from typing import Any


class Deferred:
    """Stands for the module `name` until an attribute is read, then imports it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        # import_module is a sys.modules lookup once the module is loaded
        return getattr(importlib.import_module(self._name), attr)
