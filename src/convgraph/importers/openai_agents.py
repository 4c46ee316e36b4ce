"""Importing an OpenAI Agents SDK `SQLiteSession` (its `agent_messages` table), read-only.

Each row of the session, in row order (the order `SQLiteSession.get_items` gives), is one
Responses input item, mapped as `ConvgraphSession` stores it (`_responses_items.turn_payload`),
so a `ConvgraphSession` on the imported conversation gives back the same items. Its key is
the row id (SQLite never reuses one for the session's later items) and a digest of the item
(`writing.keyed`), so one session id in two databases never passes for the other. A row that is not
JSON, or an item of a shape the SDK does not define, is reported; an item no turn can carry
(a system or developer message, an `item_reference`, an unknown type) is written whole in
`meta` and reported as kept, since resume leaves it out. Invariant: the database is only read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from convgraph.core.tagged import pack
from convgraph.errors import AdapterError, ImportSourceError
from convgraph.importers import writing
from convgraph.importers.report import ImportReport, Unmapped
from convgraph.integrations._responses_items import KIND, META_KEY, turn_payload
from convgraph.replica import Draft, Replica

SOURCE = "openai-agents"
MESSAGES_TABLE = "agent_messages"


def import_openai_agents(
    replica: Replica, db_path: Path | str, session_id: str, *, into: str | None = None,
    title: str | None = None, messages_table: str = MESSAGES_TABLE,
) -> ImportReport:
    """Import session `session_id` of the `SQLiteSession` database `db_path` into conversation
    `into` (None: a new one); its items already imported there are not written again."""
    rows = read_session(Path(db_path), session_id, messages_table)

    def build(conv: str) -> tuple[list[writing.Mapped], list[Unmapped]]:
        return mapped(conv, rows)

    return writing.run(replica, build, source=SOURCE, origin=session_id, into=into,
                       title=title or f"OpenAI Agents session {session_id}", shown=writing.place)


def read_session(path: Path, session_id: str, table: str = MESSAGES_TABLE) -> list[tuple[int, str]]:
    """(row id, message data) of every item of `session_id`, in the SDK's order."""
    if not path.is_file():
        raise ImportSourceError(f"no Agents SDK database {str(path)!r}: no such file", source=str(path))
    if not table.isidentifier():
        raise ImportSourceError(f"{table!r} is not a table name", source=str(path))
    conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
    try:
        rows = conn.execute(f"SELECT id, message_data FROM {table} WHERE session_id = ? ORDER BY id",
                            (session_id,)).fetchall()
        if not rows:
            held = [r[0] for r in conn.execute(f"SELECT DISTINCT session_id FROM {table} ORDER BY 1")]
            raise ImportSourceError(f"no session {session_id!r} in Agents SDK database {str(path)!r}; "
                                    f"{writing.known('session', held)}", source=str(path))
    except sqlite3.DatabaseError as exc:
        raise ImportSourceError(f"{str(path)!r} is not an Agents SDK SQLiteSession database with table "
                                f"{table!r} ({exc})", source=str(path)) from exc
    finally:
        conn.close()
    return [(int(i), data if isinstance(data, str) else bytes(data).decode("utf-8", "replace"))
            for i, data in rows]


def mapped(conv: str, rows: Sequence[tuple[int, str]]) -> tuple[list[writing.Mapped], list[Unmapped]]:
    """The drafts (keyed by row id) of a session's rows in `conv`, and the rows none holds."""
    out: list[writing.Mapped] = []
    missed: list[Unmapped] = []
    for row_id, data in rows:
        try:
            item = json.loads(data)
        except ValueError as exc:
            missed.append(Unmapped(str(row_id), "invalid_json", f"the row is not JSON ({exc})"))
            continue
        drafts, unmapped = item_drafts(conv, writing.keyed(str(row_id), item), item)
        out += drafts
        missed += writing.placed(unmapped)
    return out, missed


def item_drafts(conv: str, key: str, item: Any) -> tuple[list[writing.Mapped], list[Unmapped]]:
    """The draft of one Responses input item (reported as kept when resume leaves it out), or
    why none can hold it."""
    try:
        role, payload = turn_payload(pack(item))  # tagged as ConvgraphSession writes it
    except AdapterError as exc:
        return [], [Unmapped(key, "unreadable_item", str(exc))]
    draft = Draft(KIND[role], {"conversation_id": conv, "role": role.value, **payload})
    if payload.get("meta", {}).get(META_KEY, {}).get("shape") != "whole":
        return [(key, draft)], []
    what = item.get("type") or f"{item.get('role', 'unknown')}_message"
    why = "no turn kind holds it: kept whole in meta, resume leaves it out"
    return [(key, draft)], [Unmapped(key, str(what), why, kept=True)]
