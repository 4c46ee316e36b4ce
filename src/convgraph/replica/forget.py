"""Forgetting a conversation: dropping it from this replica's disk, and only from it.

Deleting a record on a signed replica cannot mean erasing it everywhere: other replicas hold
their own copies and verify them by their own signatures. What one replica can do is stop
holding a conversation: `forget` drops every record of it, every row the store keeps for it
and the artifact blocks no other conversation names, in one store transaction, then keeps
a tombstone (its id) so that sync never brings it back. Nothing is signed or written to the
DAG, so other replicas keep the conversation whole (docs/conversation.md, *Forgetting a
conversation*). Invariant: after `forget(conv)` the store answers every query about `conv`
as a store that never held it, and refuses its records.
"""

from __future__ import annotations

from convgraph.core.text import check_text
from convgraph.errors import ForgottenConversationError, UnknownConversationError
from convgraph.store.base import Store


def forget(store: Store, conv: str) -> None:
    """Drop `conv` from `store` and remember it as forgotten (one transaction; then, on SQLite,
    the freed pages go back to the file system). Raises `UnknownConversationError` when the
    store holds no record of it, forgotten or never held."""
    check_text(conv, "conv")
    if not store.heads(conv):
        why = "was forgotten already" if store.forgotten([conv]) else "is not held"
        raise UnknownConversationError(f"conversation {conv!r} {why} in this replica", conv=conv,
                                       known=tuple(store.conversations()))
    # not inside a transaction of ours: the store shrinks its file only after its own commits
    store.forget(conv)


def refuse_forgotten(store: Store, conv: str) -> None:
    """Raise `ForgottenConversationError` when `conv` was forgotten: a write would root part of
    it again, which no other replica's copy would agree with."""
    if store.forgotten([conv]):
        raise ForgottenConversationError(
            f"conversation {conv!r} was forgotten by this replica: it writes nothing into it", conv=conv)
