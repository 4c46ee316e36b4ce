"""Signed HTTP requests: who sent a request, and proof that it is fresh and untouched.

A client signs `convgraph/http/v1`, the method, the path with its query, the sha-256 of the
body, a millisecond timestamp and a random nonce with its actor key, and sends them as
`X-Convgraph-*` headers. The server accepts a signature only within `window_ms` of its own
clock and only once per nonce (`NonceLog`). The clock is passed in. Invariant: a request
`verify` accepts was signed by the key it names, for these exact bytes, and was not
accepted before.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from convgraph.core import keys
from convgraph.core.keys import SigningKey
from convgraph.errors import ConvgraphError, NonceLogFullError, UnauthenticatedError

DOMAIN: Final = b"convgraph/http/v1\n"
ACTOR: Final = "x-convgraph-actor"
TIMESTAMP: Final = "x-convgraph-timestamp"
NONCE: Final = "x-convgraph-nonce"
SIGNATURE: Final = "x-convgraph-signature"
HEADERS: Final = (ACTOR, TIMESTAMP, NONCE, SIGNATURE)
DEFAULT_WINDOW_MS: Final = 60_000
_DECIMAL: Final = re.compile(r"[0-9]{1,16}")
_HEX_SIGNATURE: Final = re.compile(r"[0-9a-f]{128}")


def signing_input(method: str, target: str, body: bytes, timestamp_ms: int, nonce: str) -> bytes:
    """The exact bytes a request signature covers."""
    digest = hashlib.sha256(body).hexdigest()
    return DOMAIN + f"{method.upper()}\n{target}\n{digest}\n{timestamp_ms}\n{nonce}\n".encode()


def sign(
    key: SigningKey, method: str, target: str, body: bytes, *, now_ms: int, nonce: str
) -> dict[str, str]:
    """The headers that authenticate one request (`target`: path plus `?query`, if any)."""
    signature = key.sign(signing_input(method, target, body, now_ms, nonce))
    return {
        ACTOR: keys.actor_text(key.public),
        TIMESTAMP: str(now_ms),
        NONCE: nonce,
        SIGNATURE: signature.hex(),
    }


class NonceLog(Protocol):
    """Remembers nonces for as long as their requests could still be fresh.

    Invariant: an unexpired nonce is never forgotten; a log that cannot take another one
    raises `NonceLogFullError` (the request is refused, 503) instead of making room.
    """

    def first_use(self, actor: bytes, nonce: str, expires_ms: int, now_ms: int) -> bool:
        """Record the nonce; False when it was already recorded and has not expired."""
        ...


class MemoryNonces:
    """A `NonceLog` for one server process, bounded: when full, new nonces are refused."""

    def __init__(self, max_entries: int = 1_000_000) -> None:
        self._seen: dict[tuple[bytes, str], int] = {}
        self._expiry: list[tuple[int, bytes, str]] = []  # a heap: the next nonce to expire first
        self._max = max_entries
        self._lock = threading.Lock()

    def first_use(self, actor: bytes, nonce: str, expires_ms: int, now_ms: int) -> bool:
        with self._lock:
            while self._expiry and self._expiry[0][0] < now_ms:
                _, old_actor, old_nonce = heapq.heappop(self._expiry)
                self._seen.pop((old_actor, old_nonce), None)
            if (actor, nonce) in self._seen:
                return False
            if len(self._seen) >= self._max:
                raise NonceLogFullError(limit=self._max)
            self._seen[(actor, nonce)] = expires_ms
            heapq.heappush(self._expiry, (expires_ms, actor, nonce))
            return True


@dataclass(frozen=True)
class Signed:
    """A request whose headers, timestamp and signature checked out; its nonce is not yet
    recorded, so nothing may act on it before `Verifier.record` accepts it."""

    actor: bytes
    nonce: str
    expires_ms: int
    now_ms: int


# a server sees the same few keys in every request: each text is decoded (and checked to be the
# canonical spelling) once; a bad one raises, and exceptions are not cached
_actor: Final = functools.lru_cache(maxsize=4096)(keys.parse_actor)


@dataclass(frozen=True)
class Verifier:
    """Checks request signatures against a clock and a nonce log.

    `check` is CPU work only (hashing the body, one signature), `record` the nonce log's
    I/O, so a server can run each where it is cheapest; `verify` does both.
    """

    nonces: NonceLog
    window_ms: int = DEFAULT_WINDOW_MS

    def claimed(self, headers: Mapping[str, str]) -> bytes:
        """The actor the headers name, unverified: all a server may check before reading the body."""
        missing = [h for h in HEADERS if h not in headers]
        if missing:
            raise UnauthenticatedError(
                "request is not signed", reason=f"missing header(s): {', '.join(missing)}"
            )
        try:
            return _actor(headers[ACTOR])
        except ConvgraphError as exc:
            raise UnauthenticatedError("malformed signature headers", reason=str(exc)) from exc

    def verify(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str], *, now_ms: int
    ) -> bytes:
        """The actor that signed the request; `UnauthenticatedError` saying why otherwise.

        The nonce is recorded only once the signature verifies, so forgeries cannot fill the log.
        """
        return self.record(self.check(method, target, body, headers, now_ms=now_ms))

    def check(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str], *, now_ms: int
    ) -> Signed:
        """Everything `verify` checks but the nonce: headers, timestamp window, signature."""
        actor = self.claimed(headers)
        # one spelling each (docs/sync.md): int() and fromhex() alone would also take "+5",
        # "5_000", upper case and spaces
        if not _DECIMAL.fullmatch(headers[TIMESTAMP]) or not _HEX_SIGNATURE.fullmatch(headers[SIGNATURE]):
            raise UnauthenticatedError(
                "malformed signature headers",
                reason="the timestamp must be decimal digits and the signature 128 lower-case hex digits",
            )
        stamp, signature = int(headers[TIMESTAMP]), bytes.fromhex(headers[SIGNATURE])
        nonce = headers[NONCE]
        if not 16 <= len(nonce) <= 64 or not nonce.isascii():
            raise UnauthenticatedError(
                "malformed nonce", reason="the nonce must be 16 to 64 ASCII characters"
            )
        if abs(now_ms - stamp) > self.window_ms:
            raise UnauthenticatedError(
                "stale request",
                reason=f"timestamp {stamp} is {abs(now_ms - stamp)} ms from the server's clock "
                f"(window {self.window_ms} ms)",
            )
        if not keys.verify(actor, signing_input(method, target, body, stamp, nonce), signature):
            raise UnauthenticatedError(
                "bad request signature",
                reason="the signature does not verify for this method, path, body, timestamp and nonce",
            )
        return Signed(actor, nonce, stamp + self.window_ms, now_ms)

    def record(self, signed: Signed) -> bytes:
        """Record a checked request's nonce: its actor, or `UnauthenticatedError` for a replay."""
        if not self.nonces.first_use(signed.actor, signed.nonce, signed.expires_ms, signed.now_ms):
            raise UnauthenticatedError("replayed request", reason="this nonce was already used")
        return signed.actor
