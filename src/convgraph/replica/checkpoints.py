"""Checkpoints a replica signs of its own folded state, and the witness policy's say over
compacting behind them (docs/conversation.md §6, docs/integrity.md §7.1, §7.4).

A checkpoint names the conversation's current heads, how many records they cover and the
CID of the canonical snapshot of their fold; it names its author's previous checkpoint, so
an author's checkpoints form a chain. With a policy of k > 0 witnesses, compaction waits
until k of them cosigned the checkpoint (`require_witnessed`), so a checkpoint being
written now cannot be compacted behind at once (`refuse_unwritten`). Invariant: the
snapshot covers every surface whole (replay streams included), so compacting behind a
checkpoint trims no history, and nothing is compacted behind an unwitnessed one.
"""

from __future__ import annotations

from typing import Any

from convgraph.core import suggestions
from convgraph.core.cid import CID
from convgraph.errors import UnwitnessedError
from convgraph.integrity.checkpoints import previous_checkpoint
from convgraph.projections import state as state_
from convgraph.projections.state import ConvState
from convgraph.replica.checkpointing import Entries
from convgraph.replica.witness_policy import WitnessPolicy, cosigners
from convgraph.store.base import Store


def claim(folded: ConvState, heads: list[CID], author: bytes) -> tuple[dict[str, Any], list[CID], bytes]:
    """The payload of `author`'s checkpoint of `folded` at `heads`, the records it covers, and
    the snapshot bytes a compaction keeps."""
    covered, data = list(folded.entries), state_.snapshot(folded)
    payload: dict[str, Any] = {"heads": heads, "count": len(covered), "snapshot": state_.snapshot_cid(data)}
    previous = previous_checkpoint(folded.entries.values(), author)
    if previous is not None:  # docs/integrity.md §7.1: an author's checkpoints form a chain
        payload["previous"] = previous
    return payload, covered, data


def refuse_unwritten(policy: WitnessPolicy) -> None:
    """`UnwitnessedError` when `policy` asks for cosignatures: a checkpoint not yet written has none."""
    if policy.k > 0:
        raise UnwitnessedError(
            f"the witness policy asks for {policy.k} cosignatures before compacting, which a checkpoint "
            "not yet written cannot have: nothing was written or dropped (write it without compact, "
            f"have it cosigned, then compact_behind it; `{suggestions.CHECKPOINT_COMPACT}` does all three)",
            cid=None, got=0, k=policy.k)


def require_witnessed(store: Store, cid: CID, policy: WitnessPolicy, entries: Entries) -> None:
    """`UnwitnessedError` unless at least k witnesses of `policy` cosigned checkpoint `cid`."""
    if policy.k == 0:
        return
    got = cosigners(store, cid, policy, entries)
    if len(got) < policy.k:
        raise UnwitnessedError(
            f"checkpoint {cid} is cosigned by {len(got)} of the {policy.k} witnesses "
            "the policy asks for: every record is kept", cid=cid, got=len(got), k=policy.k)
