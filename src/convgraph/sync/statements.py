"""The peer's signed word in a session, checked as each reply arrives (docs/integrity.md §2, §3, §5).

Every reply section carries the peer's statement about its conversation: it must verify,
be about that conversation and be signed by the session's one peer key. A record the peer
reports stored counts as stored only when its receipt names it. Gossiped statements by
other keys are kept when they verify and are about the section's conversation. Pure.
Invariant: nothing returned here is a statement that did not verify.
"""

from __future__ import annotations

from convgraph.core.keys import actor_text
from convgraph.errors import ProtocolError, StatementError, UnconfirmedStoreError
from convgraph.integrity.statement import Statement, decode_statement
from convgraph.sync.messages import Section
from convgraph.sync.reconcile import cid_of
from convgraph.sync.reports import ConvReport


def section_statement(s: Section, peer_key: bytes | None) -> Statement:
    """The section's statement, verified, about its conversation, by `peer_key` when known."""
    if s.statement is None:  # the decoder refuses a REPLY section without one
        raise ProtocolError(f"a reply section about {s.conv!r} carries no statement")
    try:
        statement = decode_statement(s.statement)
    except StatementError as exc:
        raise ProtocolError(f"the peer's statement about {s.conv!r} is invalid: {exc}") from exc
    if statement.conv != s.conv:
        raise ProtocolError(
            f"a reply section about {s.conv!r} carries a statement about {statement.conv!r}")
    if peer_key is not None and statement.key != peer_key:
        raise ProtocolError(f"a statement about {s.conv!r} is signed by {actor_text(statement.key)}, "
                            f"not by the peer's key {actor_text(peer_key)}")
    return statement


def confirm(report: ConvReport, stored: set[bytes], receipt: Statement) -> None:
    """Keep as stored at the peer only what its receipt names (docs/integrity.md §3)."""
    named = {c.digest for c in receipt.stored}
    for digest in sorted(stored - named):
        report.stored_there.discard(digest)
        report.unconfirmed[digest] = UnconfirmedStoreError(
            "the peer reported this record stored, but its receipt does not name it",
            cid=cid_of(digest), peer=actor_text(receipt.key))


def gossip_in(s: Section) -> tuple[list[Statement], int]:
    """The statements gossiped in `s` that verify and are about its conversation, and how many
    were dropped."""
    kept: list[Statement] = []
    dropped = 0
    for data in s.gossip:
        try:
            gossiped = decode_statement(data)
        except StatementError:
            gossiped = None
        if gossiped is None or gossiped.conv != s.conv:
            dropped += 1
        else:
            kept.append(gossiped)
    return kept, dropped
