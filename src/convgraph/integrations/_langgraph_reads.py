"""The read path of `ConvgraphSaver` (docs/integrations.md): a checkpoint's tuple decoded from
its record, the messages a delta's entries name, and `list`'s walk over the threads. Invariant:
every value read is a fold of the conversation's records, through the saver's serde.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint as LgCheckpoint
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple

from convgraph.core.cid import CID
from convgraph.errors import NotFoundError
from convgraph.integrations._langgraph_index import ThreadIndex, candidates
from convgraph.integrations._langgraph_mapping import WHOLE, bare_message, config_of, text
from convgraph.integrations._langgraph_thread import Checkpoint, Thread, version_key
from convgraph.integrations._large import loaded
from convgraph.projections.state import Entry
from convgraph.replica.facade import Replica


class ConvgraphSaver(Protocol):
    """What the reads use of `ConvgraphSaver`: its replica, thread index and threads, and its
    serde's loaders."""

    @property
    def replica(self) -> Replica: ...
    @property
    def _index(self) -> ThreadIndex: ...
    def _find(self, thread_id: str) -> str | None: ...
    def _thread(self, conv: str) -> Thread: ...
    def _meta(self, ck: Checkpoint) -> CheckpointMetadata: ...
    def _load(self, typed: dict[str, Any]) -> Any: ...
    def _frame(self, held: Any) -> list[Any]: ...
    def _messages(self, thread: Thread, entries: list[Any]) -> list[Any]: ...


def listed(
    saver: ConvgraphSaver, config: RunnableConfig | None, wanted: dict[str, Any],
    before: RunnableConfig | None, limit: int | None,
) -> Iterator[CheckpointTuple]:
    """Checkpoints newest first, as `ConvgraphSaver.list` answers them."""
    conf = (config or {}).get("configurable", {})
    if conf.get("thread_id") is not None:
        thread_id = text(str(conf["thread_id"]), "thread_id")
        conv = saver._find(thread_id)
        threads: Iterable[tuple[str, str, set[CID] | None]] = [(thread_id, conv, None)] if conv else []
    else:  # the thread index names the checkpoints that may match: only their threads are read
        threads = candidates(saver._index.sync(), wanted, pick=saver._find)
    ns, only = conf.get("checkpoint_ns"), conf.get("checkpoint_id")
    cutoff = (before or {}).get("configurable", {}).get("checkpoint_id")
    left = limit
    for thread_id, conv, found in threads:
        thread = saver._thread(conv)
        for ck in thread.listed(ns):
            if (found is not None and ck.cid not in found) or (only and ck.id != only) or (
                    cutoff and ck.id >= cutoff):
                continue
            metadata = saver._meta(ck)
            if any(metadata.get(k) != v for k, v in wanted.items()):
                continue
            if left is not None:
                if left <= 0:
                    return
                left -= 1
            yield tuple_of(saver, thread, thread_id, ck)


def tuple_of(saver: ConvgraphSaver, thread: Thread, thread_id: str, ck: Checkpoint) -> CheckpointTuple:
    """Checkpoint `ck` of `thread` as LangGraph reads it: values, parent and pending writes."""
    header = saver._load(ck.tree["header"])
    values: dict[str, Any] = {}
    for channel, version in header["channel_versions"].items():
        found = thread.entry(ck.ns, channel, version)
        if found is None:
            continue
        section, entry = found
        if section == "messages":
            holder = thread.values[(ck.ns, channel, version_key(version))]
            held = thread.messages(holder, channel, saver._messages, saver._frame)
            values[channel] = list(held[1])
        elif entry["t"] != "empty":
            values[channel] = saver._load(entry)
    checkpoint = cast(LgCheckpoint, {**header, "channel_values": values})
    parent = None if ck.parent is None else config_of(thread_id, ck.ns, ck.parent)
    pending = [(task, channel, saver._load({"t": typed[0], "b": typed[1]}))
               for task, channel, typed in thread.pending(ck.ns, ck.id)]
    metadata = cast(CheckpointMetadata, dict(saver._meta(ck)))
    return CheckpointTuple(config_of(thread_id, ck.ns, ck.id), checkpoint, metadata, parent, pending)


def messages(saver: ConvgraphSaver, thread: Thread, entries: list[Any]) -> list[Any]:
    """The messages delta entries name: turn records of the thread (by CID, read in one
    batch, those the thread folded as it holds them) or messages serialized inline."""
    known = thread.turn_entries
    cids = [e for e in entries if type(e) is CID]
    held = {e: known[e] for e in cids if e in known}
    held.update(saver.replica.entries(thread.conv, [e for e in cids if e not in held]))
    return [_message(saver, e, held) for e in entries]


def _message(saver: ConvgraphSaver, entry: Any, held: dict[CID, Entry]) -> Any:
    if type(entry) is not CID:
        return saver._load(entry)
    found = held.get(entry)
    if found is None:
        raise NotFoundError(f"no record {entry} is held here, with its bytes or in a snapshot", cid=entry)
    payload = found.payload
    meta = payload.get("meta", {})
    shell = meta.get("langchain")
    if shell is None:  # a turn this saver did not write: rebuild it from the turn alone
        return bare_message(payload)
    if meta.get(WHOLE) is True:  # too large for a record: the message whole, content too
        return saver._load(shell)
    message = saver._load(shell)  # a fresh object, ours alone: set in place (a copy costs 25x)
    message.content = loaded(saver.replica, payload["content"])
    return message
