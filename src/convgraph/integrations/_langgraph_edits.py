"""The records one checkpoint's messages delta writes for `ConvgraphSaver` (docs/integrations.md,
"Trimming, editing and resuming"): new turns, the supersessions of edited ones, the retractions
of removed ones, in one batch. Invariant: a message is written once; an edit that keeps the
turn's kind, calls and answered call is a supersession, any other a retraction and a new turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import BaseMessage

from convgraph.core.cid import CID
from convgraph.integrations._langgraph_mapping import turn_draft
from convgraph.integrations._langgraph_thread import Thread
from convgraph.replica.drafts import Draft
from convgraph.replica.facade import Replica


class ConvgraphSaver(Protocol):
    """What the edits use of `ConvgraphSaver`: its replica, its serde and its message loader."""

    @property
    def replica(self) -> Replica: ...
    def _messages(self, thread: Thread, entries: list[Any]) -> list[Any]: ...
    def _dump(self, value: Any) -> dict[str, Any]: ...


class Edits:
    """The records one checkpoint's messages delta writes, in one batch: new turns, the
    supersessions of edited ones, the retractions of removed ones. Entries planned before the
    batch is written stand as `_Pending` until `written` swaps in their records' CIDs."""

    def __init__(self, saver: ConvgraphSaver, thread: Thread, branch: str | None) -> None:
        self.saver, self.thread, self.branch = saver, thread, branch
        self.drafts: list[Draft] = []
        self.doomed: list[CID] = []

    def entry(self, message: BaseMessage, was: Any) -> Any:
        """The entry of a message the parent's list does not hold as it is: `was`, the entry of
        the message with its id there (None: none), is edited; else a message with an id this
        thread already wrote is named again (when unchanged) or edited; else a new turn."""
        if was is None and isinstance(message.id, str):
            held = self.thread.by_id.get(message.id)
            if held is not None:
                if self.saver._messages(self.thread, [held])[0] == message:
                    return held
                was = held
        draft = turn_draft(self.thread.conv, message, self.branch, self.saver._dump)
        if draft is None:  # a message no turn kind holds whole (system, custom role) is kept inline
            if type(was) is CID:
                self.doomed.append(was)
            return self.saver._dump(message)
        if type(was) is CID:
            original = self.thread.original(was)
            conv = self.thread.conv
            if original not in self.thread.retracted and _same_turn(self.saver, conv, original, draft):
                draft = Draft("supersession", {
                    "target": original, "content": draft.payload["content"], "reason": "LangGraph edit",
                    "meta": draft.payload["meta"],
                }, draft.refs, branch=self.branch)
            else:  # kind, calls or answered call changed: the old turn goes, a new one comes
                self.doomed.append(was)
        self.drafts.append(draft)
        return _Pending(len(self.drafts) - 1)

    def retract(self, removed: Iterable[Any]) -> None:
        """Retract the turns behind `removed` entries (inline entries have no record)."""
        self.doomed += [e for e in removed if type(e) is CID]

    def written(self, plan: list[Any]) -> list[Any]:
        """Write the batch and return `plan` with each pending entry's record CID."""
        originals = dict.fromkeys(self.thread.original(c) for c in self.doomed)
        doomed = [c for c in originals if c not in self.thread.retracted]
        drafts = self.drafts + [Draft("retraction", {"target": c, "reason": "LangGraph RemoveMessage"},
                                      branch=self.branch) for c in doomed]
        if not drafts:
            return plan
        records = self.saver.replica.write_many(self.thread.conv, drafts)
        return [records[e.index].cid if type(e) is _Pending else e for e in plan]


@dataclass(frozen=True)
class _Pending:
    index: int  # of its draft in the batch


def _same_turn(saver: ConvgraphSaver, conv: str, original: CID, draft: Draft) -> bool:
    """Whether `draft` differs from turn `original` only in content (so a supersession says it)."""
    held = saver.replica.entries(conv, [original]).get(original)
    if held is None or held.kind != draft.kind:
        return False
    fields = ("role", "tool_calls", "tool_use_id", "is_error")
    return all(held.payload.get(f) == draft.payload.get(f) for f in fields)
