"""Checkpoints a replica signs of its own folded state (docs/conversation.md §6, docs/integrity.md §7.1).

A checkpoint names the conversation's current heads, how many records they cover and the
CID of the canonical snapshot of their fold; it names its author's previous checkpoint, so
an author's checkpoints form a chain. Pure. Invariant: the snapshot covers every surface
whole (replay streams included), so compacting behind a checkpoint trims no history.
"""

from __future__ import annotations

from typing import Any

from convgraph.core.cid import CID
from convgraph.integrity.checkpoints import previous_checkpoint
from convgraph.projections import state as state_
from convgraph.projections.state import ConvState


def claim(folded: ConvState, heads: list[CID], author: bytes) -> tuple[dict[str, Any], list[CID], bytes]:
    """The payload of `author`'s checkpoint of `folded` at `heads`, the records it covers, and
    the snapshot bytes a compaction keeps."""
    covered, data = list(folded.entries), state_.snapshot(folded)
    payload: dict[str, Any] = {"heads": heads, "count": len(covered), "snapshot": state_.snapshot_cid(data)}
    previous = previous_checkpoint(folded.entries.values(), author)
    if previous is not None:  # docs/integrity.md §7.1: an author's checkpoints form a chain
        payload["previous"] = previous
    return payload, covered, data
