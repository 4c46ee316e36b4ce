"""`POST /v1/sync`: one sync message answered by the stateless `Responder`, for one key.

A body of at most `inline_bytes` is answered whole in one worker thread, nonce log, decoding
and all; anything bigger is decoded in a worker thread, at most `decoders` at once, and a key
has at most `per_key` requests in flight. A section's records land in parts of at most
`part` records: each part is decoded (signatures checked) holding no lock, then judged against
the store and committed holding only its conversation's writer lock (`ConvLocks.writing`), which
is let go between parts, so work on other conversations never waits for a push, and readers of
the same one see each part once it commits; while other sync requests are in flight, a push
of many parts pauses after each as long as the part took, so they get at least half the
interpreter and the store. The parts' reports are merged into one, as one ingest would have
made it. A small message that pushes records in one part a section lands them all in one
transaction with its nonce (`_Landing`): one commit a message. Invariant: each section's
conversation is admitted
(`Gate.check_read`) before its body is decoded, and each part is judged and stored in one hold
of its conversation's writer lock with the push check, so a revocation that lands first refuses
that part and every later one.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from convgraph.core.cid import CID
from convgraph.core.hlc import Clock
from convgraph.core.keys import actor_text
from convgraph.errors import LockOrderError, MissingExtraError, ServerBusyError, UnauthenticatedError
from convgraph.replica import Replica
from convgraph.replica.ingest import IngestReport, Item, prepared
from convgraph.server.gate import Gate
from convgraph.server.hop import Hop
from convgraph.server.nonces import joinable
from convgraph.sync import fates, wire
from convgraph.sync.artifact_exchange import BlockOutcome
from convgraph.sync.auth import Signed, Verifier
from convgraph.sync.live import Hub
from convgraph.sync.messages import Base, Message
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.reconcile import Outcome, refusal
from convgraph.sync.responder import Responder
from convgraph.sync.witness_hooks import witness_of

try:  # the [server] extra: without it, a typed error that says what to install
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
except ModuleNotFoundError as exc:
    raise MissingExtraError("server", "the sync server", module=exc.name) from exc

SYNC_TYPE = "application/vnd.convgraph.sync"


PartHook = Callable[[str, int], None]
"""Called after each part of a push commits (conversation, records landed so far), holding no
lock: a test's barrier between parts."""


