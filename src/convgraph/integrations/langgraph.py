"""`ConvgraphSaver`: a LangGraph checkpointer whose threads are convgraph conversations.

    saver = ConvgraphSaver(Replica.open("~/.convgraph"))
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})

A thread is the rooted conversation `conv_id(owner, H(thread_id))` of this replica's key
(or of one of `owners`, for threads synced from elsewhere). Messages of the `messages`
channel become turn records once each; a checkpoint records only which of its parent's
messages it keeps and which turns it adds, so the store grows with the messages, not with
messages x steps as `SqliteSaver`'s does. A checkpoint written on a parent that already
has a child (LangGraph's fork) starts a convgraph branch at the parent's record. Deletes
write retractions: nothing is erased. The mapping in full: docs/integrations.md.
Invariant: every read is a fold of the conversation's records, so a thread synced to
another replica reads back there exactly as here.
"""

from __future__ import annotations

import asyncio
import builtins
import random
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.base import Checkpoint as LgCheckpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from convgraph.core.cid import CID
from convgraph.core.record import load_trusted
from convgraph.core.rooted import conv_id
from convgraph.errors import AdapterError
from convgraph.integrations._langgraph_mapping import (
    bare_message,
    config_of,
    target,
    text,
    thread_nonce,
    turn_draft,
)
from convgraph.integrations._langgraph_thread import (
    CHECKPOINT_PATH,
    LANGUAGE,
    WRITES_PATH,
    Checkpoint,
    Listed,
    Thread,
    path_of,
    version_key,
)
from convgraph.replica import Replica
from convgraph.replica_drafts import Draft

__all__ = ["ConvgraphSaver"]


