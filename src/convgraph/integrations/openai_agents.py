"""An OpenAI Agents SDK `Session` kept as a convgraph conversation (extra `openai-agents`).

Each session item is one turn record, so the history syncs, verifies and branches like any
conversation, and `resume` renders it, repaired, for any provider:

* a user message → `user_message`; an assistant message → `agent_message`; its text parts
  become `text` blocks, every other part stays a block as it was;
* a `function_call` → an `agent_message` with one tool call (the raw `arguments`, the item
  id and other fields in the call's `meta`, as `record_response` keeps them);
* a `function_call_output` → a `tool_result` answering that call id;
* a `reasoning` item, and the other Responses items (web search, computer and MCP calls …)
  → an `agent_message` holding the item whole as one block (provider `openai-responses`);
* what no turn can carry (a system or developer message, an `item_reference`, an item type
  convgraph does not know) → a turn with no content, the item whole in payload `meta`
  (resume leaves it out: it is not conversation).

What the turn does not say of an item (its `type`, `id`, `status`, string content) is kept in
the payload's `meta["openai_agents"]`, so `get_items` gives back items equal to those added.
What DAG-CBOR cannot hold (NaN, infinities, huge integers) is tagged (`core.tagged`); an item
whose turn would pass 256 KiB is an artifact the turn names (`_large`), its content a note.
Turns other writers made (`say`, `record_response`, another device) are read as the
Responses renderer shows them. `pop_item` writes a retraction and `clear_session` one per
visible turn: nothing is deleted.

Every method does its store work in a worker thread, under a lock per conversation, and reads
come from the items kept as JSON text per conversation and branch (`_session_view`), moved on
by what arrives. The branch methods are AdvancedSQLiteSession's, on convgraph's own branches:
a branch forks from main at a record, and shows main up to there and then its own turns.
Invariant: `get_items` gives the items the transcript of the same records gives, and a first
`get_items(limit=n)` reads O(n) turns, not the history, through the turn index.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar, cast

from agents.items import TResponseInputItem
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from convgraph.core.cid import CID
from convgraph.core.tagged import pack
from convgraph.errors import AdapterError
from convgraph.integrations._large import note, refs_of, slim, stored, too_large
from convgraph.integrations._responses_items import KIND as _KIND
from convgraph.integrations._responses_items import META_KEY, Item
from convgraph.integrations._responses_items import turn_payload as _turn_payload
from convgraph.integrations._session_view import View, views_of
from convgraph.projections.index_rows import BranchRow
from convgraph.replica import Draft, Replica

__all__ = ["MAIN_BRANCH", "META_KEY", "ConvgraphSession"]

MAIN_BRANCH: Final = "main"
"""The name the branch methods give the main line, as AdvancedSQLiteSession does."""
_T = TypeVar("_T")
_CURRENT: Final[Any] = object()  # `_draft`'s default: the session's current branch


class ConvgraphSession:
    """A `Session` for `agents.Runner` whose items are the turns of conversation `conv` on
    `replica` (of `branch`, if given). Every call does its store work in a worker thread
    (`asyncio.to_thread`), one at a time per conversation, so the event loop never waits on it."""

    def __init__(
        self, replica: Replica, conv: str, *, branch: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.replica = replica
        self.session_id = conv
        self.branch = branch
        self.session_settings = session_settings
        self._views = views_of(replica)

    @classmethod
    def new(cls, replica: Replica, title: str | None = None, **kwargs: Any) -> ConvgraphSession:
        """A session on a new conversation rooted by `replica`'s key."""
        return cls(replica, replica.create(title), **kwargs)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest `limit` items (all when None or negative), oldest first."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit == 0:
            return []
        want = None if limit is None or limit < 0 else limit
        # boxed: a list `to_thread` returns bare was freed when the executor ran its next job,
        # on that job's clock (measured: the next call's hop took 6-10 ms after 10k items)
        box = await asyncio.to_thread(lambda: [self._read(self.branch, want)])
        return box.pop()

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append `items` as turns, in one transaction."""
        if items:
            await _settled(self._locked, lambda: self._add(items))

    async def pop_item(self) -> TResponseInputItem | None:
        """Retract the turn holding the latest item and return that item (None: no items).

        A turn others wrote that makes several items is retracted whole and the items
        before the popped one are written again after the retraction, in the same place."""
        return await _settled(self._locked, self._pop)

    async def clear_session(self) -> None:
        """Retract every visible turn of the session (the records stay, hidden)."""
        await _settled(self._locked, self._clear)

    def resume(self, provider: str = "openai-responses", *, last: int | None = None) -> list[dict[str, Any]]:
        """The session as `provider`'s repaired, valid message list (`Replica.resume`)."""
        return self.replica.resume(self.session_id, provider, last=last, branch=self.branch)

    # ------------------------------------------------------------------ branches

    async def create_branch_from_turn(self, turn_number: int, branch_name: str | None = None) -> str:
        """Fork before user turn `turn_number` (1-based, of the current branch) and switch to the
        fork: it holds the items before that turn, and what is added next continues it."""
        return await _settled(self._locked, lambda: self._fork(turn_number, branch_name))

    async def create_branch_from_content(self, search_term: str, branch_name: str | None = None) -> str:
        """`create_branch_from_turn` at the first user turn containing `search_term`."""
        found = await self.find_turns_by_content(search_term)
        if not found:
            raise AdapterError(f"no user turn contains {search_term!r}", what=search_term)
        return await self.create_branch_from_turn(found[0]["turn"], branch_name)

    async def switch_to_branch(self, branch_id: str) -> None:
        """Read and write branch `branch_id` ("main": the main line) from now on."""
        name = None if branch_id == MAIN_BRANCH else branch_id
        if name is not None and not await asyncio.to_thread(self._exists, name):
            raise AdapterError(f"no branch {branch_id!r} in this session", what=branch_id)
        self.branch = name

    async def list_branches(self) -> list[dict[str, Any]]:
        """Every branch: `branch_id`, `message_count`, `user_turns`, `is_current`, `created_at`."""
        return await asyncio.to_thread(self._locked, self._branches)

    async def get_conversation_turns(self, branch_id: str | None = None) -> list[dict[str, Any]]:
        """The user turns of a branch (the current one when None): `turn`, `content` (a preview),
        `full_content`, `timestamp`, `can_branch`."""
        return await asyncio.to_thread(self._locked, lambda: self._turns(self._name(branch_id), 100))

    async def find_turns_by_content(
        self, search_term: str, branch_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The user turns of a branch whose text contains `search_term` (ASCII case ignored)."""
        pattern = re.compile(re.escape(search_term), re.IGNORECASE | re.ASCII)
        turns = await asyncio.to_thread(self._locked, lambda: self._turns(self._name(branch_id), None))
        return [t for t in turns if any(pattern.search(s) for s in _texts(t["full_content"]))]

    # ------------------------------------------------------------------ in the worker thread

    def _locked(self, work: Callable[[], _T]) -> _T:
        with self._views.lock(self.session_id):
            return work()

    def _read(self, branch: str | None, want: int | None) -> list[TResponseInputItem]:
        view = self._locked(lambda: self._view(branch, want))
        return cast(list[TResponseInputItem], view.items(want))

    def _view(self, branch: str | None, want: int | None) -> View:
        return self._views.view(self.replica, self.session_id, branch, want)

    def _add(self, items: list[TResponseInputItem]) -> None:
        with self.replica.transaction():  # the turns and the artifacts they name land together
            self.replica.write_many(self.session_id, [self._draft(cast(Item, item)) for item in items])

    def _pop(self) -> TResponseInputItem | None:
        view = self._view(self.branch, 1)
        ops, n = view.ops, view.length
        if not n:
            return None
        start = n - 1  # the latest turn's items are the last ones, together
        while start > 0 and ops[start - 1] == ops[n - 1]:
            start -= 1
        items = view.items(n - start)
        retraction = Draft("retraction", {"target": ops[n - 1]})
        self.replica.write_many(self.session_id, [retraction, *map(self._draft, items[:-1])])
        return cast(TResponseInputItem, items[-1])

    def _clear(self) -> None:
        ops = dict.fromkeys(self._view(self.branch, None).turn_ops())
        if ops:
            self.replica.write_many(self.session_id, [Draft("retraction", {"target": op}) for op in ops])

    def _draft(self, item: Item, branch: str | None = _CURRENT) -> Draft:
        packed = pack(item)
        role, payload = _turn_payload(packed)
        payload = {"conversation_id": self.session_id, "role": role.value, **payload}
        if too_large(payload):
            tag = stored(self.replica, packed)
            payload = slim(payload, note(tag), {META_KEY: {"shape": "whole", "item": tag}})
        branch = self.branch if branch is _CURRENT else branch
        return Draft(_KIND[role], payload, refs_of(payload), branch=branch)

    def _name(self, branch_id: str | None) -> str | None:
        return self.branch if branch_id is None else None if branch_id == MAIN_BRANCH else branch_id

    def _exists(self, name: str) -> bool:
        return bool(self.replica.store.branch_rows(self.session_id, name))

    def _users(self, branch: str | None) -> tuple[View, list[Item], list[int]]:
        """The view of `branch`, its items, and the index of each user item (turn n: `[n - 1]`)."""
        view = self._view(branch, None)
        items = view.items()
        return view, items, [i for i, item in enumerate(items) if item.get("role") == "user"]

    def _fork(self, turn_number: int, branch_name: str | None) -> str:
        view, items, users = self._users(self.branch)
        if not 1 <= turn_number <= len(users):
            where = self._shown(self.branch)
            raise AdapterError(f"turn {turn_number} is not a user turn of branch {where!r} "
                               f"(it has {len(users)})", what=turn_number)
        taken = {MAIN_BRANCH, *self._names()}
        name = branch_name or f"branch_from_turn_{turn_number}_{int(time.time())}"
        if not name.strip() or name in taken:
            raise AdapterError(f"branch name {name!r} is empty or taken", what=name)
        before = users[turn_number - 1]
        ops = view.turn_ops()
        on_main = self._on_main(ops[:before])  # a branch forks from main: what it added is written again
        first = self.replica.first(self.session_id)  # compacted or not
        at = ops[on_main - 1] if on_main else first.cid if first else None
        if at is None:
            raise AdapterError("an empty conversation has nothing to fork from", what=self.session_id)
        again = [self._draft(i, name) for i in items[on_main:before]]
        self.replica.write_many(self.session_id, [Draft("branch", {"name": name, "from": at}), *again])
        self.branch = name
        return name

    def _on_main(self, ops: Sequence[CID]) -> int:
        """How many of `ops` (a view's, in order) lead it on the main line."""
        if self.branch is None or not ops:
            return len(ops)
        found = self.replica.entries(self.session_id, ops)
        n = 0
        while n < len(ops) and found[ops[n]].branch is None:
            n += 1
        return n

    def _names(self) -> list[str]:
        rows = self.replica.store.index_rows(self.session_id)
        return sorted({r.name for r in rows if isinstance(r, BranchRow)})

    def _branches(self) -> list[dict[str, Any]]:
        store = self.replica.store
        first = self.replica.first(self.session_id)
        out = []
        for name in [None, *self._names()]:
            _, items, users = self._users(name)
            if name is None:
                wall = first.hlc.wall_ms if first else 0
            else:
                wall = min(r.key for r in store.branch_rows(self.session_id, name))[0]
            out.append({"branch_id": self._shown(name), "message_count": len(items), "user_turns": len(users),
                        "is_current": name == self.branch, "created_at": _timestamp(wall)})
        return sorted(out, key=lambda b: b["created_at"])

    def _turns(self, branch: str | None, preview: int | None) -> list[dict[str, Any]]:
        view, items, users = self._users(branch)
        ops = view.turn_ops()
        metas = self.replica.store.metas([ops[i] for i in users])
        return [{"turn": n, "content": _preview(items[i].get("content", ""), preview),
                 "full_content": items[i].get("content", ""), "can_branch": True,
                 "timestamp": _timestamp(metas[ops[i]].hlc.wall_ms) if ops[i] in metas else None}
                for n, i in enumerate(users, 1)]

    @staticmethod
    def _shown(branch: str | None) -> str:
        return MAIN_BRANCH if branch is None else branch


async def _settled(run: Callable[[Callable[[], _T]], _T], work: Callable[[], _T]) -> _T:
    """`run(work)` in a worker thread, waited for even when the caller is cancelled meanwhile
    (then cancelled after): a write is never left in flight behind the caller's back."""
    task = asyncio.ensure_future(asyncio.to_thread(run, work))
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        raise cancelled
    return task.result()


def _timestamp(wall_ms: int) -> str:
    """As SQLite's CURRENT_TIMESTAMP writes it (UTC), which AdvancedSQLiteSession returns."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(wall_ms / 1000))


def _preview(content: Any, length: int | None) -> str:
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return text[:length] + "..." if length is not None and len(text) > length else text


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [str(p.get("text", "")) for p in content if isinstance(p, dict)]
