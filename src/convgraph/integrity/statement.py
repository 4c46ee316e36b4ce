"""Signed statements of state: what a replica holds of one conversation, and receipts.

A statement is a canonical DAG-CBOR map signed with Ed25519 under its own domain
(docs/integrity.md §2). Invariant: `decode_statement(s.data) == s` for every `Statement`
that `sign_statement` or `decode_statement` returned, and its signature verifies.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.keys import PUBLIC_KEY_LEN, SIGNATURE_LEN, SigningKey, verify
from convgraph.errors import ConvgraphError, StatementError

STATEMENT_DOMAIN: Final = b"convgraph/statement/v1\n"
HEADS_DOMAIN: Final = b"convgraph/heads/v1\n"
ORDER_SLACK_MS: Final = 1_000
FRESHNESS_MS: Final = 60_000
MAX_STATEMENT_BYTES: Final = 8 << 20
MAX_HEADS: Final = 65_536
MAX_STORED: Final = 131_072
MAX_CONV_BYTES: Final = 256
_MAX_INT: Final = 1 << 53
_DAG_CBOR_PREFIX: Final = b"\x01\x71\x12\x20"
_REQUIRED: Final = frozenset({"v", "conv", "count", "heads", "key", "time", "sig"})
_ALLOWED: Final = _REQUIRED | {"stored"}


@dataclass(frozen=True, slots=True)
class Statement:
    """One signed statement; a receipt when `stored` is not empty. `data` is its exact bytes."""

    conv: str
    count: int
    heads: tuple[CID, ...]
    key: bytes
    time_ms: int
    stored: tuple[CID, ...]
    sig: bytes
    data: bytes

    @property
    def cid(self) -> CID:
        """The statement's own CID (dag-cbor, sha2-256): how findings and stores name it."""
        return CID.of_record(self.data)

    @property
    def heads_digest(self) -> bytes:
        """SHA-256 over the domain and the sorted binary head CIDs (§2.2): the C2SP root."""
        return heads_digest(self.heads)

    def is_later_than(self, other: Statement) -> bool:
        """True when this statement was taken more than the slack after `other` (§2.3)."""
        return self.time_ms > other.time_ms + ORDER_SLACK_MS


def heads_digest(heads: Iterable[CID]) -> bytes:
    """The heads digest of docs/integrity.md §2.2; `heads` in any order."""
    h = hashlib.sha256(HEADS_DOMAIN)
    for cid in sorted(set(heads)):
        h.update(bytes(cid))
    return h.digest()


def sign_statement(
    key: SigningKey,
    conv: str,
    count: int,
    heads: Iterable[CID],
    time_ms: int,
    *,
    stored: Iterable[CID] = (),
) -> Statement:
    """A statement signed by `key`; sorts and de-duplicates `heads` and `stored`."""
    unsigned: dict[str, Any] = {
        "v": 1, "conv": conv, "count": count, "heads": sorted(set(heads)),
        "key": key.public, "time": time_ms,
    }
    stored_list = sorted(set(stored))
    if stored_list:
        unsigned["stored"] = stored_list
    _check_fields(unsigned)
    sig = key.sign(STATEMENT_DOMAIN + codec.encode(unsigned))
    return _build(unsigned, sig, codec.encode({**unsigned, "sig": sig}))


def decode_statement(data: bytes) -> Statement:
    """Decode and verify statement bytes, or raise `StatementError` saying what is wrong."""
    if len(data) > MAX_STATEMENT_BYTES:
        raise StatementError(
            f"a statement of {len(data)} bytes exceeds {MAX_STATEMENT_BYTES}", reason="schema"
        )
    try:
        value = codec.decode(data)
    except ConvgraphError as exc:
        raise StatementError(f"statement is not canonical DAG-CBOR: {exc}", reason="decode") from exc
    if not isinstance(value, dict):
        raise StatementError("a statement is a map", reason="schema")
    sig = value.get("sig")
    if type(sig) is not bytes or len(sig) != SIGNATURE_LEN:
        raise StatementError("statement `sig` must be 64 bytes", reason="schema")
    unsigned = {k: v for k, v in value.items() if k != "sig"}
    _check_fields(unsigned)
    if not verify(unsigned["key"], STATEMENT_DOMAIN + codec.encode(unsigned), sig):
        raise StatementError("statement signature does not verify under its `key`", reason="signature")
    return _build(unsigned, sig, data)


def _build(unsigned: dict[str, Any], sig: bytes, data: bytes) -> Statement:
    return Statement(
        conv=unsigned["conv"], count=unsigned["count"], heads=tuple(unsigned["heads"]),
        key=unsigned["key"], time_ms=unsigned["time"], stored=tuple(unsigned.get("stored", ())),
        sig=sig, data=data,
    )


def _check_fields(m: dict[str, Any]) -> None:
    keys = set(m) | {"sig"}
    if not keys >= _REQUIRED or not keys <= _ALLOWED:
        raise StatementError(
            f"statement keys {sorted(keys)} are not those of docs/integrity.md §2.1", reason="schema"
        )
    if type(m["v"]) is not int or m["v"] != 1:
        raise StatementError(f"statement version {m['v']!r} is not 1", reason="schema")
    conv = m["conv"]
    if not isinstance(conv, str) or not 1 <= len(conv.encode("utf-8", "surrogatepass")) <= MAX_CONV_BYTES:
        raise StatementError("statement `conv` must be 1 to 256 bytes of text", reason="schema")
    for name in ("count", "time"):
        if type(m[name]) is not int or not 0 <= m[name] < _MAX_INT:
            raise StatementError(f"statement `{name}` must be an integer in [0, 2^53)", reason="schema")
    if type(m["key"]) is not bytes or len(m["key"]) != PUBLIC_KEY_LEN:
        raise StatementError("statement `key` must be 32 bytes", reason="schema")
    _check_links(m["heads"], "heads", MAX_HEADS, allow_empty=True)
    if (m["count"] == 0) != (len(m["heads"]) == 0):
        raise StatementError("statement `heads` is empty exactly when `count` is 0", reason="schema")
    if "stored" in m:
        _check_links(m["stored"], "stored", MAX_STORED, allow_empty=False)


def _check_links(value: Any, name: str, bound: int, *, allow_empty: bool) -> None:
    if not isinstance(value, list) or len(value) > bound or (not value and not allow_empty):
        raise StatementError(f"statement `{name}` must be a list of 1 to {bound} links", reason="schema")
    previous: bytes | None = None
    for item in value:
        if not isinstance(item, CID) or bytes(item)[:4] != _DAG_CBOR_PREFIX:
            raise StatementError(
                f"statement `{name}` holds a value that is not a record link", reason="schema"
            )
        raw = bytes(item)
        if previous is not None and raw <= previous:
            raise StatementError(f"statement `{name}` must be sorted with no duplicates", reason="schema")
        previous = raw
