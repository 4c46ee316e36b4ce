"""Authoring: the replica's own records, signed and stored, and the clock they are stamped by.

Each record's parents are the conversation's heads plus its author's previous record (for
a run of drafts: the previous draft), its seq the next of its author's chain, its hlc past
every parent's and the replica's clock. In a rooted conversation the authority state must
allow each draft before it is signed. Invariant: `hlc` is never behind a record this
replica wrote or accepted (`received`), and a run of drafts lands in one transaction or not
at all. Writers of different conversations run at once (each holds only its conversation's
lock), so every read-and-move of `hlc` is one step under the writer's clock lock: a merge
never overwrites a later stamp with an earlier one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from convgraph.core import hlc as hlc_
from convgraph.core import suggestions
from convgraph.core.cid import CID
from convgraph.core.hlc import Clock, Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import Limits, Record, sign_record
from convgraph.core.rooted import is_rooted
from convgraph.errors import LegacyConversationError
from convgraph.projections import authority as authority_
from convgraph.replica import collector, turn_index
from convgraph.replica.drafts import Draft
from convgraph.replica.folds import Folds
from convgraph.store.base import Store
from convgraph.store.rows import WriteSet


class Writer:
    """Authors records into one store, keeping the replica's hybrid logical clock."""

    def __init__(self, store: Store, folds: Folds) -> None:
        self.store = store
        self.folds = folds
        self.hlc = store.max_hlc()
        self._clock = threading.Lock()  # `hlc` is read and moved as one step (see the module)
        # what `write` left behind per conversation, valid while the store's change
        # token is the one read at that commit: saves three look-ups per local write
        self._tips: tuple[object, dict[str, tuple[set[CID], int, list[Hlc]]]] = (None, {})

    def write(
        self, key: SigningKey, conv: str, drafts: Iterable[Draft], *, clock: Clock, limits: Limits
    ) -> list[Record]:
        """Sign `drafts` by `key` into `conv` in one transaction, each one's parent the previous."""
        out: list[Record] = []
        with collector.paused(), self.store.transaction(conv):  # holds off only `conv`'s writers
            token, tips = self._tips
            if token != self.store.change_token():
                tips = {}
            parents, seq, seen = tips.get(conv) or self._tip_from_store(key.public, conv)
            authority = self.folds.authority(conv)
            for draft in drafts:
                stamp = self._stamp(seen, clock())
                if authority is not None:  # before signing: say which capability is missing
                    authority_.require(authority, key.public, draft.kind, draft.payload,
                                       heads=parents, at_ms=stamp.wall_ms)
                record = sign_record(
                    key, conv=conv, seq=seq, hlc=stamp, parents=parents, kind=draft.kind,
                    payload=draft.payload, refs=draft.refs, branch=draft.branch, limits=limits,
                )
                if authority is not None:  # the graph rules need the signed record's parents
                    authority_.check(authority, record)
                    authority_.apply(authority, record)
                    self.folds.added(conv, [record.cid])
                out.append(record)
                self._signed(stamp)
                seen, parents, seq = [], {record.cid}, seq + 1
            self.store.commit(WriteSet(records=out, fresh=True))
            turn_index.keep_hidden(self.store, [(conv, authority)])
            token = self.store.change_token()
        if authority is not None:
            self.folds.confirmed([conv])
        if out:  # one assignment: a concurrent writer sees an old pair or a new one, never a mix
            self._tips = (token, {**tips, conv: ({out[-1].cid}, seq, [out[-1].hlc])})
        return out

    def received(self, hlcs: Iterable[Hlc], now_ms: int) -> None:
        """Merge the stamps of records accepted from elsewhere, with the clock read at `now_ms`."""
        with self._clock:
            self.hlc = hlc_.receive_all(self.hlc, hlcs, now_ms)

    def _stamp(self, seen: Iterable[Hlc], now_ms: int) -> Hlc:
        """The next stamp of a record written after `seen` (the clock moves once it is signed)."""
        with self._clock:
            return hlc_.after_all(self.hlc, seen, now_ms)

    def _signed(self, stamp: Hlc) -> None:
        """A record stamped `stamp` was signed: the clock is never behind it."""
        with self._clock:
            self.hlc = max(self.hlc, stamp)

    def _tip_from_store(self, actor: bytes, conv: str) -> tuple[set[CID], int, list[Hlc]]:
        """What the next record in `conv` builds on: the heads plus our previous record."""
        parents = set(self.store.heads(conv))
        last = self.store.last_own(actor, conv)
        if last is not None:
            parents.add(last.cid)
        seen = [m.hlc for m in self.store.metas(parents).values()]
        return parents, 1 if last is None else last.seq + 1, seen


def refuse_legacy(conv: str, *, allowed: bool) -> None:
    """`LegacyConversationError` for a legacy `conv` (its id names no owner) unless `allowed`."""
    if not (allowed or is_rooted(conv)):
        raise LegacyConversationError(
            f"{conv[:64]!r} is a legacy conversation (its id names no owner), so this replica "
            f"writes nothing into it; `{suggestions.MIGRATE(conv=conv)}` starts a rooted copy",
            conv=conv,
        )
