"""Who may read and push which conversation on a sync server (docs/authority.md §9).

A rooted conversation the server holds answers from its authority projection: a key may read
it, and push records to it, when `who_can(key, "read")` says yes; each pushed record is then
judged on its own author by ingest. A rooted conversation the server holds no genesis of may be
pushed (created) and read by the keys the configuration lets write it; any other key is refused
exactly as in a held conversation where it has no grant, so a refusal never tells whether a
conversation exists. Legacy conversations keep the configuration's rules (`access.py`).
Every answer about a rooted conversation comes from a facade of its own (`Replica.reader`), folded
from committed records only, under that conversation's reader lock (`ConvLocks.reading`), which no
writer takes: a read check never waits for a push, and a push of another conversation never
waits for it. Invariant: every answer is the projection of the records committed when it was
taken, never of an ingest half done.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from convgraph.core import suggestions
from convgraph.core.keys import actor_text
from convgraph.core.rooted import is_rooted
from convgraph.errors import ForbiddenError, NotFoundError, ProjectionError
from convgraph.projections.authority import READ, Answer, Authority
from convgraph.projections.authority_json import authority_json
from convgraph.replica import Replica
from convgraph.server.access import ANY, RESERVED, Access, allow_hint
from convgraph.server.conv_locks import ConvLocks
from convgraph.server.members import MemberIndex

READ_ONLY = "this key may read but not write the conversation"


class Gate:
    """The access questions of the server's routes, for one replica and configuration.

    `replica` is the facade the answers are folded in: give it one no writer ingests through
    (`Replica.reader()`), so its folds hold committed records only.
    """

    def __init__(self, replica: Replica, access: Access, locks: ConvLocks) -> None:
        self.replica, self.access, self.locks = replica, access, locks
        self.members = MemberIndex(replica.store)

    def named(self, actor: bytes) -> bool:
        """The cheap check (memory only): the configuration or the member index names `actor`."""
        return self.access.names(actor) or self.members.known(actor)

    def check_named(self, actor: bytes) -> None:
        """Raise `ForbiddenError` unless `actor` is named: refreshes the index when the store moved."""
        if not self.members.knows(actor):
            self.access.check_named(actor)

    def check_read(self, actor: bytes, convs: Iterable[str]) -> None:
        """Raise `ForbiddenError` for the first conversation of `convs` that `actor` may not read."""
        names = sorted(set(convs))
        legacy = [c for c in names if not is_rooted(c)]
        if legacy:
            self.access.check_read(actor, legacy)
        for conv in names:
            if is_rooted(conv):
                refusal = self._refusal(actor, conv)
                if refusal is not None:
                    raise refusal

    def can_read(self, actor: bytes, conv: str) -> bool:
        """Whether `actor` may read `conv` (the records route answers 404 when it may not)."""
        if not is_rooted(conv):
            return self.access.can_read(actor, conv)
        return self._refusal(actor, conv) is None

    def push_refusal(self, actor: bytes, conv: str) -> str | None:
        """Why `actor` may not push records to `conv`, or None when it may.

        Call it holding `conv`'s writer lock with the ingest it guards, so no grant or revocation
        lands through this process between the answer and the records it admits.
        """
        if not is_rooted(conv):
            if conv == ANY:
                return RESERVED
            return None if self.access.can_write(actor, conv) else READ_ONLY
        refusal = self._refusal(actor, conv)
        return None if refusal is None else refusal.reason

    def projection(self, actor: bytes, conv: str) -> dict[str, Any]:
        """The authority projection of `conv` as JSON, for a key that may read it.

        Raises `ForbiddenError` for any other key, `ProjectionError` for a legacy conversation
        and `NotFoundError` for a rooted one held without its genesis (a creator's, not yet pushed).
        """
        if not is_rooted(conv):
            self.access.check_read(actor, [conv])
            raise ProjectionError(f"conversation {conv[:64]!r} is legacy: it has no authority projection")
        with self.locks.reading(conv):  # one hold: the answer and the projection it admits agree
            refusal = self._refused(actor, conv)
            if refusal is not None:
                raise refusal
            return authority_json(self.replica.authority(conv))

    def _refusal(self, actor: bytes, conv: str) -> ForbiddenError | None:
        """The refusal of `read` in rooted `conv`, or None, from its last committed records."""
        with self.locks.reading(conv):
            return self._refused(actor, conv)

    def _refused(self, actor: bytes, conv: str) -> ForbiddenError | None:
        """`_refusal`, for a caller holding `conv`'s reader lock."""
        try:
            authority: Authority | None = self.replica.authority(conv)
        except NotFoundError:
            authority = None
        if authority is None:  # not held here: only a key that may create it may read it
            if self.access.can_write(actor, conv):
                return None
            answer = Answer(False, actor, READ, reason="no grant")
        else:
            answer = authority.who_can(actor, READ)
            if answer.allowed:
                return None
        return refused(conv, answer)


def refused(conv: str, answer: Answer) -> ForbiddenError:
    """The 403 for an answer that says no, citing the revocations in the way or the lack of a grant.

    Without a grant, the hint names both ways in (the `--allow` rule that lets the key create the
    conversation, and a grant once it is held), so it does not tell whether the server holds it.
    """
    blocked = tuple(str(u) for u in answer.blocked_by)
    because = f"revoked by {', '.join(blocked)}" if blocked else "no grant of it"
    who, cap = actor_text(answer.actor), answer.capability
    grant = suggestions.GRANT(actor=who, capability=cap, conv=conv)
    hint = "" if blocked else (
        f"{allow_hint(answer.actor, [conv])} if it holds none of the conversation yet; "
        f"if it does, only a grant in it admits the key: `{grant}`")
    return ForbiddenError("no access", reason=f"key {who} lacks `{cap}` in conversation {conv}: {because}",
                          conv=conv, capability=cap, blocked_by=blocked, hint=hint)
