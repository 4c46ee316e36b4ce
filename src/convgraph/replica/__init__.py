"""The replica: a store, this device's key and a clock, and the public API over them.

The facade (`Replica`) is in `facade`; every other module of this package is one concern of it
(docs/architecture.md). Importing the package gives the facade's public names.
"""

from convgraph.replica.drafts import Draft
from convgraph.replica.facade import DB_FILE, KEY_FILE, Config, Replica, resume

__all__ = ["DB_FILE", "KEY_FILE", "Config", "Draft", "Replica", "resume"]