class _Peer(ReplicaPeer):
    """The replica seen by one request: it takes records only into the conversations its key
    may push to, asked afresh for each part under the writer lock that part's ingest then holds
    (so a revocation that lands first refuses it), and it adopts a base only when the checkpoint
    is signed by the server's own key or by the requesting key in a conversation it may push to."""

    def __init__(self, replica: Replica, gate: Gate, actor: bytes, ring: Callable[[str], None], *,
                 part: int, landed: PartHook | None = None,
                 others: Callable[[], bool] = lambda: False,
                 landing: _Landing | None = None) -> None:
        super().__init__(replica, adopt_from=lambda conv, signer: signer == replica.actor or (
            signer == actor and gate.push_refusal(actor, conv) is None))
        self.gate, self.actor, self.ring, self.part, self.landed = gate, actor, ring, part, landed
        self.others = others
        self.landing = landing  # a small push: its sections land in one transaction with the nonce

    def adopt(self, conv: str, base: Base) -> Outcome:
        with self.gate.locks.writing(conv):
            why = self.gate.push_refusal(self.actor, conv)
            if why is not None:
                return refusal(CID.of_record(base.checkpoint).digest, "forbidden", why)
            outcome = super().adopt(conv, base)
        if outcome.accepted:
            self.ring(conv)
        return outcome

    def take_blocks(self, conv: str, blocks: Sequence[tuple[CID, bytes]]) -> BlockOutcome:
        # blocks are pushed under the same condition as records, judged in the same hold
        with self.gate.locks.writing(conv):
            why = self.gate.push_refusal(self.actor, conv)
            if why is None:
                return super().take_blocks(conv, blocks)
        return BlockOutcome(refused=[(cid, "forbidden", why) for cid, _ in blocks])

    def ingest(self, conv: str, records: Sequence[bytes], *, report: bool = True) -> Outcome:
        if self.landing is not None:
            return self._ingest_landing(self.landing, conv, records, report=report)
        parts: list[IngestReport] = []  # merged once at the end: each part costs only itself
        refused: set[CID] = set()
        limits = self.replica.config.limits
        for start in range(0, max(len(records), 1), self.part):
            chunk = records[start:start + self.part]
            began = time.monotonic()
            items = prepared(chunk, limits)  # signatures checked holding no lock at all
            with self.gate.locks.writing(conv):
                why = self.gate.push_refusal(self.actor, conv)
                if why is not None:
                    merged = IngestReport.merged(parts) if parts else None
                    return self._refused(conv, records, merged, start, why, report=report)
                taken = self.take(conv, items, refused=refused)
            refused.update(r.cid for r in taken.rejected if r.cid is not None)
            parts.append(taken)
            if taken.accepted:
                self.ring(conv)
            if self.landed is not None:
                self.landed(conv, start + len(chunk))
            if start + self.part < len(records) and self.others():
                # a push of many parts gives way while other requests wait: as long again as
                # its part took, so they get at least half the interpreter and the file
                time.sleep(time.monotonic() - began)
        assert parts  # one part at least, even of no records
        return self.outcome(conv, records, IngestReport.merged(parts), report=report)

    def _ingest_landing(self, landing: _Landing, conv: str, records: Sequence[bytes], *,
                        report: bool) -> Outcome:
        """One section in the message's transaction (begun by the first section, committed
        after the last), under the writer locks taken for it."""
        why = landing.begin()[conv]
        if why is not None:
            landing.done(conv, accepted=False)
            return self._refused(conv, records, None, 0, why, report=report)
        before = landing.decoded.get(conv)
        # the very records decoded before the transaction began, or decoded now
        items = before[1] if before is not None and before[0] is records else prepared(
            records, self.replica.config.limits)
        taken = self.take(conv, items)
        landing.done(conv, accepted=bool(taken.accepted))  # after the last section: committed
        return self.outcome(conv, records, taken, report=report)

    def _refused(self, conv: str, records: Sequence[bytes], merged: IngestReport | None, start: int,
                 why: str, *, report: bool) -> Outcome:
        """The push refused from part `start` on (the key lost the right to push meanwhile):
        what landed before stands, the rest is rejected as `forbidden`."""
        limit = self.replica.config.limits.max_record_bytes
        rest = fates.refused(records[start:], "forbidden", max_bytes=limit)
        rejected = [(r.digest or None, r.rule, why) for r in rest]
        if merged is None:
            return Outcome(rejected=rejected, report=rest)
        landed = self.outcome(conv, records[:start], merged, report=report)
        # the pushed records' entries in order, then the releases of records pushed before
        entries = (*landed.report[:start], *rest, *landed.report[start:]) if report else ()
        return Outcome(accepted=landed.accepted, quarantined=landed.quarantined,
                       rejected=[*landed.rejected, *rejected], report=entries)


class _InFlight:
    """Sync requests in flight per key: one key cannot take every decoder and worker thread."""

    def __init__(self, limit: int) -> None:
        self.limit, self.counts, self.total = limit, dict[bytes, int](), 0
        self._lock = threading.Lock()  # held from the event loop and from worker threads

    @contextlib.contextmanager
    def hold(self, actor: bytes) -> Iterator[None]:
        with self._lock:
            held = self.counts.get(actor, 0)
            if held >= self.limit:
                raise ServerBusyError("too many requests from this key", limit=self.limit,
                                      reason=f"key {actor_text(actor)} has {held} sync requests in flight")
            self.counts[actor] = held + 1
            self.total += 1
        try:
            yield
        finally:
            with self._lock:
                self.total -= 1
                self.counts[actor] -= 1
                if not self.counts[actor]:
                    del self.counts[actor]


