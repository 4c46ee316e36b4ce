"""Moving a whole LangGraph `SqliteSaver` thread into `ConvgraphSaver` (extra `langgraph`).

The thread's checkpoints, in every namespace (subgraphs too), are listed with their parents,
and every pending write is read with its task path and index, from the file opened read-only;
a checkpoint's tuple (its state, metadata and versions: what costs to load) is read through
`SqliteSaver.get_tuple` only when it is to be written or compared. Each is written through a
`ConvgraphSaver` on the replica with the same checkpoint id, parent, metadata and channel
versions: a checkpoint after its parent (so a second child of one parent starts a branch, as a
fork does), the channels whose version moved from its parent's as `put`'s `new_versions`, and
its writes right after it, a task's in index order, in transactions of `_BATCH` checkpoints:
an import cut short holds the source's first checkpoints, parents first, and a second run
completes it. Messages become turns and large values artifacts, as the saver writes them for a
live graph. So `get_tuple`, `list` and a compiled graph's `get_state`/`get_state_history` read
back what `SqliteSaver` reads, and the next `invoke` continues the thread from the same state.
Invariant: a checkpoint the replica holds already is never written again, nor a task whose
writes are all held; a thread holding a checkpoint with another parent, or (when the source
brings something new) one the source lacks or holds otherwise, is refused before anything is
written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convgraph.errors import ImportConflictError, ImportSourceError, MissingExtraError
from convgraph.importers.langgraph import SOURCE, no_thread, opened, read_only
from convgraph.replica import Replica

_CHECKPOINT_PATH = "langgraph/checkpoint"  # as integrations/_langgraph_thread.py names them
_WRITES_PATH = "langgraph/writes"
_TURN_KINDS = frozenset({"user_message", "agent_message", "tool_result", "supersession"})


@dataclass(frozen=True)
class ThreadImportReport:
    """One whole-thread import: thread `origin` of the database into conversation `conv`.

    `checkpoints` and `writes` (tasks' pending writes, one record a task) were written now,
    `checkpoints_already` and `writes_already` were held before; `turns`, `forks` (branch
    records) and `records` (all, a new conversation's genesis too) count what this run wrote."""

    source: str
    origin: str
    conv: str
    created: bool
    checkpoints: int
    checkpoints_already: int
    writes: int
    writes_already: int
    turns: int
    forks: int
    records: int

    @property
    def changed(self) -> bool:
        """Whether this run wrote anything (a second run of the same import writes nothing)."""
        return self.records > 0

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "origin": self.origin, "conv": self.conv, "created": self.created,
                "checkpoints": self.checkpoints, "checkpoints_already": self.checkpoints_already,
                "writes": self.writes, "writes_already": self.writes_already, "turns": self.turns,
                "forks": self.forks, "records": self.records}


@dataclass(frozen=True)
class _Task:
    """One task's pending writes on one checkpoint, as the source holds them: `regular` by index,
    then `special` ones (an interrupt, a resume value, an error: negative indexes) by index."""

    task: str
    path: str
    regular: list[tuple[int, str, Any]]  # (index, channel, value)
    special: list[tuple[str, Any]]

    def listed(self) -> list[tuple[str, Any]]:
        """The writes as `_by_task` lists a checkpoint's: regular ones, then special ones."""
        return [(c, v) for _, c, v in self.regular] + self.special

    def written(self) -> list[tuple[str, Any]]:
        """The writes as `put_writes` takes them: a regular write at the place of its index (the
        index `put_writes` gives it), the special ones in the places between (they take theirs
        from their channel), the rest after."""
        specials = iter(self.special)
        out: list[tuple[str, Any]] = []
        for idx, channel, value in self.regular:
            while len(out) < idx and (hole := next(specials, None)) is not None:
                out.append(hole)
            out.append((channel, value))
        return out + list(specials)


_Key = tuple[str, str]  # (namespace, checkpoint id)
# checkpoints (with their writes) written per transaction: a replica re-checks what one open
# transaction wrote at each write, so one transaction for a whole thread costs its length squared
_BATCH = 16


def import_langgraph_thread(
    replica: Replica, db_path: Path | str, thread_id: str, *, owners: Sequence[bytes] = (),
    messages_channels: Iterable[str] = ("messages",),
) -> ThreadImportReport:
    """Bring thread `thread_id` of the `SqliteSaver` database `db_path` whole into the
    conversation `ConvgraphSaver(replica, owners=owners)` keeps it in: what is held already is
    not written again; a thread there that is another history than the source is refused."""
    from convgraph.integrations.langgraph import ConvgraphSaver  # noqa: PLC0415 - an optional extra

    saver = ConvgraphSaver(replica, owners=owners, messages_channels=messages_channels)
    with _opened_thread(Path(db_path), thread_id) as source:
        with replica.transaction():
            before = saver.conversation(thread_id)
            mark = None if before is None else replica.arrived(before).mark
            held = {} if before is None else _held(saver, before)
            order = _ordered(source.parents)
            fresh = {key for key in order if key not in held}
            todo = [(key, task) for key in order for task in source.tasks.get(key, [])
                    if key not in held or _unheld(task, held[key])]
            _check_held(before, held, source, grows=bool(fresh or todo))
        writes: dict[_Key, list[_Task]] = {}
        for key, task in todo:
            writes.setdefault(key, []).append(task)
        steps = [key for key in order if key in fresh or key in writes]
        for start in range(0, len(steps), _BATCH):
            with replica.transaction():
                for key in steps[start:start + _BATCH]:
                    if key in fresh:
                        _put(saver, thread_id, source, key)
                    for task in writes.get(key, []):
                        config = _config(thread_id, key[0], key[1])
                        saver.put_writes(config, task.written(), task.task, task.path)
        new, already = len(todo), sum(len(t) for t in source.tasks.values()) - len(todo)
    conv = saver.conversation(thread_id)
    assert conv is not None  # the source has a checkpoint: put rooted the conversation
    arrived = replica.arrived(conv, mark).entries
    kinds = [(e.kind, e.payload.get("path", "")) for e in arrived]
    return ThreadImportReport(
        SOURCE, thread_id, conv, before is None,
        checkpoints=sum(1 for k, p in kinds if k == "code_snapshot" and p.startswith(_CHECKPOINT_PATH)),
        checkpoints_already=len(source.parents) - len(fresh), writes=new, writes_already=already,
        turns=sum(1 for k, _ in kinds if k in _TURN_KINDS), forks=sum(1 for k, _ in kinds if k == "branch"),
        records=len(arrived))


def _put(saver: Any, thread_id: str, source: _Source, key: _Key) -> None:
    """Write checkpoint `key` as LangGraph would have: the channels whose version moved from its
    parent's are the new ones."""
    tup = source.tuple(key)
    named = source.parents[key]
    parent = None if named is None or (key[0], named) not in source.parents else source.tuple((key[0], named))
    versions = tup.checkpoint["channel_versions"]
    was = {} if parent is None else parent.checkpoint["channel_versions"]
    moved = {ch: v for ch, v in versions.items() if was.get(ch) != v}
    saver.put(tup.parent_config or _config(thread_id, key[0]), tup.checkpoint, tup.metadata, moved)


@dataclass
class _Source:
    """A thread of a `SqliteSaver` file open read-only: each checkpoint's parent and each task's
    writes read at once; a checkpoint's whole tuple (its full state: the costly part) only when
    asked for, through `SqliteSaver.get_tuple`."""

    saver: Any
    thread_id: str
    parents: dict[_Key, str | None]
    tasks: dict[_Key, list[_Task]]
    tuples: dict[_Key, Any] = field(default_factory=dict)

    def tuple(self, key: _Key) -> Any:
        found = self.tuples.get(key)
        if found is None:
            found = self.tuples[key] = self.saver.get_tuple(_config(self.thread_id, *key))
        return found


@dataclass(frozen=True)
class _Held:
    """A checkpoint the replica holds of the thread: all the import compares, without its state."""

    parent: str | None
    metadata: Any
    versions: Any
    tasks: dict[str, list[tuple[str, Any]]]  # as `_by_task` lists them


def _held(saver: Any, conv: str) -> dict[_Key, _Held]:
    """The live checkpoints of the thread in `conv`, read as `ConvgraphSaver._tuple` reads them
    but for their channel values, which are not needed to compare and cost the most to load."""
    with saver._lock:
        thread = saver._thread(conv)
        out: dict[_Key, _Held] = {}
        for ck in thread.listed(None):
            header = saver._load(ck.tree["header"])
            pending = [(task, channel, saver._load({"t": typed[0], "b": typed[1]}))
                       for task, channel, typed in thread.pending(ck.ns, ck.id)]
            out[(ck.ns, ck.id)] = _Held(ck.parent, dict(saver._meta(ck)), header["channel_versions"],
                                        _by_task(pending))
        return out


def read_whole_thread(path: Path, thread_id: str) -> tuple[list[Any], dict[_Key, list[_Task]]]:
    """Every checkpoint tuple of `thread_id` (all namespaces, newest first) and every task's
    pending writes, by (namespace, checkpoint id), as `SqliteSaver` holds them; only read."""
    with _opened_thread(path, thread_id) as source:
        return list(source.saver.list(_config(thread_id))), source.tasks


@contextmanager
def _opened_thread(path: Path, thread_id: str) -> Iterator[_Source]:
    """Thread `thread_id` of the `SqliteSaver` file at `path`, open read-only while in use."""
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415 - an optional extra
    except ImportError as exc:
        raise MissingExtraError("langgraph", "importing LangGraph threads", module=exc.name) from exc
    if not path.is_file():
        raise ImportSourceError(f"no LangGraph database {str(path)!r}: no such file", source=str(path))
    conn = read_only(path)
    try:
        try:
            source = _read(opened(SqliteSaver(conn), conn), conn, path, thread_id)
        except sqlite3.DatabaseError as exc:
            raise ImportSourceError(f"{str(path)!r} is not a LangGraph SqliteSaver database ({exc})",
                                    source=str(path)) from exc
        yield source
    finally:
        conn.close()


def _read(saver: Any, conn: sqlite3.Connection, path: Path, thread_id: str) -> _Source:
    """The thread's checkpoints' parents and its tasks' writes, loaded; no checkpoint's state."""
    parents: dict[_Key, str | None] = {(ns, ident): parent for ns, ident, parent in conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id FROM checkpoints WHERE thread_id = ?",
        (thread_id,))}
    if not parents:
        held = [row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")]
        raise ImportSourceError(no_thread(path, thread_id, held), source=str(path))
    task_path = "task_path" if saver._has_task_path else "''"
    rows = conn.execute(
        f"SELECT checkpoint_ns, checkpoint_id, task_id, {task_path}, idx, channel, type, value FROM writes "
        "WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id, task_id, idx < 0, idx", (thread_id,))
    tasks: dict[_Key, dict[str, _Task]] = {}
    for ns, checkpoint_id, task, task_path_, idx, channel, kind, value in rows:
        found = tasks.setdefault((ns, checkpoint_id), {})
        held_task = found.setdefault(task, _Task(task, task_path_ or "", [], []))
        loaded = saver.serde.loads_typed((kind, value))
        if idx < 0:
            held_task.special.append((channel, loaded))
        else:
            held_task.regular.append((idx, channel, loaded))
    return _Source(saver, thread_id, parents, {key: list(by_task.values()) for key, by_task in tasks.items()})


def _unheld(task: _Task, mine: _Held) -> bool:
    """Whether one of `task`'s writes is not among those held here for it."""
    held = mine.tasks.get(task.task, [])
    return any(w not in held for w in task.listed())


def _check_held(conv: str | None, held: dict[_Key, _Held], source: _Source, *, grows: bool) -> None:
    """Refuse a thread holding a checkpoint with another parent than in the source; and, when the
    source brings something new (`grows`), one holding a checkpoint the source lacks, or holds
    with other metadata or channel versions (versions move with values: equal versions, equal
    values), or a task's write the source does not hold: both went on, and mixing them would make
    a history neither had. A thread that went on here from all the source holds is left as it is."""
    for key, mine in sorted(held.items()):
        what = f"checkpoint {key[1]!r}" + (f" of namespace {key[0]!r}" if key[0] else "")
        if key not in source.parents:
            if not grows:
                continue
            why = "the source does not hold it (and the source holds more)"
        elif source.parents[key] != mine.parent:
            why = f"its parent is {mine.parent!r} here, {source.parents[key]!r} in the source"
        elif not grows:
            continue
        elif source.tuple(key).metadata != mine.metadata:
            why = "its metadata differs from the source's"
        elif source.tuple(key).checkpoint["channel_versions"] != mine.versions:
            why = "its channel versions differ from the source's"
        elif (task := _foreign_task(mine.tasks, source.tasks.get(key, []))) is not None:
            why = f"task {task!r} wrote to it what the source does not hold (and the source holds more)"
        else:
            continue
        assert conv is not None  # held is empty when no conversation is
        raise ImportConflictError(f"the thread's conversation {conv} holds {what}, but {why}: it is another "
                                  "history than the source's, not imported into", conv=conv)


def _foreign_task(mine: dict[str, list[tuple[str, Any]]], tasks: list[_Task]) -> str | None:
    """A task with a pending write held here that the source's writes of that task do not hold."""
    theirs = {t.task: t.listed() for t in tasks}
    for task, writes in mine.items():
        if task not in theirs or any(w not in theirs[task] for w in writes):
            return task
    return None


def _ordered(parents: dict[_Key, str | None]) -> list[_Key]:
    """The checkpoints by id (LangGraph ids grow with time), each after its parent."""
    out: list[_Key] = []
    done: set[_Key] = set()
    for start in sorted(parents, key=lambda k: (k[1], k[0])):
        chain: list[_Key] = []
        key: _Key | None = start
        while key is not None and key in parents and key not in done and key not in chain:
            chain.append(key)
            parent = parents[key]
            key = None if parent is None else (key[0], parent)
        for k in reversed(chain):
            done.add(k)
            out.append(k)
    return out


def _by_task(pending: Sequence[tuple[str, str, Any]]) -> dict[str, list[tuple[str, Any]]]:
    """Each task's writes, regular ones (by index) before special ones, as `read_whole_thread`
    lists them: `list` gives a task's special writes (negative indexes) first."""
    from langgraph.checkpoint.base import WRITES_IDX_MAP  # noqa: PLC0415 - an optional extra

    out: dict[str, list[tuple[str, Any]]] = {}
    for task, channel, value in pending:
        out.setdefault(task, []).append((channel, value))
    return {task: [w for w in ws if w[0] not in WRITES_IDX_MAP] + [w for w in ws if w[0] in WRITES_IDX_MAP]
            for task, ws in out.items()}


def _config(thread_id: str, ns: str | None = None, checkpoint_id: str | None = None) -> Any:
    conf: dict[str, str] = {"thread_id": thread_id}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}
