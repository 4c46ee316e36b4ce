"""`ConvgraphSaver`: a LangGraph checkpointer whose threads are convgraph conversations.

    saver = ConvgraphSaver(Replica.open("~/.convgraph"))
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})

A thread is the rooted conversation `conv_id(owner, H(thread_id))` of this replica's key
(or of one of `owners`, for threads synced from elsewhere). Messages of the `messages`
channel become turn records once each; a checkpoint records only which of its parent's
messages it keeps and which turns it adds, so the store grows with the messages, not with
messages x steps as `SqliteSaver`'s does. A checkpoint written on a parent that already
has a child (LangGraph's fork) starts a convgraph branch at the parent's record.
`delete_thread` forgets the thread's conversation on this replica only (its bytes leave the
disk); `retract_thread`, `prune` and `delete_for_runs` write retractions that sync. Values
past 256 KiB are artifacts their records name; with an `EncryptedSerializer` messages stay
inline, through it. The mapping in full:
docs/integrations.md.
Invariant: every read is a fold of the conversation's records (a thread's first read in a
process folds only those its checkpoint needs, when it can promise the same answer:
`_langgraph_cold`), so a thread synced to another replica reads back there exactly as here.
"""

from __future__ import annotations

import asyncio
import builtins
import random
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, cast

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
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from convgraph.core.cid import CID
from convgraph.errors import AdapterError, NotFoundError
from convgraph.integrations import _langgraph_generations as generations
from convgraph.integrations._langgraph_cold import partial
from convgraph.integrations._langgraph_edits import Edits
from convgraph.integrations._langgraph_forks import Fork, ForkLine
from convgraph.integrations._langgraph_forks import forks as fork_points
from convgraph.integrations._langgraph_frames import framed, keyframe_due, unframed
from convgraph.integrations._langgraph_index import ThreadIndex, candidates
from convgraph.integrations._langgraph_lists import position, spans
from convgraph.integrations._langgraph_mapping import (
    WHOLE,
    bare_message,
    config_of,
    state_turns,
    target,
    text,
)
from convgraph.integrations._langgraph_thread import (
    CHECKPOINT_PATH,
    LANGUAGE,
    WRITES_NAMED,
    WRITES_PATH,
    Checkpoint,
    Compacted,
    Listed,
    Thread,
    path_of,
    version_key,
)
from convgraph.integrations._large import loaded, offloaded_bytes, refs_of
from convgraph.projections.resume import to_provider
from convgraph.projections.state import Entry
from convgraph.projections.transcript import window_of
from convgraph.replica import Replica, collector
from convgraph.replica.drafts import Draft

__all__ = ["Compacted", "ConvgraphSaver", "Fork", "ForkLine", "ThreadInfo"]

# records the thread index may lag behind the store for a first read to catch it up and use it,
# and for a write to keep it current (a longer catch-up costs more than folding one thread)
_INDEX_BEHIND: Final = 4096


