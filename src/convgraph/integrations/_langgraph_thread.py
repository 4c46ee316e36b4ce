"""One LangGraph thread as the records of one convgraph conversation, read back incrementally.

The records (docs/integrations.md): LangChain messages as turns (`user_message`,
`agent_message`, `tool_result`), each written once; every checkpoint as a `code_snapshot`
at path `langgraph/checkpoint[/<ns>]` whose `tree` holds its header, the channel values
that changed (typed bytes) and, per messages channel, a delta against the record holding
the parent's version (`base`, `spans`, or the first form's `keep`, `add`: links to turn
records, read by `_langgraph_lists.resolve`; a keyframe, the whole list, has no `base`:
`_langgraph_frames`); pending writes as `code_snapshot`s at
`langgraph/writes[/<ns>]`; deletions as `retraction`s. `Thread` folds
those records into the indexes the saver reads, as `Replica.arrived` gives them: a compacted
thread's from its snapshot (canonical order), then those held with bytes (arrival order).
Invariant: it holds exactly what the store held at its last `refresh`, compacted or not,
whatever order the records came in.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.integrations._langgraph_lists import resolve
from convgraph.projections.state import Entry
from convgraph.replica import Replica, collector
from convgraph.replica.reads import Mark, snapshot_entries

CHECKPOINT_PATH: Final = "langgraph/checkpoint"
WRITES_PATH: Final = "langgraph/writes"
LANGUAGE: Final = "langgraph"
# a checkpoint tree's list of the write records held for it when it was written: every later one
# this saver writes names the checkpoint's record in its refs
WRITES_NAMED: Final = "writes_named"
TURN_KINDS: Final = frozenset({"user_message", "agent_message", "tool_result"})
MESSAGE_ID: Final = "langchain_id"  # payload meta: the LangChain message id a turn or edit holds
_CACHED_LISTS: Final = 8  # materialized message lists kept: the tips a run reads and extends
Listed = tuple[list[Any], list[Any]]  # a messages channel: its delta entries and the messages they load to


def path_of(base: str, ns: str) -> str:
    """The `code_snapshot` path of checkpoints (or writes) in namespace `ns`."""
    return base if ns == "" else f"{base}/{ns}"


def version_key(version: object) -> str:
    """A channel version as text, its type kept, so `1` and `"1"` never meet."""
    return f"{type(version).__name__}:{version}"


@dataclass
class Checkpoint:
    """One checkpoint record as the thread indexes it."""

    cid: CID
    ns: str
    id: str
    parent: str | None
    branch: str | None
    tree: dict[str, Any]


@dataclass(frozen=True)
class Compacted:
    """What compaction took from a thread: the checkpoint record it was compacted behind, how
    many records are held as their snapshot entries only, and the LangGraph checkpoints among
    them as (namespace, id). Every one still reads back whole."""

    checkpoint: CID
    records: int
    checkpoints: tuple[tuple[str, str], ...]


@dataclass
class Thread:
    """The fold of one thread's records: checkpoints, channel values, writes, retractions."""

    conv: str
    mark: Mark | None = None  # where the last `refresh` left off (None: nothing read yet)
    checkpoints: dict[tuple[str, str], Checkpoint] = field(default_factory=dict)
    by_cid: dict[CID, Checkpoint] = field(default_factory=dict)
    children: dict[tuple[str, str], int] = field(default_factory=dict)
    # (ns, channel, version key) -> the checkpoint record holding that value
    values: dict[tuple[str, str, str], CID] = field(default_factory=dict)
    # (ns, checkpoint id) -> (task id, idx) -> (task path, channel, typed value, record)
    writes: dict[tuple[str, str], dict[tuple[str, int], tuple[str, str, tuple[str, bytes], CID]]] = field(
        default_factory=dict
    )
    turns: list[CID] = field(default_factory=list)
    retracted: set[CID] = field(default_factory=set)
    # a LangChain message id -> the record holding its latest version (a turn or a supersession)
    by_id: dict[str, CID] = field(default_factory=dict)
    originals: dict[CID, CID] = field(default_factory=dict)  # supersession -> the turn it edits
    lists: OrderedDict[tuple[CID, str], Listed] = field(default_factory=OrderedDict)
    tips: dict[str, Checkpoint] = field(default_factory=dict)  # latest per ns, once asked for
    # the message records (turns, supersessions) folded, as read: a list's messages are built
    # from these, not read and decoded again (and a compacted one's bytes may be gone)
    turn_entries: dict[CID, Entry] = field(default_factory=dict)

    def refresh(self, replica: Replica) -> None:
        """Fold in what the replica received for this conversation since the last call; after a
        compaction or an adoption brought another snapshot, fold the whole thread again. The
        collector is paused: a thread's first fold keeps every record it decodes, and tracing
        them again and again was three quarters of that fold's time (`collector`)."""
        with collector.paused():
            self._refresh(replica)

    def _refresh(self, replica: Replica) -> None:
        got = replica.arrived(self.conv, self.mark)
        if got.again and self.mark is not None:
            empty = Thread(self.conv)
            for f in fields(self):
                setattr(self, f.name, getattr(empty, f.name))
        self.mark = got.mark
        for entry in got.entries:
            self._fold(entry)

    def _fold(self, record: Entry) -> None:
        kind, payload = record.kind, record.payload
        if kind in TURN_KINDS:
            self.turns.append(record.cid)
            self.turn_entries[record.cid] = record
            self._fold_message_id(record)
        elif kind == "supersession":
            self.originals[record.cid] = payload["target"]
            self.turn_entries[record.cid] = record
            self._fold_message_id(record)
        elif kind == "retraction":
            self.retracted.add(payload["target"])
            self.tips.clear()
        elif kind == "code_snapshot" and payload.get("language") == LANGUAGE:
            tree = payload["tree"]
            if payload.get("path", "").startswith(CHECKPOINT_PATH):
                self._fold_checkpoint(record, tree)
            elif payload.get("path", "").startswith(WRITES_PATH):
                self._fold_writes(record.cid, tree)

    def _fold_message_id(self, record: Entry) -> None:
        meta = record.payload.get("meta")
        found = meta.get(MESSAGE_ID) if type(meta) is dict else None
        if type(found) is str:  # anyone's record: check shapes
            self.by_id[found] = record.cid

    def _fold_checkpoint(self, record: Entry, tree: dict[str, Any]) -> None:
        ns, parent = tree["ns"], tree.get("parent")
        ck = Checkpoint(record.cid, ns, tree["id"], parent, record.branch, tree)
        if (ns, ck.id) not in self.checkpoints and parent is not None:
            self.children[(ns, parent)] = self.children.get((ns, parent), 0) + 1
        self.checkpoints[(ns, ck.id)] = ck
        tip = self.tips.get(ns)
        if tip is not None and ck.id >= tip.id:
            self.tips[ns] = ck
        self.by_cid[record.cid] = ck
        for section in ("values", "messages"):
            for channel, entry in tree.get(section, {}).items():
                self.values[(ns, channel, entry["v"])] = record.cid

    def _fold_writes(self, cid: CID, tree: dict[str, Any]) -> None:
        stored = self.writes.setdefault((tree["ns"], tree["checkpoint"]), {})
        task, task_path = tree["task"], tree.get("task_path", "")
        for idx, channel, typed, overwrite in tree["writes"]:
            if overwrite or (task, idx) not in stored:  # as InMemorySaver: special writes replace
                stored[(task, idx)] = (task_path, channel, (typed["t"], typed["b"]), cid)

    # ------------------------------------------------------------ reads

    def live(self, ns: str, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint `checkpoint_id` of `ns`, unless it was deleted (retracted)."""
        ck = self.checkpoints.get((ns, checkpoint_id))
        return None if ck is None or ck.cid in self.retracted else ck

    def listed(self, ns: str | None) -> list[Checkpoint]:
        """The live checkpoints (of namespace `ns`, or all), newest id first."""
        found = [ck for (n, _), ck in self.checkpoints.items()
                 if (ns is None or n == ns) and ck.cid not in self.retracted]
        return sorted(found, key=lambda ck: ck.id, reverse=True)

    def latest(self, ns: str) -> Checkpoint | None:
        """The live checkpoint of `ns` with the greatest id (LangGraph ids sort by time)."""
        tip = self.tips.get(ns)
        if tip is None:
            found = self.listed(ns)
            if not found:
                return None
            tip = self.tips[ns] = found[0]
        return tip

    def entry(self, ns: str, channel: str, version: object) -> tuple[str, dict[str, Any]] | None:
        """Which section holds `channel` at `version` in `ns`, and its entry there."""
        cid = self.values.get((ns, channel, version_key(version)))
        if cid is None:
            return None
        tree = self.by_cid[cid].tree
        for section in ("messages", "values"):
            found = tree.get(section, {}).get(channel)
            if found is not None:
                return section, found
        return None

    def pending(self, ns: str, checkpoint_id: str) -> list[tuple[str, str, tuple[str, bytes]]]:
        """The live pending writes of a checkpoint in LangGraph's order: (task path, task, idx)."""
        stored = self.writes.get((ns, checkpoint_id), {})
        keys = sorted((k for k, w in stored.items() if w[3] not in self.retracted),
                      key=lambda k: (stored[k][0], k[0], k[1]))
        return [(task, stored[(task, idx)][1], stored[(task, idx)][2]) for task, idx in keys]

    def write_records(self, ns: str, checkpoint_id: str) -> set[CID]:
        """The records holding the pending writes of one checkpoint."""
        return {w[3] for w in self.writes.get((ns, checkpoint_id), {}).values()}

    def messages(
        self, cid: CID, channel: str, load: Callable[[Thread, list[Any]], list[Any]],
        frame: Callable[[Any], list[Any]],
    ) -> Listed:
        """The messages channel `channel` as checkpoint record `cid` holds it (entries, messages),
        read through the chain of deltas back to a cached list or a full one (`resolve`: no list
        on the way is built); `load(thread, entries)` gives the messages of entries, `frame` a
        keyframe's spans held as an artifact (`_langgraph_frames.unframed`)."""
        chain: list[dict[str, Any]] = []
        at: CID | None = cid
        base: Listed = ([], [])
        while at is not None:
            cached = self.lists.get((at, channel))
            if cached is not None:
                base = cached
                break
            delta = self.by_cid[at].tree["messages"][channel]
            if type(delta.get("spans")) is dict:  # a keyframe held as an artifact
                delta = {**delta, "spans": frame(delta["spans"])}
            chain.append(delta)
            at = delta.get("base")
        if not chain:
            self.remember(cid, channel, base)
            return base
        entries, messages, missing = resolve(chain, base)
        with collector.paused():  # a cold list builds a message object per entry, all kept
            loaded = load(self, [entries[i] for i in missing])  # one batch
        for i, message in zip(missing, loaded, strict=True):
            messages[i] = message
        self.remember(cid, channel, (entries, messages))
        return entries, messages

    def compacted(self, replica: Replica) -> Compacted | None:
        """What compaction took the bytes of, as of the last `refresh` (None: nothing)."""
        snap = replica.store.snapshot(self.conv)
        if snap is None:
            return None
        covered = [e.cid for e in snapshot_entries(snap[1])]
        held = replica.store.get_many(covered)  # evidence keeps its bytes
        gone = [c for c in covered if c not in held]
        found = sorted((ck.ns, ck.id) for c in gone if (ck := self.by_cid.get(c)) is not None)
        return Compacted(snap[0], len(gone), tuple(found))

    def original(self, cid: CID) -> CID:
        """The turn a message record stands for: itself, or the turn a supersession edits."""
        return self.originals.get(cid, cid)

    def remember(self, cid: CID, channel: str, listed: Listed) -> None:
        """Keep the materialized list of `channel` at record `cid` (a few, newest used last)."""
        self.lists[(cid, channel)] = listed
        self.lists.move_to_end((cid, channel))
        while len(self.lists) > _CACHED_LISTS:
            self.lists.popitem(last=False)
