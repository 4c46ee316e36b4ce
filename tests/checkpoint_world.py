"""Helpers for the checkpoint and witness tests: replicas of one legacy conversation and
checkpoints written by hand, true or false, at any heads."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from convgraph import Config, Replica
from convgraph.core.cid import CID
from convgraph.core.keys import SigningKey
from convgraph.core.record import Record
from convgraph.integrity.checkpoints import causal_past
from convgraph.projections import state as state_
from convgraph.replica.checkpointing import ConvView

CONV = "c"


def replica(seed: int | None = None) -> Replica:
    key = SigningKey(bytes([seed]) * 32) if seed is not None else None
    return Replica.in_memory(key, config=Config(legacy_writes=True))


def say(r: Replica, n: int, conv: str = CONV) -> list[Record]:
    return [r.say(conv, "user", f"turn {i}") for i in range(n)]


def true_payload(r: Replica, heads: Iterable[CID], conv: str = CONV) -> dict[str, Any]:
    """The payload of a checkpoint at `heads` that checks out over the records `r` holds."""
    heads = sorted(set(heads))
    past = causal_past(heads, ConvView(r.store, conv).lookup).held
    folded = state_.ConvState()
    for cid in sorted(past):
        data = r.store.get(cid)
        assert data is not None
        state_.apply(folded, state_.entry_from_bytes(cid, data))
    return {"heads": heads, "count": len(past), "snapshot": state_.snapshot_cid(state_.snapshot(folded))}


def checkpoint_at(r: Replica, heads: Iterable[CID], conv: str = CONV, **override: Any) -> Record:
    """A checkpoint by `r` at `heads` (true unless `override` changes its payload)."""
    return r.write(conv, "checkpoint", {**true_payload(r, heads, conv), **override})


def copy(source: Replica, target: Replica, conv: str = CONV) -> None:
    """Every record `source` holds of `conv` into `target`."""
    target.ingest([rec.data for rec in source.records(conv)])
