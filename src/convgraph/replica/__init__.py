"""The replica: a store, this device's key and a clock, and the public API over them.

The facade (`Replica`) is in `facade`; every other module of this package is one concern of it
(docs/architecture.md). The package's names are imported on first use (PEP 562), so importing
one module of it (`replica.home`, as the CLI does for `--help`) does not load the facade.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from convgraph.replica.config import Config
    from convgraph.replica.drafts import Draft
    from convgraph.replica.facade import Replica, resume
    from convgraph.replica.home import DB_FILE, KEY_FILE

_FROM: Final = {
    "DB_FILE": "convgraph.replica.home", "KEY_FILE": "convgraph.replica.home",
    "Config": "convgraph.replica.config", "Draft": "convgraph.replica.drafts",
    "Replica": "convgraph.replica.facade", "resume": "convgraph.replica.facade",
}

__all__ = ["DB_FILE", "KEY_FILE", "Config", "Draft", "Replica", "resume"]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept."""
    module = _FROM.get(name)
    if module is None:  # AttributeError lets `from convgraph.replica import submodule` import it
        raise AttributeError(f"module 'convgraph.replica' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
