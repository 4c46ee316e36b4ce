"""Group commit for the durable nonce log: requests that arrive together share one write.

docs/sync.md wants every nonce recorded before its request acts, and remembered across a
restart. One transaction per request costs a commit per request (an fsync under
`synchronous=FULL`, a WAL flush on PostgreSQL), taken on the store's one writer between
ingests. Here the first caller that finds no write under way leads: it takes every nonce
queued so far, records them in one transaction (`first_use_many`), gives each caller its
answer, and goes again while more wait; the others wait for their answer. The checks are
the log's own, in arrival order, so two requests with one nonce in one batch get one yes.

A sync message that writes records can instead record its nonce inside the transaction that
lands them (`JoinedNonceLog.first_use_in`): one commit for the message, and the nonce is
committed exactly when what the request did is.

Invariant: `first_use` answers True only once its nonce is committed; a batch that fails
fails each of its callers, and none of its nonces counts as used by us.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from convgraph.errors import ConvgraphError, NonceLogFullError
from convgraph.store.base import Store
from convgraph.store.sqlite import SqliteNonces
from convgraph.sync.auth import NonceLog

__all__ = ["BatchNonceLog", "GroupedNonces", "JoinedNonceLog", "SqliteBatchNonces", "grouped", "joinable"]

Use = tuple[bytes, str, int, int]  # actor, nonce, expires_ms, now_ms: `NonceLog.first_use`'s arguments


@runtime_checkable
class BatchNonceLog(Protocol):
    """A nonce log that records many nonces in one transaction."""

    def first_use_many(self, uses: Sequence[Use]) -> list[bool | ConvgraphError]:
        """`first_use` of each, in order, committed together: its answer, or the error that
        refused that one alone (the log is full). Raises when the transaction fails."""
        ...


@runtime_checkable
class JoinedNonceLog(Protocol):
    """A nonce log that can record a nonce inside a store's open write transaction."""

    def joins(self, store: Store) -> bool:
        """Whether `first_use_in` can run inside `store`'s transactions (the log lives in it)."""
        ...

    def first_use_in(self, store: Store, actor: bytes, nonce: str, expires_ms: int, now_ms: int) -> bool:
        """`first_use`, inside the transaction this thread holds open on `store`: committed
        with it, or rolled back with it."""
        ...


class SqliteBatchNonces(SqliteNonces):
    """`SqliteNonces` that can record a batch in one transaction of the replica's file."""

    def first_use_many(self, uses: Sequence[Use]) -> list[bool | ConvgraphError]:
        out: list[bool | ConvgraphError] = []
        with self._store.transaction():  # each `first_use` joins it: one commit for all
            for use in uses:
                try:
                    out.append(self.first_use(*use))
                except NonceLogFullError as exc:  # raised before its insert: the rest go on
                    out.append(exc)
        return out

    def joins(self, store: Store) -> bool:
        return store is self._store

    def first_use_in(self, store: Store, actor: bytes, nonce: str, expires_ms: int, now_ms: int) -> bool:
        assert store is self._store
        assert store.in_transaction()
        return self.first_use(actor, nonce, expires_ms, now_ms)  # joins the open transaction


@dataclass(eq=False)
class _Waiting:
    use: Use
    wake: threading.Event = field(default_factory=threading.Event)
    answer: bool | BaseException | None = None  # None: not yet
    leads: bool = False


class GroupedNonces:
    """A `NonceLog` that commits the nonces of concurrent requests together (at most
    `max_batch` per transaction). A leader writes until its own nonce is answered, then
    hands the lead to the first still waiting, so no request waits on more than the
    batches ahead of it."""

    def __init__(self, log: BatchNonceLog, *, max_batch: int = 512) -> None:
        self.log, self.max_batch = log, max_batch
        self._lock = threading.Lock()
        self._queue: list[_Waiting] = []
        self._leading = False
        self.batches = 0  # transactions made: for tests and benches

    def first_use(self, actor: bytes, nonce: str, expires_ms: int, now_ms: int) -> bool:
        me = _Waiting((actor, nonce, expires_ms, now_ms))
        with self._lock:
            self._queue.append(me)
            if not self._leading:
                self._leading = me.leads = True
        while me.answer is None:
            if me.leads:
                self._write()
            else:
                me.wake.wait()
                me.wake.clear()
        if me.leads:
            self._hand_over()
        if isinstance(me.answer, BaseException):
            raise me.answer
        return me.answer

    def _write(self) -> None:
        """One batch from the front of the queue, committed; each of its callers answered."""
        with self._lock:
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
        try:
            answers: Sequence[bool | BaseException] = self.log.first_use_many([w.use for w in batch])
            self.batches += 1
        except BaseException as exc:  # each caller gets it raised, none loses it
            answers = [exc] * len(batch)
        for waiting, answer in zip(batch, answers, strict=True):
            waiting.answer = answer
            waiting.wake.set()

    def _hand_over(self) -> None:
        with self._lock:
            if not self._queue:
                self._leading = False
                return
            nxt = self._queue[0]
            nxt.leads = True
        nxt.wake.set()


def joinable(log: NonceLog, store: Store) -> JoinedNonceLog | None:
    """The log under `log` (and its group commit) when it can record inside `store`'s transactions."""
    inner = log.log if isinstance(log, GroupedNonces) else log
    return inner if isinstance(inner, JoinedNonceLog) and inner.joins(store) else None


def grouped(log: NonceLog) -> NonceLog:
    """`log` behind a group commit when it can record batches; as it is otherwise."""
    return GroupedNonces(log) if isinstance(log, BatchNonceLog) else log
