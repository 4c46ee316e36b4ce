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
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
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
from convgraph.integrations import _langgraph_deletes as deletes
from convgraph.integrations import _langgraph_generations as generations
from convgraph.integrations import _langgraph_reads as reads
from convgraph.integrations import _langgraph_writes as writing
from convgraph.integrations._langgraph_cold import partial
from convgraph.integrations._langgraph_forks import Fork, ForkLine
from convgraph.integrations._langgraph_forks import forks as fork_points
from convgraph.integrations._langgraph_frames import unframed
from convgraph.integrations._langgraph_index import ThreadIndex, candidates
from convgraph.integrations._langgraph_mapping import config_of, state_turns, target, text
from convgraph.integrations._langgraph_thread import Checkpoint, Compacted, Listed, Thread
from convgraph.integrations._large import loaded, offloaded_bytes
from convgraph.projections.resume import to_provider
from convgraph.projections.transcript import window_of
from convgraph.replica import Replica, collector

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
        return reads.listed(self, config, wanted, before, limit)

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
        return reads.tuple_of(self, thread, thread_id, ck)

    def _frame(self, held: Any) -> builtins.list[Any]:
        return unframed(self.replica, held)

    def _load(self, typed: dict[str, Any]) -> Any:
        data = typed["b"]
        if type(data) is not bytes:  # stored as an artifact: its tag
            data = loaded(self.replica, data)
        return self.serde.loads_typed((typed["t"], data))

    def _messages(self, thread: Thread, entries: builtins.list[Any]) -> builtins.list[Any]:
        return reads.messages(self, thread, entries)

    # ------------------------------------------------------------ writes

    def put(
        self, config: RunnableConfig, checkpoint: LgCheckpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Record `checkpoint` as a child of `config`'s checkpoint (in one transaction, after
        the turns of the messages it adds); a second child of one parent starts a branch."""
        thread_id, ns, parent_id = target(config)
        with self._writing():
            thread = self._thread(self._rooted(thread_id))
            merged = get_checkpoint_metadata(config, metadata)
            writing.put(self, thread, ns, parent_id, checkpoint, metadata=merged, new_versions=new_versions)
        return config_of(thread_id, ns, checkpoint["id"])

    def _delta(
        self, thread: Thread, channel: str, messages: builtins.list[Any], *, ns: str,
        parent: Checkpoint | None, branch: str | None,
    ) -> tuple[dict[str, Any], Listed] | None:
        return writing.delta(self, thread, channel, messages, ns=ns, parent=parent, branch=branch)

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "",
    ) -> None:
        """Record a task's pending writes for `config`'s checkpoint; a regular write already
        held for (task, index) is kept, a special one (error, interrupt, ...) replaced."""
        thread_id, ns, checkpoint_id = target(config)
        if not checkpoint_id:
            raise AdapterError("put_writes needs config['configurable']['checkpoint_id']")
        with self._writing():
            thread = self._thread(self._rooted(thread_id))
            writing.put_writes(self, thread, ns, checkpoint_id, writes, task_id=task_id, task_path=task_path)

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
            deletes.retract_thread(self, thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Retract the checkpoints (and their writes) whose metadata names one of `run_ids`."""
        wanted = set(run_ids)
        if not wanted:
            return
        with self._writing():
            deletes.delete_for_runs(self, self._index.sync(), wanted)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: retract all but each namespace's latest checkpoint; `delete`: all."""
        if strategy not in ("keep_latest", "delete"):
            raise AdapterError(f"unknown prune strategy {strategy!r}: keep_latest or delete")
        with self._writing():
            deletes.prune(self, thread_ids, strategy)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Re-record every live checkpoint of the source, with its writes, in the target thread
        (its own conversation: the turns are written there once more)."""
        with self._writing():
            deletes.copy_thread(self, source_thread_id, target_thread_id)

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
