"""The server side of a sync session: answers each message on its own, remembers nothing.

Because every message carries all the responder needs (the session's salt, the ranges in
question, the wants), any number of server instances over one database can serve the
same session, one message each. A base and the records a message brings are taken in
first, so the summary in the reply is the set after them. A push we hold as a header only
goes out as our base (`docs/sync.md`, Compacted history). Each section of a reply carries a
statement signed with the replica's key (docs/integrity.md §2, §3): its clock read after the
section's records were committed and before its set is read, and, as a receipt, naming every
record the report gives as stored; a statement that is no receipt is signed once per state
and reused for a second at most (`sync/statement_cache.py`). Invariant: a reply never holds
more than `budget` bytes of records and bases plus one of either; pushes that do not fit are asked about again
through a fingerprint, never dropped; every record a statement names as stored is in the
set its heads describe.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

from convgraph.core.cid import CID
from convgraph.core.hlc import Clock
from convgraph.core.keys import SigningKey
from convgraph.errors import ProtocolError, StatementError
from convgraph.integrity.statement import Statement, decode_statement, sign_statement
from convgraph.sync import reconcile
from convgraph.sync.artifact_exchange import artifacts_of, fill
from convgraph.sync.decoder import decode
from convgraph.sync.encoder import encode
from convgraph.sync.keyset import INFINITY, MINUS_INFINITY, STRONG_LEN, Bound, Key, KeySet, separating
from convgraph.sync.messages import (
    DEFAULT_LIMITS,
    MAX_GOSSIP,
    MAX_NEEDS,
    Base,
    Fate,
    Kind,
    Message,
    Mode,
    Range,
    Reported,
    Section,
    WireLimits,
)
from convgraph.sync.reconcile import Step, SyncPeer, cid_of
from convgraph.sync.statement_cache import SHARED, StatementCache
from convgraph.sync.witness_hooks import Witness

_FETCH = 256  # records read per store look-up


_STORED = (Fate.ACCEPTED, Fate.RELEASED, Fate.DUPLICATE)


class Responder:
    """Answers sync messages for one replica, signing what it holds with `key` at `clock`
    (statements that are no receipt through `statements`, the process's cache by default).

    `witness` (a replica's memory of statements, `sync.witness_hooks`) takes the gossip an
    INITIATE brings and gives the gossip a reply carries; without one, none is exchanged.
    """

    def __init__(
        self, peer: SyncPeer, *, key: SigningKey, clock: Clock, witness: Witness | None = None,
        budget: int = 4 << 20, limits: WireLimits = DEFAULT_LIMITS, statements: StatementCache = SHARED,
    ) -> None:
        self.peer, self.budget, self.limits, self.statements = peer, budget, limits, statements
        self.key, self.clock, self.witness = key, clock, witness

    def receive(self, data: bytes, *, initiator: bytes | None = None) -> bytes:
        """The reply to one message; `ProtocolError` when it breaks the grammar."""
        return self.answer(decode(data, self.limits), initiator=initiator)

    def answer(self, message: Message, *, initiator: bytes | None = None) -> bytes:
        """The reply to a message already decoded (a server reads it first, to check access).

        `initiator` is the sender's key when the transport knows it: its own statements are
        not gossiped back to it.
        """
        if message.kind is Kind.REPLY:
            raise ProtocolError("a responder was sent a reply", reason="kind")
        left = [self.budget]
        sections = tuple(self._section(message, s, left, initiator) for s in message.sections)
        return encode(Message(Kind.REPLY, message.salt, sections, message.version))

    def _section(self, message: Message, s: Section, left: list[int], initiator: bytes | None) -> Section:
        report: tuple[Reported, ...] | None = None
        adopted: list[Key] = []
        if s.base is not None or s.records:
            outcome = reconcile.take_in(self.peer, s)  # the base's entry first, then one per record
            report, adopted = outcome.report, outcome.adopted
        # a version-3 initiator knows nothing of artifacts: it gets none, and none are asked of it
        art = artifacts_of(self.peer) if message.version >= 4 else None
        if art is not None and s.blocks:  # after the records: they may be what names the blocks
            art.take_blocks(s.conv, s.blocks)
        # the clock first, then the set: the statement describes a state no older than its time
        now = self.clock()
        keys = self.peer.keys(s.conv)
        heads = self.peer.heads(s.conv) if len(keys) else []
        count, strong = reconcile.summary(keys)
        stored = _stored(report or ())
        statement = (sign_statement(self.key, s.conv, count, heads, now, stored=stored) if stored
                     else self.statements.statement(self.key, s.conv, (count, strong, tuple(heads)), now))
        if message.kind is Kind.INITIATE:
            step = self._first(s, keys, message.salt)
        else:
            received = reconcile.received_hashes(message.salt, s.records, adopted)
            step = reconcile.answer(s, keys, message.salt, received)
        records, gone, base = self._push(s.conv, step, keys, left)
        blocks: list[tuple[CID, bytes]] = []
        needs: tuple[CID, ...] = ()
        if art is not None:
            if s.needs:  # after the records: they come first in the budget
                blocks = fill(art.artifact_blocks(s.conv, s.needs), left, self.budget)
            if message.kind is Kind.INITIATE or s.records or s.base is not None or s.needs or s.blocks:
                needs = tuple(art.missing_artifacts(s.conv)[:MAX_NEEDS])
        return Section(
            s.conv, count, strong,
            tip=keys.keys[-1] if message.kind is Kind.INITIATE and keys.keys else None,
            ranges=reconcile.cover(step), wants=tuple(step.wants), records=tuple(records),
            gone=tuple(gone), report=report, base=base, statement=statement.data,
            gossip=self._gossip(s, initiator) if message.kind is Kind.INITIATE else (),
            needs=needs, blocks=tuple(blocks),
        )

    def _gossip(self, s: Section, initiator: bytes | None) -> tuple[bytes, ...]:
        """Take in what the INITIATE gossiped about `s.conv`; what we gossip back (§5)."""
        if self.witness is None:
            return ()
        # what we held before this message: taken after, our latest of a key could be the
        # very statement the initiator just sent, and it would learn nothing from us
        exclude = {self.key.public} | ({initiator} if initiator is not None else set())
        out = [g.data for g in self.witness.gossip_for(s.conv, exclude)
               if g.key not in exclude and g.data not in s.gossip]
        taken = [g for g in (_statement(data) for data in s.gossip)
                 if g is not None and g.conv == s.conv and g.key != self.key.public]
        if taken:
            self.witness.observe_gossip(s.conv, taken)
        return tuple(out[:MAX_GOSSIP])

    def _first(self, s: Section, keys: KeySet, salt: bytes) -> Step:
        """The opening answer: nothing, the peer's missing tail, or the part past a shared prefix."""
        step, n = Step(), len(keys)
        if s.count is None or s.strong == keys.fingerprint(0, n, STRONG_LEN):
            return step
        k = bisect_right(keys.keys, s.tip) if s.tip is not None else 0
        if k < n and keys.fingerprint(0, k, STRONG_LEN) == s.strong:  # the peer holds a prefix of ours
            step.pushes = list(keys.keys[k:])
            return step
        lo = MINUS_INFINITY
        for bound, fp in reversed(s.probes):  # the shortest tail first
            if keys.fingerprint(0, keys.index(bound)) == fp:
                lo = bound
                step.cover.append((MINUS_INFINITY, lo, Range(lo, Mode.SKIP)))
                break
        reconcile.split(keys, lo, INFINITY, salt, step, list_at=reconcile.FIRST_LIST_AT)
        return step

    def _push(
        self, conv: str, step: Step, keys: KeySet, left: list[int]
    ) -> tuple[list[bytes], list[bytes], Base | None]:
        """Records for the pushes that fit in what is `left` of the budget, in key order, and
        the base when a push is held here as a header only (`gone` when there is none)."""
        records: list[bytes] = []
        gone: list[bytes] = []
        base: Base | None = None
        previous = None
        pushes = sorted(set(step.pushes))
        for at in range(0, len(pushes), _FETCH):
            chunk = pushes[at : at + _FETCH]
            for key, data in zip(chunk, self.peer.fetch([k[1] for k in chunk]), strict=True):
                if data is None and base is None and not gone:
                    base = reconcile.base_for(self.peer, conv, self.limits)
                    size = 0 if base is None else base.size()
                    if size > left[0] and left[0] < self.budget:  # like a record that does not fit
                        reconcile.reopen(step, keys, _after(previous, key))
                        return records, gone, None
                    left[0] -= size
                if data is None:
                    if base is None:
                        gone.append(key[1])
                    else:
                        previous = key  # the base carries it: a part asked for again starts past it
                    continue
                if len(data) > left[0] and left[0] < self.budget:  # one record always fits an empty reply
                    reconcile.reopen(step, keys, _after(previous, key))
                    return records, gone, base
                records.append(data)
                left[0] -= len(data) + 4
                previous = key
        if base is not None:  # the base carries its checkpoint
            records = [r for r in records if r != base.checkpoint]
        return records, gone, base


def _stored(report: Iterable[Reported]) -> list[CID]:
    """The records a report gives as stored: a digest's first entry decides, since a second
    copy of a rejected or waiting record in one message is reported DUPLICATE."""
    first: dict[bytes, Fate] = {}
    for e in report:
        if e.fate is not Fate.REJECTED_AT:
            first.setdefault(e.digest, e.fate)
    return [cid_of(d) for d, fate in first.items() if fate in _STORED]


def _statement(data: bytes) -> Statement | None:
    """A gossiped statement, or None when it does not verify: gossip never refuses a sync."""
    try:
        return decode_statement(data)
    except StatementError:
        return None


def _after(previous: Key | None, key: Key) -> Bound:
    """Where the part the peer must ask for again starts: just past the last key sent."""
    return MINUS_INFINITY if previous is None else separating(previous, key)
