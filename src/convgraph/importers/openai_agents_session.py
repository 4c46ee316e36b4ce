"""Moving an OpenAI Agents SDK `SQLiteSession` into a `ConvgraphSession` (extra `openai-agents`).

The session's rows of `agent_messages` are read in row order, read-only, as `SQLiteSession.get_items`
reads them (a row that is not JSON is skipped, and reported), and appended to the conversation
through `ConvgraphSession`'s own path, so each item is the turn a live `Runner` would have written
(an item past 256 KiB an artifact its turn names) and `ConvgraphSession(replica, conv).get_items()`
gives back the session's items. The conversation is `into`, else the session's own: rooted by the
replica's key with a nonce derived from the session id, so the same import finds it again.
Invariant: after an import, the source's items are the start of the conversation's: it appends
what the conversation lacks (none, when it went on from all the source holds), or, when neither
is the start of the other, is refused before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Final

from convgraph.core.rooted import conv_id
from convgraph.core.tagged import pack
from convgraph.errors import AdapterError, ImportConflictError, UnknownConversationError
from convgraph.importers.openai_agents import MESSAGES_TABLE, SOURCE, read_session
from convgraph.importers.report import ImportReport, Unmapped
from convgraph.integrations._responses_items import turn_payload
from convgraph.replica import Replica

_NONCE_DOMAIN: Final = b"convgraph/openai-agents/session\n"


def session_conversation(replica: Replica, session_id: str) -> str:
    """The conversation `import_openai_agents_session` moves session `session_id` into when
    given no `into`: the same for one replica key and session id, whoever asks."""
    return conv_id(replica.actor, _nonce(session_id))


def import_openai_agents_session(
    replica: Replica, db_path: Path | str, session_id: str, *, into: str | None = None,
    title: str | None = None, messages_table: str = MESSAGES_TABLE,
) -> ImportReport:
    """Append the items of session `session_id` of the `SQLiteSession` database `db_path` that
    conversation `into` (None: `session_conversation`, rooted when new) does not hold yet, for a
    `ConvgraphSession` on it to continue; refuse when neither's items are the start of the other's."""
    from convgraph.integrations.openai_agents import ConvgraphSession  # noqa: PLC0415 - an optional extra

    rows = read_session(Path(db_path), session_id, messages_table)
    with replica.transaction():
        conv = session_conversation(replica, session_id) if into is None else into
        created = not replica.heads(conv)
        if created and into is not None:
            raise UnknownConversationError(
                f"no conversation {conv[:64]!r} in this replica to import into; leave `into` out for "
                "the session's own",
                conv=conv, known=tuple(replica.conversations()))
        if created:
            replica.create(title or f"OpenAI Agents session {session_id}", nonce=_nonce(session_id))
        session = ConvgraphSession(replica, conv)
        items, unmapped = _mapped(rows)
        held = session._read(None, None)
        common = min(len(held), len(items))
        if held[:common] != items[:common]:  # unless one is the start of the other (went on here, or there)
            at = next((i for i, (h, s) in enumerate(zip(held, items, strict=False)) if h != s), len(items))
            raise ImportConflictError(
                f"conversation {conv} holds {len(held)} item(s) and session {session_id!r} {len(items)}, "
                f"neither the start of the other (item {at} differs): another history, not imported into",
                conv=conv)
        fresh = [session._draft(item) for item in items[common:]]  # its path: large items are artifacts
        records = replica.write_many(conv, fresh) if fresh else []
    return ImportReport(SOURCE, session_id, conv, created, len(fresh), common, tuple(unmapped),
                        records=tuple(str(r.cid) for r in records))


def _mapped(rows: list[tuple[int, str]]) -> tuple[list[Any], list[Unmapped]]:
    """The items a `ConvgraphSession` can hold, in row order, and the rows it cannot."""
    items: list[Any] = []
    unmapped: list[Unmapped] = []
    for row_id, data in rows:
        try:
            item = json.loads(data)
        except ValueError as exc:  # SQLiteSession.get_items skips it too
            unmapped.append(Unmapped(str(row_id), "invalid_json", f"the row is not JSON ({exc})"))
            continue
        try:
            turn_payload(pack(item))  # what ConvgraphSession.add_items would refuse
        except AdapterError as exc:
            why = f"{exc}: a ConvgraphSession cannot hold it"
            unmapped.append(Unmapped(str(row_id), "unreadable_item", why))
            continue
        items.append(item)
    return items, unmapped


def _nonce(session_id: str) -> bytes:
    return hashlib.sha256(_NONCE_DOMAIN + session_id.encode("utf-8")).digest()[:16]
