"""Importing a LangGraph `SqliteSaver` thread (extra `langgraph`).

The thread's messages are those of the `messages` channel (or `channel`) in its latest checkpoint
of the root namespace, read through `SqliteSaver` itself on a read-only connection: the file is
never written. Each message becomes the turn `ConvgraphSaver` would write for it
(`_langgraph_mapping.turn_draft`): a `HumanMessage` a `user_message`, an `AIMessage` an
`agent_message` (its `tool_calls` kept as the turn's tool calls), a `ToolMessage` a
`tool_result` answering its `tool_call_id`; the message itself, less its content, is kept in
the payload's `meta["langchain"]`. A `SystemMessage` of text becomes a `system_prompt`.
Content blocks that repeat one of an `AIMessage`'s tool calls (a `tool_use` block, as
Anthropic models write) are left out: the turn holds each call once. A message's key is its
`id` (LangGraph's `add_messages` gives every message one), else `#index`.
Invariant: the checkpoint's messages are mapped in order, each once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from convgraph.errors import ImportSourceError, MissingExtraError
from convgraph.importers import writing
from convgraph.importers.report import ImportReport, Unmapped
from convgraph.replica import Draft, Replica

SOURCE = "langgraph"
_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "function_call"})


def import_langgraph(
    replica: Replica, db_path: Path | str, thread_id: str, *, into: str | None = None,
    title: str | None = None, channel: str = "messages",
) -> ImportReport:
    """Import thread `thread_id` of the `SqliteSaver` database `db_path` into conversation `into`
    (None: a new one); its messages already imported there are not written again."""
    messages, serde = read_thread(Path(db_path), thread_id, channel)

    def build(conv: str) -> tuple[list[writing.Mapped], list[Unmapped]]:
        return mapped(conv, messages, lambda value: _dump(serde, value))

    return writing.run(replica, build, source=SOURCE, origin=thread_id, into=into,
                       title=title or f"LangGraph thread {thread_id}")


def read_thread(path: Path, thread_id: str, channel: str = "messages") -> tuple[list[Any], Any]:
    """The messages of `thread_id`'s latest root checkpoint, and the serializer that read them."""
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415 - an optional extra
    except ImportError as exc:
        raise MissingExtraError("langgraph", "importing LangGraph threads", module=exc.name) from exc
    if not path.is_file():
        raise ImportSourceError(f"no LangGraph database {str(path)!r}: no such file", source=str(path))
    conn = read_only(path)
    try:
        saver = opened(SqliteSaver(conn), conn)
        tup = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        if tup is None:
            held = [row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")]
            raise ImportSourceError(no_thread(path, thread_id, held), source=str(path))
    except sqlite3.DatabaseError as exc:
        raise ImportSourceError(f"{str(path)!r} is not a LangGraph SqliteSaver database ({exc})",
                                source=str(path)) from exc
    finally:
        conn.close()
    values = tup.checkpoint.get("channel_values", {})
    found = values.get(channel)
    if not isinstance(found, list):
        have = ", ".join(sorted(values)) or "none"
        raise ImportSourceError(f"thread {thread_id!r} of {str(path)!r} has no list channel {channel!r} "
                                f"in its latest checkpoint (channels: {have})", source=str(path))
    return found, saver.serde


def mapped(conv: str, messages: Sequence[Any], dump: Any) -> tuple[list[writing.Mapped], list[Unmapped]]:
    """The drafts (keyed) of `messages` in conversation `conv`, and the messages no record holds."""
    from langchain_core.messages import BaseMessage, SystemMessage  # noqa: PLC0415 - an optional extra

    from convgraph.integrations._langgraph_mapping import turn_draft  # noqa: PLC0415 - imports langchain

    out: list[writing.Mapped] = []
    missed: list[Unmapped] = []
    for i, message in enumerate(messages):
        ident = getattr(message, "id", None)
        key = ident if type(ident) is str and ident else f"#{i}"
        if not isinstance(message, BaseMessage):
            what = f"a {type(message).__name__}, not a LangChain message"
            missed.append(Unmapped(key, "not_a_message", what))
            continue
        if isinstance(message, SystemMessage):
            if isinstance(message.content, str):
                out.append((key, Draft("system_prompt", {"content": message.content})))
            else:
                missed.append(Unmapped(key, "system_message", "a system message of content blocks: "
                                       "a system prompt is text"))
            continue
        draft = turn_draft(conv, _without_call_blocks(message), None, dump)
        if draft is None:
            missed.append(Unmapped(key, f"{message.type}_message",
                                   f"no turn kind holds a {type(message).__name__} whole"))
            continue
        out.append((key, draft))
        if getattr(message, "invalid_tool_calls", None):
            missed.append(Unmapped(key, "invalid_tool_calls", "tool calls whose arguments did not parse: "
                                   "kept in meta['langchain'], not made tool calls", kept=True))
    return out, missed


def _without_call_blocks(message: Any) -> Any:
    """`message` less the content blocks that repeat one of its `tool_calls` (Anthropic models
    put each `tool_use` in both): the turn holds the call once, so no request repeats its id."""
    calls = {c.get("id") for c in getattr(message, "tool_calls", None) or ()}
    if not calls or not isinstance(message.content, list):
        return message
    kept = [b for b in message.content
            if not (isinstance(b, dict) and b.get("type") in _CALL_BLOCKS and b.get("id") in calls)]
    return message if len(kept) == len(message.content) else message.model_copy(update={"content": kept})


def read_only(path: Path) -> sqlite3.Connection:
    """A connection to the database at `path` that cannot write it."""
    return sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, check_same_thread=False)


def opened(saver: Any, conn: sqlite3.Connection) -> Any:
    """`saver`, ready to read. Skip `SqliteSaver.setup`: it creates tables and turns WAL on, which
    a read-only connection refuses on a database in another journal mode. Check what it would."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"checkpoints", "writes"} <= tables:
        raise sqlite3.DatabaseError("it has no `checkpoints` and `writes` tables")
    columns = {row[1] for row in conn.execute("PRAGMA table_info(writes)")}
    saver._has_task_path = "task_path" in columns  # as setup finds it on a read-only database
    saver.is_setup = True
    return saver


def _dump(serde: Any, value: Any) -> dict[str, Any]:
    kind, data = serde.dumps_typed(value)
    return {"t": kind, "b": data}


def no_thread(path: Path, thread_id: str, held: Sequence[str]) -> str:
    return f"no thread {thread_id!r} in LangGraph database {str(path)!r}; {writing.known('thread', held)}"
