"""The write path of `ConvgraphSaver` (docs/integrations.md): a checkpoint's record, with each
moved channel's value or messages delta, the branch a second child of one parent starts, and a
task's pending writes. Invariant: a message is written once (kept ones are named by position in
the parent's list), and a write names its checkpoint's record when that record is held.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import WRITES_IDX_MAP, ChannelVersions, CheckpointMetadata
from langgraph.checkpoint.base import Checkpoint as LgCheckpoint

from convgraph.core.cid import CID
from convgraph.integrations._langgraph_edits import Edits
from convgraph.integrations._langgraph_frames import framed, keyframe_due
from convgraph.integrations._langgraph_lists import position, spans
from convgraph.integrations._langgraph_thread import (
    CHECKPOINT_PATH,
    LANGUAGE,
    WRITES_NAMED,
    WRITES_PATH,
    Checkpoint,
    Listed,
    Thread,
    path_of,
    version_key,
)
from convgraph.integrations._large import refs_of
from convgraph.replica.facade import Replica


class ConvgraphSaver(Protocol):
    """What the write path uses of `ConvgraphSaver`: its replica, its channels and serde, its
    message loaders, and its `_delta` (a subclass may override it, as a test does)."""

    @property
    def replica(self) -> Replica: ...
    @property
    def messages_channels(self) -> frozenset[str]: ...
    @property
    def sealed(self) -> bool: ...
    def _messages(self, thread: Thread, entries: list[Any]) -> list[Any]: ...
    def _frame(self, held: Any) -> list[Any]: ...
    def _dump(self, value: Any) -> dict[str, Any]: ...
    def _delta(
        self, thread: Thread, channel: str, messages: list[Any], *, ns: str, parent: Checkpoint | None,
        branch: str | None,
    ) -> tuple[dict[str, Any], Listed] | None: ...


def put(
    saver: ConvgraphSaver, thread: Thread, ns: str, parent_id: str | None, checkpoint: LgCheckpoint, *,
    metadata: CheckpointMetadata, new_versions: ChannelVersions,
) -> None:
    """Record `checkpoint` (with `metadata`, merged from the config) as a child of `parent_id`
    in `thread`, after the turns of the messages it adds."""
    parent = thread.live(ns, parent_id) if parent_id else None
    branch = _branch(saver.replica, thread, ns, parent, checkpoint["id"])
    values = checkpoint["channel_values"]
    header = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    tree: dict[str, Any] = {
        "ns": ns, "id": checkpoint["id"], "header": saver._dump(header),
        "metadata": saver._dump(metadata),
        "at": {ch: version_key(v) for ch, v in checkpoint["channel_versions"].items()},
        "values": {}, "messages": {},
    }
    if parent_id:
        tree["parent"] = parent_id
    if (ns, checkpoint["id"]) not in thread.checkpoints:  # writes held yet; later ones name it
        tree[WRITES_NAMED] = sorted(thread.write_records(ns, checkpoint["id"]), key=bytes)
    made: dict[str, Listed] = {}
    for channel, version in new_versions.items():
        value = values.get(channel)
        found = None
        if channel in saver.messages_channels and type(value) is list:
            found = saver._delta(thread, channel, value, ns=ns, parent=parent, branch=branch)
        if found is not None:
            tree["messages"][channel], made[channel] = found
            tree["messages"][channel]["v"] = version_key(version)
        else:
            typed = saver._dump(value) if channel in values else {"t": "empty", "b": b""}
            tree["values"][channel] = {"v": version_key(version), **typed}
    record = saver.replica.write(thread.conv, "code_snapshot", {
        "path": path_of(CHECKPOINT_PATH, ns), "language": LANGUAGE, "tree": tree,
    }, refs=refs_of(tree), branch=branch)
    thread.refresh(saver.replica)
    for channel, listed in made.items():
        thread.remember(record.cid, channel, listed)


def _branch(replica: Replica, thread: Thread, ns: str, parent: Checkpoint | None, child: str) -> str | None:
    """The branch a child of `parent` goes on: the parent's, unless the parent has a child
    already; then a new branch forking at the parent's record."""
    if parent is None:
        return None
    if not thread.children.get((ns, parent.id)):
        return parent.branch
    name = f"langgraph/{child}"
    purpose = f"LangGraph fork at checkpoint {parent.id}"
    replica.branch(thread.conv, name, parent.cid, purpose=purpose)
    return name


