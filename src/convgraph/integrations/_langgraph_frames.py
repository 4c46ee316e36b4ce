"""Keyframes of a messages channel: a checkpoint record that holds the channel's whole list of
entries (`spans` with no `base`) instead of a delta against its parent, so rebuilding a list
never reads back more than a bounded chain of deltas (docs/integrations.md, "What maps to what").

A keyframe is due when the chain since the last one would pass `max(KEYFRAME_MIN, n //
KEYFRAME_SHARE)` deltas, `n` the list's length: its bytes (about 36 a link) come back every
`n / KEYFRAME_SHARE` checkpoints at most, so a checkpoint's share stays about constant and the
store still grows with the steps, not steps x messages. A list whose encoding passes
`_large.THRESHOLD` is stored as an artifact (raw DAG-CBOR of the list) whose tag stands for
`spans`. Invariant: `unframed(r, framed(r, entries)) == entries`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.tagged import artifact_tag
from convgraph.errors import AdapterError
from convgraph.integrations._large import THRESHOLD, loaded

if TYPE_CHECKING:
    from convgraph.integrations._langgraph_thread import Thread
    from convgraph.replica import Replica

KEYFRAME_MIN: Final = 64  # deltas a chain may always hold
KEYFRAME_SHARE: Final = 16  # past that, a list of n entries allows n // 16


def keyframe_due(thread: Thread, base: CID, channel: str, length: int) -> bool:
    """Whether a delta on `base` would make the chain back to a full list longer than allowed
    for a list of `length` entries (a record the fold does not hold ends the count: a keyframe)."""
    limit = max(KEYFRAME_MIN, length // KEYFRAME_SHARE)
    depth = 1
    at: CID | None = base
    while at is not None:
        ck = thread.by_cid.get(at)
        if ck is None:
            return True
        delta = ck.tree.get("messages", {}).get(channel)
        if type(delta) is not dict:
            return True
        depth += 1
        if depth > limit:
            return True
        at = delta.get("base")
    return False


def framed(replica: Replica, entries: list[Any]) -> Any:
    """A keyframe's `spans`: the entries themselves, or the tag of the artifact holding their
    DAG-CBOR when it passes `THRESHOLD`."""
    data = codec.encode(entries)
    if len(data) <= THRESHOLD:
        return list(entries)
    return artifact_tag(replica.put(data), len(data), raw=True)


def unframed(replica: Replica, held: Any) -> list[Any]:
    """The spans a delta's `spans` stands for: itself, or the list its artifact holds."""
    if type(held) is list:
        return held
    found = codec.decode(loaded(replica, held))
    if type(found) is not list:
        raise AdapterError(f"keyframe artifact {held.get('cid')} holds no list of entries")
    return found
