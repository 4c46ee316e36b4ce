"""Statements reused while the state they describe stands (docs/integrity.md §2.3).

A statement that is no receipt says: at `time` this key held `count` records of the
conversation with these heads. While the set is the same (count, strong fingerprint and
heads), a statement signed for it is still true, and its time still comes before the state
was read, so a responder answering many idle syncs signs once per state, not per request.
It is reused for at most `max_age_ms` (`ORDER_SLACK_MS`, far inside the initiator's
`FRESHNESS_MS`), and never when the clock went back past it. Receipts (`stored`) are always
signed afresh. Invariant: a statement handed out names exactly the count and heads asked
for, and its time is no later than now and at most `max_age_ms` before it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from convgraph.core.cid import CID
from convgraph.core.keys import SigningKey
from convgraph.integrity.statement import ORDER_SLACK_MS, Statement, sign_statement

__all__ = ["SHARED", "StatementCache"]

class StatementCache:
    """The last statement signed per (key, conversation), with the state it describes."""

    def __init__(self, *, max_age_ms: int = ORDER_SLACK_MS, size: int = 4096) -> None:
        self.max_age_ms, self.size = max_age_ms, size
        self._held: OrderedDict[tuple[bytes, str], tuple[tuple[int, bytes, tuple[CID, ...]], Statement]] = (
            OrderedDict())
        self._lock = threading.Lock()
        self.signed = 0  # statements signed here: for tests and benches

    def statement(self, key: SigningKey, conv: str, state: tuple[int, bytes, tuple[CID, ...]],
                  now_ms: int) -> Statement:
        """A statement by `key` that `conv` holds `state` (count, strong fingerprint, heads),
        taken at `now_ms` or at most `max_age_ms` before it."""
        count, _, heads = state
        slot = (key.public, conv)
        with self._lock:
            hit = self._held.get(slot)
        if hit is not None and hit[0] == state and 0 <= now_ms - hit[1].time_ms <= self.max_age_ms:
            return hit[1]
        made = sign_statement(key, conv, count, heads, now_ms)
        with self._lock:
            self.signed += 1
            self._held[slot] = (state, made)
            self._held.move_to_end(slot)
            while len(self._held) > self.size:
                self._held.popitem(last=False)
        return made


SHARED = StatementCache()
"""The process's cache: every responder uses it unless given another."""
