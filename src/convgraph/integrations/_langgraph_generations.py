"""Thread generations: which conversation holds a LangGraph thread id, after deletes.

`ConvgraphSaver.delete_thread` forgets the thread's conversation on this replica
(`Replica.forget`), and a forgotten conversation id is never rooted again, so the thread id
used once more roots its next generation: generation g's conversation is
`conv_id(owner, thread_nonce(thread_id, g))`, generation 0 being the thread's first (its id
unchanged from before generations existed). A replica that holds several generations of a
thread (synced from a device that deleted it) reads the newest. Invariant: `find` names a
held conversation or None; `next_generation` names one neither held nor forgotten here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from convgraph.core.rooted import conv_id
from convgraph.integrations._langgraph_mapping import thread_nonce
from convgraph.replica import Replica


def find(replica: Replica, owners: Iterable[bytes], thread_id: str) -> str | None:
    """The conversation of `thread_id` this replica holds: the first of `owners` holding one,
    its newest generation. The walk stops at a generation neither held nor forgotten here."""
    for owner in owners:
        newest, generation = None, 0
        while True:
            conv = conv_id(owner, thread_nonce(thread_id, generation))
            if replica.heads(conv):
                newest = conv
            elif not replica.store.forgotten([conv]):
                break
            generation += 1
        if newest is not None:
            return newest
    return None


def next_generation(replica: Replica, thread_id: str) -> tuple[str, int]:
    """The conversation (and generation) this replica's key roots `thread_id` in: the first
    generation it neither holds nor forgot."""
    generation = 0
    while True:
        conv = conv_id(replica.actor, thread_nonce(thread_id, generation))
        if not replica.heads(conv) and not replica.store.forgotten([conv]):
            return conv, generation
        generation += 1


def genesis(thread_id: str, generation: int) -> dict[str, Any]:
    """The genesis payload of a thread's conversation (generation 0's is what it always was)."""
    mark: dict[str, Any] = {"thread_id": thread_id}
    if generation:
        mark["generation"] = generation
    return {"nonce": thread_nonce(thread_id, generation), "title": f"LangGraph thread {thread_id}",
            "meta": {"langgraph": mark}}