@dataclass(frozen=True)
class ThreadInfo:
    """One LangGraph thread this replica holds: its id, conversation, title and owner's key."""

    thread_id: str
    conversation: str
    title: str | None
    owner: bytes


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
        # an encrypting serde: messages are kept inline, through it, never as readable turns
        self.sealed = isinstance(self.serde, EncryptedSerializer)
        self._lock = threading.RLock()
        self._convs: dict[str, str] = {}  # thread id -> conversation
        self._threads: dict[str, Thread] = {}  # conversation -> its fold
        self._metadata: dict[CID, CheckpointMetadata] = {}
        serde_name = f"{type(self.serde).__module__}.{type(self.serde).__qualname__}"
        self._index = ThreadIndex(replica, self._load, serde_name, home=replica.home)  # "Finding threads"

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
                self._index.forget()
                raise
            if self._index.behind() <= _INDEX_BEHIND:  # kept current, so a process's first read can use it
                self._index.sync()

    def conversation(self, thread_id: str) -> str | None:
        """The conversation holding `thread_id`, or None when this replica holds none."""
        with self._lock:
            return self._find(text(thread_id, "thread_id"))

    def compact(self, thread_id: str) -> CID:
        """Checkpoint the thread's conversation and drop the bytes of every record it covers
        (`Replica.checkpoint(conv, compact=True)`); the thread reads back, and goes on, as before.
        Returns the checkpoint record's CID."""
        with self._lock:
            conv = self._find(text(thread_id, "thread_id"))
            if conv is None:
                raise NotFoundError(f"no thread {thread_id[:64]!r} is held here")
            return self.replica.checkpoint(conv, compact=True).cid

    def compacted(self, thread_id: str) -> Compacted | None:
        """What compaction took the bytes of in `thread_id` (None: nothing, or no such thread):
        `get_state_history` still lists each of those checkpoints, read from the snapshot."""
        with self._lock:
            conv = self._find(text(thread_id, "thread_id"))
            return None if conv is None else self._thread(conv).compacted(self.replica)

    def forks(self, thread_id: str, *, ns: str = "") -> builtins.list[Fork]:
        """Where the thread forks in namespace `ns`: each checkpoint with more than one live child,
        from time travel, or from two writers (`Fork.concurrent` when two replicas each continued
        the thread before syncing). The head is the newest checkpoint; the other lines stay."""
        with self._lock:
            conv = self._find(text(thread_id, "thread_id"))
            if conv is None:
                return []
            thread = self._thread(conv)
            return fork_points(thread.listed(ns), thread.latest(ns))

    def _find(self, thread_id: str) -> str | None:
        """The conversation of `thread_id` this replica holds: an owner's, else our own."""
        known = self._convs.get(thread_id)
        if known is not None:
            return known
        conv = generations.find(self.replica, (*self.owners, self.replica.actor), thread_id)
        if conv is not None:
            self._convs[thread_id] = conv
        return conv

    def _rooted(self, thread_id: str) -> str:
        """The conversation of `thread_id`, rooted by this replica's key when none is held."""
        found = self._find(thread_id)
        if found is not None:
            return found
        conv, generation = generations.next_generation(self.replica, thread_id)
        self.replica.write(conv, "genesis", generations.genesis(thread_id, generation))
        self._convs[thread_id] = conv
        return conv

    def _thread(self, conv: str) -> Thread:
        thread = self._threads.get(conv)
        if thread is None:
            thread = self._threads[conv] = Thread(conv)
        thread.refresh(self.replica)
        return thread

    def _all_threads(self) -> list[tuple[str, str]]:
        """(thread id, conversation) of every LangGraph thread this replica holds."""
        return [(t, c) for t, c, _ in candidates(self._index.sync(), {}, pick=self._find)]

    def threads(
        self, *, owner: bytes | None = None, title: str | None = None, filter: dict[str, Any] | None = None,
    ) -> builtins.list[ThreadInfo]:
        """The threads this replica holds with a live checkpoint, by thread id: those `owner`
        rooted, titled `title`, and with a checkpoint whose metadata has every `filter` item (each
        when given). Answered from the thread index: only the threads it posts for them are looked at."""
        wanted = filter or {}
        out = []
        with self._lock:
            state = self._index.sync()
            picked = candidates(state, wanted, title=title, owner=owner, pick=self._find)
            for thread_id, conv, found in picked:
                row = state.rows[conv]
                if row is None or not row.checkpoints or (owner is not None and row.owner != owner) or (
                        title is not None and row.title != title):
                    continue
                if wanted and not self._matching(conv, found, wanted):
                    continue
                out.append(ThreadInfo(thread_id, conv, row.title, row.owner))
        return out

    def _matching(self, conv: str, found: set[CID], wanted: dict[str, Any]) -> builtins.list[Checkpoint]:
        """The live checkpoints among `found` whose loaded metadata has every `wanted` item."""
        thread = self._thread(conv)
        return [ck for ck in thread.listed(None) if ck.cid in found
                and not any(self._meta(ck).get(k) != v for k, v in wanted.items())]

    def check_index(self) -> builtins.list[str]:
        """How the thread index differs from a rebuild from the records (empty: it does not)."""
        with self._lock:
            return self._index.check()

    def rebuild_index(self) -> None:
        """Rebuild the thread index from the records (and its file, where the replica has a home)."""
        with self._lock:
            self._index.rebuild()

    # ------------------------------------------------------------ reads

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (its `checkpoint_id`, else the thread's latest)."""
        thread_id, ns, checkpoint_id = target(config)
        with self._lock, collector.paused():  # a first read keeps all it decodes: not traced twice
            conv = self._find(thread_id)
            if conv is None:
                return None
            if conv not in self._threads and self._index.behind() <= _INDEX_BEHIND:
                row = self._index.sync().rows.get(conv)  # a first read: only what the checkpoint needs
                found = None if row is None else partial(self.replica, conv, row, ns, checkpoint_id)
                if found is not None:
                    return self._tuple(found[0], thread_id, found[1])
            thread = self._thread(conv)
            ck = thread.live(ns, checkpoint_id) if checkpoint_id else thread.latest(ns)
            return None if ck is None else self._tuple(thread, thread_id, ck)

    def list(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of `config`'s thread (and namespace, and id, when given)
        or of every thread, whose metadata has every `filter` item, older than `before`."""
        with self._lock, collector.paused():
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
            threads: Iterable[tuple[str, str, set[CID] | None]] = [(thread_id, conv, None)] if conv else []
        else:  # the thread index names the checkpoints that may match: only their threads are read
            threads = candidates(self._index.sync(), wanted, pick=self._find)
        ns, only = conf.get("checkpoint_ns"), conf.get("checkpoint_id")
        cutoff = (before or {}).get("configurable", {}).get("checkpoint_id")
        left = limit
        for thread_id, conv, found in threads:
            thread = self._thread(conv)
            for ck in thread.listed(ns):
                if (found is not None and ck.cid not in found) or (only and ck.id != only) or (
                        cutoff and ck.id >= cutoff):
                    continue
                metadata = self._meta(ck)
                if any(metadata.get(k) != v for k, v in wanted.items()):
                    continue
                if left is not None:
                    if left <= 0:
                        return
                    left -= 1
                yield self._tuple(thread, thread_id, ck)

    def resume(
        self, config: RunnableConfig | str, provider: str = "anthropic", *, last: int | None = None,
        channel: str = "messages",
    ) -> builtins.list[dict[str, Any]]:
        """The provider-valid message list of what the graph's state holds at `config`'s
        checkpoint (a thread id: its latest): exactly the messages LangGraph would send, trimmed
        or edited as the graph left them, repaired as `Replica.resume` repairs; at least the final
        `last`, widened back to a user turn with text. System messages are not in it."""
        if isinstance(config, str):
            config = config_of(config, "", None)
        thread_id, ns, checkpoint_id = target(config)
        with self._lock:
            conv = self._find(thread_id)
            thread = None if conv is None else self._thread(conv)
            ck = None
            if thread is not None:
                ck = thread.live(ns, checkpoint_id) if checkpoint_id else thread.latest(ns)
            if thread is None or ck is None:
                raise NotFoundError(f"no checkpoint of thread {thread_id[:64]!r} is held here")
            holder = thread.values.get((ns, channel, ck.tree["at"].get(channel)))
            if holder is None or channel not in thread.by_cid[holder].tree.get("messages", {}):
                raise AdapterError(f"channel {channel!r} of thread {thread_id[:64]!r} holds no messages here")
            entries, messages = thread.messages(holder, channel, self._messages, self._frame)
            turns = state_turns(thread.conv, entries, messages)
        return to_provider(window_of(reversed(turns), last).turns, provider)

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
                listed = thread.messages(holder, channel, self._messages, self._frame)
                values[channel] = builtins.list(listed[1])
            elif entry["t"] != "empty":
                values[channel] = self._load(entry)
        checkpoint = cast(LgCheckpoint, {**header, "channel_values": values})
        parent = None if ck.parent is None else config_of(thread_id, ck.ns, ck.parent)
        pending = [(task, channel, self._load({"t": typed[0], "b": typed[1]}))
                   for task, channel, typed in thread.pending(ck.ns, ck.id)]
        metadata = cast(CheckpointMetadata, dict(self._meta(ck)))
        return CheckpointTuple(config_of(thread_id, ck.ns, ck.id), checkpoint, metadata, parent, pending)

    def _frame(self, held: Any) -> builtins.list[Any]:
        return unframed(self.replica, held)

    def _load(self, typed: dict[str, Any]) -> Any:
        data = typed["b"]
        if type(data) is not bytes:  # stored as an artifact: its tag
            data = loaded(self.replica, data)
        return self.serde.loads_typed((typed["t"], data))

    def _messages(self, thread: Thread, entries: builtins.list[Any]) -> builtins.list[Any]:
        """The messages delta entries name: turn records of the thread (by CID, read in one
        batch, those the thread folded as it holds them) or messages serialized inline."""
        known = thread.turn_entries
        cids = [e for e in entries if type(e) is CID]
        held = {e: known[e] for e in cids if e in known}
        held.update(self.replica.entries(thread.conv, [e for e in cids if e not in held]))
        return [self._message(e, held) for e in entries]

    def _message(self, entry: Any, held: dict[CID, Entry]) -> Any:
        if type(entry) is not CID:
            return self._load(entry)
        found = held.get(entry)
        if found is None:
            raise NotFoundError(f"no record {entry} is held here, with its bytes or in a snapshot", cid=entry)
        payload = found.payload
        meta = payload.get("meta", {})
        shell = meta.get("langchain")
        if shell is None:  # a turn this saver did not write: rebuild it from the turn alone
            return bare_message(payload)
        if meta.get(WHOLE) is True:  # too large for a record: the message whole, content too
            return self._load(shell)
        message = self._load(shell)  # a fresh object, ours alone: set in place (a copy costs 25x)
        message.content = loaded(self.replica, payload["content"])
        return message

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
            if (ns, checkpoint["id"]) not in thread.checkpoints:  # writes held yet; later ones name it
                tree[WRITES_NAMED] = sorted(thread.write_records(ns, checkpoint["id"]), key=bytes)
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
            }, refs=refs_of(tree), branch=branch)
            thread.refresh(self.replica)
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
        """The delta of a messages channel against the parent's version, with what it changes
        written, and the channel's (entries, messages); None when the list holds something other
        than messages. A message is written once: kept ones are named by position in the parent's
        list, an edit (same id, other value) supersedes its turn, and a removed turn is retracted."""
        if not all(isinstance(m, BaseMessage) for m in messages):
            return None
        base: CID | None = None
        entries: builtins.list[Any] = []
        prior: builtins.list[Any] = []
        at = parent.tree["at"].get(channel) if parent is not None else None
        holder = thread.values.get((ns, channel, at)) if at is not None else None
        if holder is not None and channel in thread.by_cid[holder].tree.get("messages", {}):
            base = holder
            entries, prior = thread.messages(holder, channel, self._messages, self._frame)
        # a subgraph's messages are its parent's, seen again: only the root namespace writes records
        edits = Edits(self, thread, branch) if ns == "" and not self.sealed else None
        plan: builtins.list[Any] = []
        used: set[int] = set()
        by_id: dict[str, builtins.list[int]] = {}  # a message id -> its places in the parent's list
        for k, held in enumerate(prior):
            if isinstance(held.id, str):
                by_id.setdefault(held.id, []).append(k)
        for i, message in enumerate(messages):
            j = position(prior, message, i, used, by_id)
            if j is not None and (prior[j] is message or prior[j] == message):
                plan.append(j)
            elif edits is None:
                plan.append(self._dump(message))
            else:
                plan.append(edits.entry(message, None if j is None else entries[j]))
        if edits is not None:
            named = [entries[e] if type(e) is int else e for e in plan]
            kept = {e for e in named if type(e) is CID}
            edits.retract(e for j, e in enumerate(entries) if j not in used and e not in kept)
            plan = edits.written(plan)
        new_entries = [entries[e] if type(e) is int else e for e in plan]
        if base is not None and keyframe_due(thread, base, channel, len(new_entries)):
            delta: dict[str, Any] = {"spans": framed(self.replica, new_entries)}
        else:
            delta = {"spans": spans(plan)}
            if base is not None:
                delta["base"] = base
        new_messages = [prior[e] if type(e) is int else m for e, m in zip(plan, messages, strict=True)]
        return delta, (new_entries, new_messages)

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
            # the checkpoint's record named in refs: a first read finds its writes by it (`_langgraph_cold`)
            named = [] if ck is None else [ck.cid]
            self.replica.write(conv, "code_snapshot", {
                "path": path_of(WRITES_PATH, ns), "language": LANGUAGE, "tree": tree,
            }, refs=refs_of(tree) + named, branch=None if ck is None else ck.branch)
            thread.refresh(self.replica)

    def _dump(self, value: Any) -> dict[str, Any]:
        """`value` through the serde, its bytes stored as an artifact past `_large.THRESHOLD`."""
        kind, data = self.serde.dumps_typed(value)
        return {"t": kind, "b": offloaded_bytes(self.replica, data)}

    # ------------------------------------------------------------ deletes

    def delete_thread(self, thread_id: str) -> None:
        """Forget the thread's conversation on this replica (`Replica.forget`): its records and
        rows leave the disk, other replicas keep it; the thread id used again starts afresh."""
        with self._lock:
            conv = self._find(text(thread_id, "thread_id"))
            if conv is None:
                return
            self.replica.forget(conv)
            self._convs.pop(thread_id, None)
            self._threads.pop(conv, None)
            self._index.drop(conv)

    def retract_thread(self, thread_id: str) -> None:
        """Retract every checkpoint, write and turn of the thread: signed records that sync, so
        every replica stops showing them; the records stay, unread (a delete everywhere)."""
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
            state = self._index.sync()
            found: dict[str, set[CID]] = {}  # the threads the index names for any of the runs
            for run_id in wanted:
                for _, conv, cids in candidates(state, {"run_id": run_id}, pick=self._find):
                    found.setdefault(conv, set()).update(cids)
            for conv, cids in sorted(found.items()):
                thread = self._thread(conv)
                doomed = [ck for ck in thread.listed(None)
                          if ck.cid in cids and self._meta(ck).get("run_id") in wanted]
                self._retract(thread, _with_writes(thread, doomed), "LangGraph delete_for_runs")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: retract all but each namespace's latest checkpoint; `delete`: all."""
        if strategy not in ("keep_latest", "delete"):
            raise AdapterError(f"unknown prune strategy {strategy!r}: keep_latest or delete")
        with self._writing():
            for thread_id in thread_ids:
                if strategy == "delete":
                    self.retract_thread(thread_id)
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
            thread.refresh(self.replica)

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
        held = self.replica.entries(source.conv, source.write_records(ck.ns, ck.id) - source.retracted)
        named = [target.checkpoints[(ck.ns, ck.id)].cid]
        for cid in sorted(held):
            self.replica.write(conv, "code_snapshot", held[cid].payload,
                               refs=refs_of(held[cid].payload) + named, branch=branch)
        target.refresh(self.replica)

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

    async def aretract_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.retract_thread, thread_id)

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
