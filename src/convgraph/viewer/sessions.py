"""Who a viewer request comes from: a random token, as Jupyter hands one out in its URL.

A browser cannot sign requests the way the sync clients do (`sync/auth.py`), so a signed
request (or the local owner starting `convgraph view`) is exchanged for a token: 32 random
bytes, url-safe. The first page opened with `?token=` sets it as an HttpOnly, SameSite=Strict
cookie and redirects to the same page without it, so the token leaves the address bar and
the history. The clock is passed in. Invariant: `lookup` answers a session only for a token
`issue` returned (looked up by its SHA-256), and never after it expired.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

COOKIE_PREFIX: Final = "cgview_"
DEFAULT_TTL_MS: Final = 12 * 3600 * 1000


@dataclass(frozen=True)
class Session:
    """A viewer's identity: the key it stands for (None: the replica's own user, who reads everything)."""

    actor: bytes | None
    expires_ms: int | None


class Sessions:
    """Tokens issued by this process, bounded: the oldest is dropped to make room."""

    def __init__(
        self, clock_ms: Callable[[], int], *, ttl_ms: int = DEFAULT_TTL_MS, limit: int = 10_000
    ) -> None:
        self._clock_ms, self.ttl_ms, self._limit = clock_ms, ttl_ms, limit
        self._by_digest: dict[bytes, Session] = {}  # insertion order: oldest first
        self._lock = threading.Lock()

    def issue(self, actor: bytes | None, *, expires: bool = True) -> str:
        """A new token for `actor`; it lasts `ttl_ms` (or as long as the process, without `expires`)."""
        token = secrets.token_urlsafe(32)
        until = self._clock_ms() + self.ttl_ms if expires else None
        with self._lock:
            while len(self._by_digest) >= self._limit:
                del self._by_digest[next(iter(self._by_digest))]
            self._by_digest[_digest(token)] = Session(actor, until)
        return token

    def lookup(self, token: str) -> Session | None:
        """The session of `token`, or None when unknown or expired."""
        digest = _digest(token)
        with self._lock:
            # looked up by the token's hash: timing can only tell about a hash the guesser
            # cannot aim, never about a prefix of the token
            found = self._by_digest.get(digest)
            if found is not None and found.expires_ms is not None and found.expires_ms <= self._clock_ms():
                del self._by_digest[digest]
                return None
        return found

    def from_cookies(self, cookies: Mapping[str, str]) -> Session | None:
        """The first live session among the viewer cookies a browser sent (one per server it holds)."""
        for name, value in cookies.items():
            if name.startswith(COOKIE_PREFIX):
                found = self.lookup(value)
                if found is not None:
                    return found
        return None


def cookie_name(token: str) -> str:
    """The cookie a token lives in: named by a hash of it, so two viewers on one host (each on
    its own port: browsers share cookies across ports) do not overwrite each other's."""
    return COOKIE_PREFIX + _digest(token).hex()[:12]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
