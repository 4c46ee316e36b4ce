"""A small builder of rooted-conversation histories for the authority tests.

Each actor writes with explicit parents (its own previous record is always added, as the seq
chain demands); hlcs come from one counter so they always exceed every parent's.
"""

from __future__ import annotations

from typing import Any

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import Record, sign_record
from convgraph.core.rooted import conv_id
from convgraph.projections import authority as au

T0 = 1_700_000_000_000
NONCE = bytes(range(16))


def key(i: int) -> SigningKey:
    return SigningKey(bytes([i + 1]) * 32)


OWNER, A, B, C, D, STRANGER = (key(i) for i in range(6))


class World:
    """Records by several actors of one rooted conversation, checked and applied as written."""

    def __init__(self, owner: SigningKey = OWNER) -> None:
        self.conv = conv_id(owner.public, NONCE)
        self.state = au.AuthorityState()
        self.records: list[Record] = []
        self._last: dict[bytes, Record] = {}
        self._tick = 0
        self.genesis = self.write(owner, "genesis", {"nonce": NONCE}, parents=())

    def sign(self, who: SigningKey, kind: str, payload: dict[str, Any], *,
             parents: tuple[CID, ...] | None = None, branch: str | None = None,
             wall: int | None = None) -> Record:
        """A record by `who` on `parents` (default: every current head), not yet applied."""
        chosen = set(self.heads() if parents is None else parents)
        last = self._last.get(who.public)
        if last is not None:
            chosen.add(last.cid)
        self._tick += 1
        stamp = Hlc(wall if wall is not None else T0 + self._tick, 0)
        return sign_record(who, conv=self.conv, seq=1 if last is None else last.seq + 1, hlc=stamp,
                           parents=chosen, kind=kind, payload=payload, branch=branch)

    def write(self, who: SigningKey, kind: str, payload: dict[str, Any], **kw: Any) -> Record:
        """Sign, check (raises the ingest error) and apply."""
        record = self.sign(who, kind, payload, **kw)
        au.check(self.state, record)
        self.add(record)
        return record

    def add(self, record: Record) -> None:
        au.apply(self.state, record)
        self.records.append(record)
        self._last[record.actor] = record

    def heads(self) -> tuple[CID, ...]:
        named = {p for r in self.records for p in r.parents}
        return tuple(r.cid for r in self.records if r.cid not in named)

    def grant(self, by: SigningKey, to: SigningKey, *rights: str, **kw: Any) -> Record:
        payload: dict[str, Any] = {"grantee": to.public, "rights": sorted(rights)}
        if "expires_ms" in kw:
            payload["expires_ms"] = kw.pop("expires_ms")
        return self.write(by, "grant", payload, **kw)

    def revoke(self, by: SigningKey, who: SigningKey, *rights: str, **kw: Any) -> Record:
        return self.write(by, "revocation", {"grantee": who.public, "rights": sorted(rights)}, **kw)

    def say(self, who: SigningKey, text: str = "hi", **kw: Any) -> Record:
        return self.write(who, "user_message", {"content": text}, **kw)

    def who_can(self, who: SigningKey, cap: str, at_ms: int | None = None) -> au.Answer:
        return au.who_can(self.state, who.public, cap, self.heads(), T0 + 10**9 if at_ms is None else at_ms)

    def excluded(self) -> dict[CID, str]:
        return {e.cid: e.reason for e in au.excluded(self.state)}