class SyncEndpoint:
    """The sync route over one replica: its peers share one key cache and ring `hub` on a push."""

    def __init__(self, replica: Replica, gate: Gate, verifier: Verifier, hub: Hub, clock: Clock, *,
                 budget: int, inline_bytes: int, decoders: int, per_key: int, part: int,
                 landed: PartHook | None = None) -> None:
        self.replica, self.gate, self.verifier, self.hub, self.clock = replica, gate, verifier, hub, clock
        self.budget, self.inline_bytes, self.part, self.landed = budget, inline_bytes, part, landed
        self.keys, self.witness = ReplicaPeer(replica), witness_of(replica)
        self.decoders, self.in_flight = asyncio.Semaphore(decoders), _InFlight(per_key)
        self.joined = joinable(verifier.nonces, replica.store)  # None: the nonce goes first, alone
        self.hop = Hop()  # a third of `run_in_threadpool`'s CPU, for the one hop a small message makes

    async def sync(self, _: Request, signed: Signed, body: bytes) -> Response:
        if len(body) <= self.inline_bytes:
            reply = await self.hop(self._answer_whole, signed, body)
        else:
            actor = await run_in_threadpool(self.verifier.record, signed)
            with self.in_flight.hold(actor):
                async with self.decoders:
                    message = await run_in_threadpool(wire.decode, body, admit=self._admit(actor))
                reply = await run_in_threadpool(self._answer, actor, message)
        return Response(reply, media_type=SYNC_TYPE)

    def _answer_whole(self, signed: Signed, body: bytes) -> bytes:
        """A small message from nonce to reply in one worker thread. One that pushes records
        (each section's in one part) is landed with its nonce in one transaction; any other
        records its nonce first. Either way a request that fails has its nonce recorded, and
        a replay is refused (401) before any other error, as in docs/sync.md's order of checks."""
        if self.joined is None:
            actor = self.verifier.record(signed)
            with self.in_flight.hold(actor):
                return self._answer(actor, wire.decode(body, admit=self._admit(actor)))
        recorded = False
        try:
            with self.in_flight.hold(signed.actor):  # held while decoding too, as on the path above
                message = wire.decode(body, admit=self._admit(signed.actor))
                pushed = _pushed(message, self.part)
                if pushed is None:
                    actor = self.verifier.record(signed)
                    recorded = True
                    return self._answer(actor, message)
                try:
                    reply, recorded = self._answer_landing(signed, message, pushed)
                except LockOrderError:
                    # a release needed another conversation's lock out of order and another writer
                    # held it: rolled back whole, so land it as a large push lands, in parts whose
                    # ingest runs again holding every lock it needs in order
                    actor = self.verifier.record(signed)
                    recorded = True
                    return self._answer(actor, message)
                if not recorded:  # no section was landed after all: the nonce goes alone
                    self.verifier.record(signed)
                    recorded = True
                return reply
        except UnauthenticatedError:
            raise
        except BaseException:
            if not recorded:  # rolled back, or never begun: the nonce is recorded on its own
                self.verifier.record(signed)  # a replay: its 401 replaces the error
            raise

    def _answer_landing(self, signed: Signed, message: Message, pushed: list[str]) -> tuple[bytes, bool]:
        """`_answer` for a small push, its sections landed in one transaction with the nonce
        (`_Landing`); and whether that transaction committed (else the nonce is not recorded)."""
        limits = self.replica.config.limits
        decoded: dict[str, tuple[Sequence[bytes], list[Item]]] = {
            s.conv: (s.records, prepared(s.records, limits))  # signatures checked holding no lock
            for s in message.sections if s.records}
        with contextlib.ExitStack() as stack:
            landing = _Landing(self, signed, pushed, decoded, stack)
            reply = self._respond(self._peer(signed.actor, landing=landing), signed.actor, message)
            landing.finish()
        return reply, landing.committed

    def _admit(self, actor: bytes) -> Callable[[str], None]:
        def admit(conv: str) -> None:  # each section's name, before its body is decoded
            self.gate.check_read(actor, [conv])

        return admit

    def _answer(self, actor: bytes, message: Message) -> bytes:
        return self._respond(self._peer(actor), actor, message)

    def _peer(self, actor: bytes, *, landing: _Landing | None = None) -> _Peer:
        peer = _Peer(self.replica, self.gate, actor, self.hub.ring, part=self.part, landed=self.landed,
                     others=lambda: self.in_flight.total > 1, landing=landing)
        peer.share_cache(self.keys)
        return peer

    def _respond(self, peer: _Peer, actor: bytes, message: Message) -> bytes:
        responder = Responder(peer, key=self.replica.key, clock=self.clock, witness=self.witness,
                              budget=self.budget)
        return responder.answer(message, initiator=actor)


