"""The deletes and copies of `ConvgraphSaver` that write records (docs/integrations.md): the
retractions of `retract_thread`, `delete_for_runs` and `prune`, and `copy_thread`'s re-recording.
Invariant: a checkpoint is retracted with its writes, and a target is retracted once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.base import Checkpoint as LgCheckpoint

from convgraph.core.cid import CID
from convgraph.integrations._langgraph_index import candidates
from convgraph.integrations._langgraph_index_state import State
from convgraph.integrations._langgraph_mapping import config_of, text
from convgraph.integrations._langgraph_thread import Checkpoint, Thread
from convgraph.integrations._large import refs_of
from convgraph.replica.drafts import Draft
from convgraph.replica.facade import Replica


class ConvgraphSaver(Protocol):
    """What the deletes use of `ConvgraphSaver`: its replica, its threads, their checkpoints'
    metadata and tuples, and its own `put` and `retract_thread`."""

    @property
    def replica(self) -> Replica: ...
    def _find(self, thread_id: str) -> str | None: ...
    def _rooted(self, thread_id: str) -> str: ...
    def _thread(self, conv: str) -> Thread: ...
    def _meta(self, ck: Checkpoint) -> CheckpointMetadata: ...
    def _tuple(self, thread: Thread, thread_id: str, ck: Checkpoint) -> CheckpointTuple: ...
    def put(
        self, config: RunnableConfig, checkpoint: LgCheckpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig: ...
    def retract_thread(self, thread_id: str) -> None: ...


def retract_thread(saver: ConvgraphSaver, thread_id: str) -> None:
    """Retract every checkpoint, write and turn of the thread (none held: nothing)."""
    conv = saver._find(text(thread_id, "thread_id"))
    if conv is None:
        return
    thread = saver._thread(conv)
    doomed = [ck.cid for ck in thread.checkpoints.values()]
    doomed += [w[3] for held in thread.writes.values() for w in held.values()]
    _retract(saver.replica, thread, [*doomed, *thread.turns], "LangGraph delete_thread")


def delete_for_runs(saver: ConvgraphSaver, state: State, wanted: set[str]) -> None:
    """Retract the checkpoints (and their writes) whose metadata names one of `wanted` runs,
    among those the thread index `state` names for them."""
    found: dict[str, set[CID]] = {}  # the threads the index names for any of the runs
    for run_id in wanted:
        for _, conv, cids in candidates(state, {"run_id": run_id}, pick=saver._find):
            found.setdefault(conv, set()).update(cids)
    for conv, cids in sorted(found.items()):
        thread = saver._thread(conv)
        doomed = [ck for ck in thread.listed(None)
                  if ck.cid in cids and saver._meta(ck).get("run_id") in wanted]
        _retract(saver.replica, thread, _with_writes(thread, doomed), "LangGraph delete_for_runs")


def prune(saver: ConvgraphSaver, thread_ids: Sequence[str], strategy: str) -> None:
    """`keep_latest`: retract all but each namespace's latest checkpoint; `delete`: all."""
    for thread_id in thread_ids:
        if strategy == "delete":
            saver.retract_thread(thread_id)
            continue
        conv = saver._find(text(thread_id, "thread_id"))
        if conv is None:
            continue
        thread = saver._thread(conv)
        listed = thread.listed(None)
        kept = {tip.cid for ns in {ck.ns for ck in listed} if (tip := thread.latest(ns))}
        doomed = [ck for ck in listed if ck.cid not in kept]
        _retract(saver.replica, thread, _with_writes(thread, doomed), "LangGraph prune keep_latest")


def _retract(replica: Replica, thread: Thread, targets: Iterable[CID], reason: str) -> None:
    fresh = [c for c in dict.fromkeys(targets) if c not in thread.retracted]
    if fresh:
        replica.write_many(thread.conv, [Draft("retraction", {"target": c, "reason": reason})
                                         for c in fresh])
        thread.refresh(replica)


def copy_thread(saver: ConvgraphSaver, source_thread_id: str, target_thread_id: str) -> None:
    """Re-record every live checkpoint of the source, with its writes, in the target thread."""
    conv = saver._find(text(source_thread_id, "thread_id"))
    if conv is None:
        return
    source = saver._thread(conv)
    for ck in sorted(source.listed(None), key=lambda c: (c.ns, c.id)):
        tup = saver._tuple(source, source_thread_id, ck)
        target = config_of(target_thread_id, ck.ns, ck.parent)
        saver.put(target, tup.checkpoint, tup.metadata, dict(tup.checkpoint["channel_versions"]))
        _copy_writes(saver, source, ck, target_thread_id)


def _copy_writes(saver: ConvgraphSaver, source: Thread, ck: Checkpoint, target_thread_id: str) -> None:
    conv = saver._rooted(target_thread_id)
    target = saver._thread(conv)
    branch = target.checkpoints[(ck.ns, ck.id)].branch
    held = saver.replica.entries(source.conv, source.write_records(ck.ns, ck.id) - source.retracted)
    named = [target.checkpoints[(ck.ns, ck.id)].cid]
    for cid in sorted(held):
        saver.replica.write(conv, "code_snapshot", held[cid].payload,
                            refs=refs_of(held[cid].payload) + named, branch=branch)
    target.refresh(saver.replica)


def _with_writes(thread: Thread, checkpoints: Iterable[Checkpoint]) -> list[CID]:
    out: list[CID] = []
    for ck in checkpoints:
        out += [ck.cid, *sorted(thread.write_records(ck.ns, ck.id))]
    return out