def delta(
    saver: ConvgraphSaver, thread: Thread, channel: str, messages: list[Any], *, ns: str,
    parent: Checkpoint | None, branch: str | None,
) -> tuple[dict[str, Any], Listed] | None:
    """The delta of a messages channel against the parent's version, with what it changes
    written, and the channel's (entries, messages); None when the list holds something other
    than messages. A message is written once: kept ones are named by position in the parent's
    list, an edit (same id, other value) supersedes its turn, and a removed turn is retracted."""
    if not all(isinstance(m, BaseMessage) for m in messages):
        return None
    base: CID | None = None
    entries: list[Any] = []
    prior: list[Any] = []
    at = parent.tree["at"].get(channel) if parent is not None else None
    holder = thread.values.get((ns, channel, at)) if at is not None else None
    if holder is not None and channel in thread.by_cid[holder].tree.get("messages", {}):
        base = holder
        entries, prior = thread.messages(holder, channel, saver._messages, saver._frame)
    # a subgraph's messages are its parent's, seen again: only the root namespace writes records
    edits = Edits(saver, thread, branch) if ns == "" and not saver.sealed else None
    plan: list[Any] = []
    used: set[int] = set()
    by_id: dict[str, list[int]] = {}  # a message id -> its places in the parent's list
    for k, held in enumerate(prior):
        if isinstance(held.id, str):
            by_id.setdefault(held.id, []).append(k)
    for i, message in enumerate(messages):
        j = position(prior, message, i, used, by_id)
        if j is not None and (prior[j] is message or prior[j] == message):
            plan.append(j)
        elif edits is None:
            plan.append(saver._dump(message))
        else:
            plan.append(edits.entry(message, None if j is None else entries[j]))
    if edits is not None:
        named = [entries[e] if type(e) is int else e for e in plan]
        kept = {e for e in named if type(e) is CID}
        edits.retract(e for j, e in enumerate(entries) if j not in used and e not in kept)
        plan = edits.written(plan)
    new_entries = [entries[e] if type(e) is int else e for e in plan]
    if base is not None and keyframe_due(thread, base, channel, len(new_entries)):
        delta: dict[str, Any] = {"spans": framed(saver.replica, new_entries)}
    else:
        delta = {"spans": spans(plan)}
        if base is not None:
            delta["base"] = base
    new_messages = [prior[e] if type(e) is int else m for e, m in zip(plan, messages, strict=True)]
    return delta, (new_entries, new_messages)


def put_writes(
    saver: ConvgraphSaver, thread: Thread, ns: str, checkpoint_id: str, writes: Sequence[tuple[str, Any]], *,
    task_id: str, task_path: str,
) -> None:
    """Record a task's pending writes for checkpoint `checkpoint_id` of `thread`; a regular
    write already held for (task, index) is kept, a special one (error, interrupt, ...) replaced."""
    held = thread.writes.get((ns, checkpoint_id), {})
    rows = []
    for i, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, i)
        if idx >= 0 and (task_id, idx) in held:
            continue
        rows.append([idx, channel, saver._dump(value), idx < 0])
    if not rows:
        return
    ck = thread.live(ns, checkpoint_id)
    tree = {"ns": ns, "checkpoint": checkpoint_id, "task": task_id, "task_path": task_path,
            "writes": rows}
    # the checkpoint's record named in refs: a first read finds its writes by it (`_langgraph_cold`)
    named = [] if ck is None else [ck.cid]
    saver.replica.write(thread.conv, "code_snapshot", {
        "path": path_of(WRITES_PATH, ns), "language": LANGUAGE, "tree": tree,
    }, refs=refs_of(tree) + named, branch=None if ck is None else ck.branch)
    thread.refresh(saver.replica)