class _Landing:
    """The one transaction of a small push: begun at its first section's ingest (the writer
    locks of every pushed conversation in name order, their push checks, `BEGIN`, the nonce)
    and committed after its last, so the locks and the file are held for judging and landing
    only, not while the reply is built. What the transaction read is kept once it commits
    (`ConvCache.landing`); the hub is rung and `landed` called after the commit."""

    def __init__(self, endpoint: SyncEndpoint, signed: Signed, pushed: list[str],
                 decoded: dict[str, tuple[Sequence[bytes], list[Item]]], stack: contextlib.ExitStack) -> None:
        self.endpoint, self.signed, self.pushed = endpoint, signed, pushed
        self.decoded, self.stack = decoded, stack
        self.left, self.rung = set(pushed), set[str]()
        self.refusals: dict[str, str | None] | None = None  # None: not begun
        self.committed = False

    def begin(self) -> dict[str, str | None]:
        """The push checks, the transaction begun at the first call."""
        if self.refusals is not None:
            return self.refusals
        assert not self.committed
        end, stack, actor = self.endpoint, self.stack, self.signed.actor
        for conv in self.pushed:  # in name order: every holder of two or more takes them so
            stack.enter_context(end.gate.locks.writing(conv))
        refusals = {conv: end.gate.push_refusal(actor, conv) for conv in self.pushed}
        stack.enter_context(end.keys.cache.landing())
        stack.enter_context(end.replica.transaction(*self.pushed))
        assert end.joined is not None
        if not end.joined.first_use_in(end.replica.store, actor, self.signed.nonce, self.signed.expires_ms,
                                       self.signed.now_ms):
            raise UnauthenticatedError("replayed request", reason="this nonce was already used")
        self.refusals = refusals
        return refusals

    def done(self, conv: str, *, accepted: bool) -> None:
        """`conv`'s section is landed; after the last one, commit."""
        if accepted:
            self.rung.add(conv)
        self.left.discard(conv)
        if not self.left:
            self.finish()

    def finish(self) -> None:
        """Commit what is open (a section the responder left alone leaves it open); then
        ring the hub and call the part hook, holding no lock."""
        if self.refusals is None or self.committed:
            return
        self.stack.close()  # the commit, the cache's states kept, the writer locks let go
        self.committed = True
        for conv in sorted(self.rung):
            self.endpoint.hub.ring(conv)
        if self.endpoint.landed is not None:
            for conv, (records, _) in sorted(self.decoded.items()):
                self.endpoint.landed(conv, len(records))


def _pushed(message: Message, part: int) -> list[str] | None:
    """The conversations whose records `message` pushes, in name order, when it pushes some, each
    section's in one part, and no base or block (those land on their own); None otherwise."""
    convs: set[str] = set()
    for section in message.sections:
        if section.base is not None or section.blocks or len(section.records) > part:
            return None
        if section.records:
            convs.add(section.conv)
    return sorted(convs) or None