class ConvgraphSaver(BaseCheckpointSaver[str]):
    """A `BaseCheckpointSaver` (sync and async) that keeps each thread as a conversation.

    `owners`: keys whose thread conversations this saver reads and continues before
    rooting its own (a thread synced from another device; that key must have granted this
    replica `write`). `messages_channels`: channels whose list of LangChain messages is
    stored as turns; any other channel is stored as serialized bytes when its version moves.
    """

    def __init__(
        self, replica: Replica, *, owners: Sequence[bytes] = (),
        messages_channels: Iterable[str] = ("messages",), serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.replica = replica
        self.owners = tuple(owners)
        self.messages_channels = frozenset(messages_channels)
        self._lock = threading.RLock()
        self._convs: dict[str, str] = {}  # thread id -> conversation
        self._threads: dict[str, Thread] = {}  # conversation -> its fold
        self._scanned: dict[str, str | None] = {}  # conversation -> thread id, or None: not one
        self._metadata: dict[CID, CheckpointMetadata] = {}

    # ------------------------------------------------------------ threads

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One saver call's writes in one transaction; when it rolls back, what was folded or
        mapped inside it is forgotten, to be read again from what the store kept."""
        with self._lock:
            try:
                with self.replica.transaction():
                    yield
            except BaseException:
                self._convs.clear()
                self._threads.clear()
                self._metadata.clear()
                raise

    def conversation(self, thread_id: str) -> str | None:
        """The conversation holding `thread_id`, or None when this replica holds none."""
        with self._lock:
            return self._find(text(thread_id, "thread_id"))

    def _find(self, thread_id: str) -> str | None:
        """The conversation of `thread_id` this replica holds: an owner's, else our own."""
        known = self._convs.get(thread_id)
        if known is not None:
            return known
        nonce = thread_nonce(thread_id)
        for owner in (*self.owners, self.replica.actor):
            conv = conv_id(owner, nonce)
            if self.replica.heads(conv):
                self._convs[thread_id] = conv
                return conv
        return None

    def _rooted(self, thread_id: str) -> str:
        """The conversation of `thread_id`, rooted by this replica's key when none is held."""
        found = self._find(thread_id)
        if found is not None:
            return found
        nonce = thread_nonce(thread_id)
        conv = conv_id(self.replica.actor, nonce)
        payload = {"nonce": nonce, "title": f"LangGraph thread {thread_id}",
                   "meta": {"langgraph": {"thread_id": thread_id}}}
        self.replica.write(conv, "genesis", payload)
        self._convs[thread_id] = conv
        return conv

    def _thread(self, conv: str) -> Thread:
        thread = self._threads.get(conv)
        if thread is None:
            thread = self._threads[conv] = Thread(conv)
        thread.refresh(self.replica.store)
        return thread

    def _all_threads(self) -> list[tuple[str, str]]:
        """(thread id, conversation) of every LangGraph thread this replica holds."""
        for conv in self.replica.conversations():
            if conv not in self._scanned:
                first = next(self.replica.iter_records(conv, page=1), None)
                meta = first.payload.get("meta") if first is not None and first.kind == "genesis" else None
                mark = meta.get("langgraph") if type(meta) is dict else None  # anyone's genesis: check shapes
                found = mark.get("thread_id") if type(mark) is dict else None
                self._scanned[conv] = found if type(found) is str else None
        return sorted((t, c) for c, t in self._scanned.items() if t is not None)

    # ------------------------------------------------------------ reads

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (its `checkpoint_id`, else the thread's latest)."""
        thread_id, ns, checkpoint_id = target(config)
        with self._lock:
            conv = self._find(thread_id)
            if conv is None:
                return None
            thread = self._thread(conv)
            ck = thread.live(ns, checkpoint_id) if checkpoint_id else thread.latest(ns)
            return None if ck is None else self._tuple(thread, thread_id, ck)

    def list(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of `config`'s thread (and namespace, and id, when given)
        or of every thread, whose metadata has every `filter` item, older than `before`."""
        with self._lock:
            found = builtins.list(self._listed(config, filter or {}, before, limit))
        yield from found

    def _listed(
        self, config: RunnableConfig | None, wanted: dict[str, Any], before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[CheckpointTuple]:
        conf = (config or {}).get("configurable", {})
        if conf.get("thread_id") is not None:
            thread_id = text(str(conf["thread_id"]), "thread_id")
            conv = self._find(thread_id)
            threads = [] if conv is None else [(thread_id, conv)]
        else:
            threads = self._all_threads()
        ns, only = conf.get("checkpoint_ns"), conf.get("checkpoint_id")
        cutoff = (before or {}).get("configurable", {}).get("checkpoint_id")
        left = limit
        for thread_id, conv in threads:
            thread = self._thread(conv)
            for ck in thread.listed(ns):
                if (only and ck.id != only) or (cutoff and ck.id >= cutoff):
                    continue
                metadata = self._meta(ck)
                if any(metadata.get(k) != v for k, v in wanted.items()):
                    continue
                if left is not None:
                    if left <= 0:
                        return
                    left -= 1
                yield self._tuple(thread, thread_id, ck)

    def _meta(self, ck: Checkpoint) -> CheckpointMetadata:
        found = self._metadata.get(ck.cid)
        if found is None:
            found = self._metadata[ck.cid] = self._load(ck.tree["metadata"])
        return found

    def _tuple(self, thread: Thread, thread_id: str, ck: Checkpoint) -> CheckpointTuple:
        header = self._load(ck.tree["header"])
        values: dict[str, Any] = {}
        for channel, version in header["channel_versions"].items():
            found = thread.entry(ck.ns, channel, version)
            if found is None:
                continue
            section, entry = found
            if section == "messages":
                holder = thread.values[(ck.ns, channel, version_key(version))]
                values[channel] = builtins.list(thread.messages(holder, channel, self._messages)[1])
            elif entry["t"] != "empty":
                values[channel] = self._load(entry)
        checkpoint = cast(LgCheckpoint, {**header, "channel_values": values})
        parent = None if ck.parent is None else config_of(thread_id, ck.ns, ck.parent)
        pending = [(task, channel, self.serde.loads_typed(typed))
                   for task, channel, typed in thread.pending(ck.ns, ck.id)]
        metadata = cast(CheckpointMetadata, dict(self._meta(ck)))
        return CheckpointTuple(config_of(thread_id, ck.ns, ck.id), checkpoint, metadata, parent, pending)

    def _load(self, typed: dict[str, Any]) -> Any:
        return self.serde.loads_typed((typed["t"], typed["b"]))

    def _messages(self, entries: builtins.list[Any]) -> builtins.list[Any]:
        """The messages delta entries name: turn records (by CID, read in one batch) or
        messages serialized inline."""
        held = self.replica.store.get_many([e for e in entries if type(e) is CID])
        return [self._message(e, held) for e in entries]

    def _message(self, entry: Any, held: dict[CID, bytes]) -> Any:
        if type(entry) is not CID:
            return self._load(entry)
        data = held.get(entry)
        payload = (self.replica.get(entry) if data is None else load_trusted(data, entry)).payload
        shell = payload.get("meta", {}).get("langchain")
        if shell is None:  # a turn this saver did not write: rebuild it from the turn alone
            return bare_message(payload)
        return self._load(shell).model_copy(update={"content": payload["content"]})

    # ------------------------------------------------------------ writes

    def put(
        self, config: RunnableConfig, checkpoint: LgCheckpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Record `checkpoint` as a child of `config`'s checkpoint (in one transaction, after
        the turns of the messages it adds); a second child of one parent starts a branch."""
        thread_id, ns, parent_id = target(config)
        with self._writing():
            conv = self._rooted(thread_id)
            thread = self._thread(conv)
            parent = thread.live(ns, parent_id) if parent_id else None
            branch = self._branch(thread, ns, parent, checkpoint["id"])
            values = checkpoint["channel_values"]
            header = {k: v for k, v in checkpoint.items() if k != "channel_values"}
            tree: dict[str, Any] = {
                "ns": ns, "id": checkpoint["id"], "header": self._dump(header),
                "metadata": self._dump(get_checkpoint_metadata(config, metadata)),
                "at": {ch: version_key(v) for ch, v in checkpoint["channel_versions"].items()},
                "values": {}, "messages": {},
            }
            if parent_id:
                tree["parent"] = parent_id
            made: dict[str, Listed] = {}
            for channel, version in new_versions.items():
                value = values.get(channel)
                found = None
                if channel in self.messages_channels and type(value) is builtins.list:
                    found = self._delta(thread, channel, value, ns=ns, parent=parent, branch=branch)
                if found is not None:
                    tree["messages"][channel], made[channel] = found
                    tree["messages"][channel]["v"] = version_key(version)
                else:
                    typed = self._dump(value) if channel in values else {"t": "empty", "b": b""}
                    tree["values"][channel] = {"v": version_key(version), **typed}
            record = self.replica.write(conv, "code_snapshot", {
                "path": path_of(CHECKPOINT_PATH, ns), "language": LANGUAGE, "tree": tree,
            }, branch=branch)
            thread.refresh(self.replica.store)
            for channel, listed in made.items():
                thread.remember(record.cid, channel, listed)
        return config_of(thread_id, ns, checkpoint["id"])

    def _branch(self, thread: Thread, ns: str, parent: Checkpoint | None, child: str) -> str | None:
        """The branch a child of `parent` goes on: the parent's, unless the parent has a child
        already; then a new branch forking at the parent's record."""
        if parent is None:
            return None
        if not thread.children.get((ns, parent.id)):
            return parent.branch
        name = f"langgraph/{child}"
        purpose = f"LangGraph fork at checkpoint {parent.id}"
        self.replica.branch(thread.conv, name, parent.cid, purpose=purpose)
        return name

    def _delta(
        self, thread: Thread, channel: str, messages: builtins.list[Any], *, ns: str,
        parent: Checkpoint | None, branch: str | None,
    ) -> tuple[dict[str, Any], Listed] | None:
        """The delta of a messages channel against the parent's version, with the turns of the
        messages it adds written, and the channel's (entries, messages); None when the list
        holds something other than messages."""
        base: CID | None = None
        entries: builtins.list[Any] = []
        prior: builtins.list[Any] = []
        at = parent.tree["at"].get(channel) if parent is not None else None
        holder = thread.values.get((ns, channel, at)) if at is not None else None
        if holder is not None and channel in thread.by_cid[holder].tree.get("messages", {}):
            base = holder
            entries, prior = thread.messages(holder, channel, self._messages)
        keep = min(len(prior), len(messages))
        if messages[:keep] != prior[:keep]:  # in C, identity first: the common case is one pass
            keep = next(i for i in range(keep) if not (prior[i] is messages[i] or prior[i] == messages[i]))
        added = messages[keep:]
        if not all(isinstance(m, BaseMessage) for m in added):
            return None
        # a subgraph's messages are its parent's, seen again: only the root namespace's are turns
        drafts = [turn_draft(thread.conv, m, branch, self._dump) if ns == "" else None for m in added]
        records = iter(self.replica.write_many(thread.conv, [d for d in drafts if d is not None]))
        new = [next(records).cid if d is not None else self._dump(m)
               for d, m in zip(drafts, added, strict=True)]
        delta: dict[str, Any] = {"keep": keep, "add": new}
        if base is not None:
            delta["base"] = base
        return delta, (entries[:keep] + new, prior[:keep] + added)

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "",
    ) -> None:
        """Record a task's pending writes for `config`'s checkpoint; a regular write already
        held for (task, index) is kept, a special one (error, interrupt, ...) replaced."""
        thread_id, ns, checkpoint_id = target(config)
        if not checkpoint_id:
            raise AdapterError("put_writes needs config['configurable']['checkpoint_id']")
        with self._writing():
            conv = self._rooted(thread_id)
            thread = self._thread(conv)
            held = thread.writes.get((ns, checkpoint_id), {})
            rows = []
            for i, (channel, value) in enumerate(writes):
                idx = WRITES_IDX_MAP.get(channel, i)
                if idx >= 0 and (task_id, idx) in held:
                    continue
                rows.append([idx, channel, self._dump(value), idx < 0])
            if not rows:
                return
            ck = thread.live(ns, checkpoint_id)
            tree = {"ns": ns, "checkpoint": checkpoint_id, "task": task_id, "task_path": task_path,
                    "writes": rows}
            self.replica.write(conv, "code_snapshot", {
                "path": path_of(WRITES_PATH, ns), "language": LANGUAGE, "tree": tree,
            }, branch=None if ck is None else ck.branch)
            thread.refresh(self.replica.store)

    def _dump(self, value: Any) -> dict[str, Any]:
        kind, data = self.serde.dumps_typed(value)
        return {"t": kind, "b": data}

    # ------------------------------------------------------------ deletes: retractions

    def delete_thread(self, thread_id: str) -> None:
        """Retract every checkpoint, write and turn of the thread; the records stay, unread."""
        with self._writing():
            conv = self._find(text(thread_id, "thread_id"))
            if conv is None:
                return
            thread = self._thread(conv)
            doomed = [ck.cid for ck in thread.checkpoints.values()]
            doomed += [w[3] for held in thread.writes.values() for w in held.values()]
            self._retract(thread, [*doomed, *thread.turns], "LangGraph delete_thread")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Retract the checkpoints (and their writes) whose metadata names one of `run_ids`."""
        wanted = set(run_ids)
        if not wanted:
            return
        with self._writing():
            for _, conv in self._all_threads():
                thread = self._thread(conv)
                doomed = [ck for ck in thread.listed(None) if self._meta(ck).get("run_id") in wanted]
                self._retract(thread, _with_writes(thread, doomed), "LangGraph delete_for_runs")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: retract all but each namespace's latest checkpoint; `delete`: all."""
        if strategy not in ("keep_latest", "delete"):
            raise AdapterError(f"unknown prune strategy {strategy!r}: keep_latest or delete")
        with self._writing():
            for thread_id in thread_ids:
                if strategy == "delete":
                    self.delete_thread(thread_id)
                    continue
                conv = self._find(text(thread_id, "thread_id"))
                if conv is None:
                    continue
                thread = self._thread(conv)
                listed = thread.listed(None)
                kept = {tip.cid for ns in {ck.ns for ck in listed} if (tip := thread.latest(ns))}
                doomed = [ck for ck in listed if ck.cid not in kept]
                self._retract(thread, _with_writes(thread, doomed), "LangGraph prune keep_latest")

    def _retract(self, thread: Thread, targets: Iterable[CID], reason: str) -> None:
        fresh = [c for c in dict.fromkeys(targets) if c not in thread.retracted]
        if fresh:
            self.replica.write_many(thread.conv, [Draft("retraction", {"target": c, "reason": reason})
                                                  for c in fresh])
            thread.refresh(self.replica.store)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Re-record every live checkpoint of the source, with its writes, in the target thread
        (its own conversation: the turns are written there once more)."""
        with self._writing():
            conv = self._find(text(source_thread_id, "thread_id"))
            if conv is None:
                return
            source = self._thread(conv)
            for ck in sorted(source.listed(None), key=lambda c: (c.ns, c.id)):
                tup = self._tuple(source, source_thread_id, ck)
                target = config_of(target_thread_id, ck.ns, ck.parent)
                self.put(target, tup.checkpoint, tup.metadata, dict(tup.checkpoint["channel_versions"]))
                self._copy_writes(source, ck, target_thread_id)

    def _copy_writes(self, source: Thread, ck: Checkpoint, target_thread_id: str) -> None:
        conv = self._rooted(target_thread_id)
        target = self._thread(conv)
        branch = target.checkpoints[(ck.ns, ck.id)].branch
        for cid in sorted(source.write_records(ck.ns, ck.id) - source.retracted):
            payload = self.replica.get(cid).payload
            self.replica.write(conv, "code_snapshot", payload, branch=branch)
        target.refresh(self.replica.store)

    # ------------------------------------------------------------ versions and async twins

    def get_next_version(self, current: str | None, channel: None) -> str:  # noqa: ARG002 (base's signature)
        """As `InMemorySaver`: a counter, then a random tail, so two forks that move one channel
        from one version never name the same version for different values."""
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"  # noqa: S311 (uniqueness, not secrecy)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: builtins.list(self.list(config, filter=filter, before=before, limit=limit)))
        for tup in found:
            yield tup

    async def aput(
        self, config: RunnableConfig, checkpoint: LgCheckpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _with_writes(thread: Thread, checkpoints: Iterable[Checkpoint]) -> list[CID]:
    out: list[CID] = []
    for ck in checkpoints:
        out += [ck.cid, *sorted(thread.write_records(ck.ns, ck.id))]
    return out
