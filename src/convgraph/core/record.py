"""The record: one signed DAG-CBOR map, named by the CID of its bytes.

`sign_record` builds a record (parents and refs sorted, structure and payload checked,
signature over `SIGNING_DOMAIN + DAG-CBOR(record without sig)`); `decode_record` checks a
byte string against every rule that needs no other record: size, canonical encoding,
structure, payload schema, signature and claimed CID. Invariant: every `Record` instance
satisfies all those rules, and `record.data` is its one canonical encoding.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from convgraph.core import codec, keys
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.core.hlc import MAX_COUNTER, MAX_WALL_MS, Hlc
from convgraph.core.kinds import check_payload
from convgraph.errors import (
    CidMismatchError,
    DecodeError,
    SchemaError,
    SignatureError,
    SizeLimitError,
)

SIGNING_DOMAIN: Final = b"convgraph/record/v1\n"
MAX_SEQ: Final = 2**53 - 1
_REQUIRED: Final = frozenset({"conv", "actor", "seq", "hlc", "parents", "kind", "payload", "refs", "sig"})
_FIELDS: Final = _REQUIRED | {"branch"}


@dataclass(frozen=True)
class Limits:
    """Bounds every replica enforces on a single record."""

    max_record_bytes: int = 1 << 20
    max_parents: int = 1024
    max_refs: int = 1024
    max_name_bytes: int = 256  # conv and branch, UTF-8


DEFAULT_LIMITS: Final = Limits()


class RecordMeta(NamedTuple):
    """The indexed header of a stored record: what causal checks and DAG walks need."""

    cid: CID
    conv: str
    actor: bytes
    seq: int
    hlc: Hlc
    parents: tuple[CID, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Record:
    """A verified record. Equality and hashing are by CID."""

    conv: str
    actor: bytes
    seq: int
    hlc: Hlc
    parents: tuple[CID, ...]
    kind: str
    payload: dict[str, Any]
    refs: tuple[CID, ...]
    branch: str | None
    sig: bytes
    data: bytes
    cid: CID

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and self.cid == other.cid

    def __hash__(self) -> int:
        return hash(self.cid)

    @property
    def order_key(self) -> tuple[int, int, bytes, bytes]:
        """The canonical total order `(wall_ms, counter, actor, cid)`."""
        return (self.hlc.wall_ms, self.hlc.counter, self.actor, bytes(self.cid))

    @property
    def meta(self) -> RecordMeta:
        """The header of this record."""
        return RecordMeta(self.cid, self.conv, self.actor, self.seq, self.hlc, self.parents)

    def to_map(self) -> dict[str, Any]:
        """The record as a DAG-CBOR data-model map (what `data` encodes)."""
        return _as_map(self, with_sig=True)


def _as_map(r: Record, *, with_sig: bool) -> dict[str, Any]:
    m: dict[str, Any] = {
        "conv": r.conv,
        "actor": r.actor,
        "seq": r.seq,
        "hlc": [r.hlc.wall_ms, r.hlc.counter],
        "parents": list(r.parents),
        "kind": r.kind,
        "payload": r.payload,
        "refs": list(r.refs),
    }
    if r.branch is not None:
        m["branch"] = r.branch
    if with_sig:
        m["sig"] = r.sig
    return m


def signing_bytes(unsigned: Mapping[str, Any]) -> bytes:
    """The exact bytes a record's signature covers."""
    return SIGNING_DOMAIN + codec.encode(dict(unsigned))


def sign_record(
    key: keys.SigningKey,
    *,
    conv: str,
    seq: int,
    hlc: Hlc,
    parents: Iterable[CID],
    kind: str,
    payload: dict[str, Any],
    refs: Iterable[CID] = (),
    branch: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Record:
    """Build and sign a record; raises the same errors ingest would for a bad one."""
    links = (parents := list(parents), refs := list(refs))
    if not all(type(c) is CID for group in links for c in group):
        raise SchemaError("parents and refs must be CIDs")
    if type(hlc) not in (Hlc, tuple, list) or len(hlc) != 2:
        raise SchemaError("hlc must be (wall_ms, counter)")
    unsigned: dict[str, Any] = {
        "conv": conv, "actor": key.public, "seq": seq, "hlc": [hlc[0], hlc[1]],
        "parents": sorted(set(parents)), "kind": kind, "payload": payload, "refs": sorted(set(refs)),
    }
    if branch is not None:
        unsigned["branch"] = branch
    _check_structure(unsigned, limits, None)
    check_payload(kind, payload)
    sig = key.sign(signing_bytes(unsigned))
    data = codec.encode({**unsigned, "sig": sig})
    if len(data) > limits.max_record_bytes:
        raise SizeLimitError("record too large", limit=limits.max_record_bytes, got=len(data))
    return load_trusted(data, CID.of_record(data))  # decoded afresh: shares nothing with the caller


def decode_record(
    data: bytes, *, limits: Limits = DEFAULT_LIMITS, expected_cid: CID | None = None
) -> Record:
    """Check `data` against every intrinsic rule and return the record it encodes."""
    if len(data) > limits.max_record_bytes:  # before hashing: refuse a flood cheaply
        raise SizeLimitError(
            "record too large", limit=limits.max_record_bytes, got=len(data), cid=expected_cid
        )
    cid = text = CID.of_record(data)  # errors render the text form only when shown
    if expected_cid is not None and expected_cid != cid:
        raise CidMismatchError(expected=str(expected_cid), got=str(cid))
    try:
        value = codec.decode(data)
    except DecodeError as exc:
        raise type(exc)(exc.message, cid=text) from exc
    if type(value) is not dict:
        raise DecodeError("a record must be a DAG-CBOR map", cid=text)
    sig = value.pop("sig", None)
    if type(sig) is not bytes or len(sig) != keys.SIGNATURE_LEN:
        raise SchemaError("sig must be 64 bytes", cid=text)
    _check_structure(value, limits, text)
    check_payload(value["kind"], value["payload"], cid=text)
    if not keys.verify(value["actor"], signing_bytes(value), sig):
        raise SignatureError("signature does not verify under the record's actor", cid=text)
    return _build(value, sig, data, cid)


def load_trusted(data: bytes, cid: CID) -> Record:
    """Rebuild a record from bytes this replica verified before (no signature check)."""
    value = codec.decode_trusted(data)
    sig = value.pop("sig")
    return _build(value, sig, data, cid)


def _build(m: dict[str, Any], sig: bytes, data: bytes, cid: CID) -> Record:
    return Record(
        conv=m["conv"], actor=m["actor"], seq=m["seq"], hlc=Hlc(*m["hlc"]),
        parents=tuple(m["parents"]), kind=m["kind"], payload=m["payload"],
        refs=tuple(m["refs"]), branch=m.get("branch"), sig=sig, data=data, cid=cid,
    )


def _check_structure(m: dict[str, Any], limits: Limits, cid: CID | None) -> None:
    keys_present = m.keys() | {"sig"}
    if not _REQUIRED <= keys_present <= _FIELDS:
        missing = sorted(_REQUIRED - keys_present)
        extra = sorted(k[:32] for k in keys_present - _FIELDS)
        raise SchemaError(f"record fields wrong: missing {missing}, unknown {extra}", cid=cid)
    _check_name(m["conv"], "conv", limits, cid)
    if "branch" in m:
        _check_name(m["branch"], "branch", limits, cid)
    if type(m["actor"]) is not bytes or len(m["actor"]) != keys.PUBLIC_KEY_LEN:
        raise SchemaError("actor must be a 32-byte Ed25519 public key", cid=cid)
    if type(m["seq"]) is not int or not 1 <= m["seq"] <= MAX_SEQ:
        raise SchemaError(f"seq must be an integer in [1, {MAX_SEQ}]", cid=cid)
    hlc = m["hlc"]
    if (
        type(hlc) is not list or len(hlc) != 2 or type(hlc[0]) is not int or type(hlc[1]) is not int
        or not 0 <= hlc[0] <= MAX_WALL_MS or not 0 <= hlc[1] <= MAX_COUNTER
    ):
        raise SchemaError("hlc must be [wall_ms, counter] of bounded non-negative integers", cid=cid)
    if type(m["kind"]) is not str:
        raise SchemaError("kind must be text", cid=cid)
    _check_links(m["parents"], "parents", limits.max_parents, cid, record_links=True)
    _check_links(m["refs"], "refs", limits.max_refs, cid, record_links=False)


def _check_name(value: Any, name: str, limits: Limits, cid: CID | None) -> None:
    if type(value) is not str or not value:
        raise SchemaError(f"{name} must be non-empty text", cid=cid)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:  # a lone surrogate: not representable as UTF-8 text
        raise SchemaError(f"{name} is not valid Unicode text", cid=cid) from exc
    if size > limits.max_name_bytes:
        raise SchemaError(f"{name} longer than {limits.max_name_bytes} bytes", cid=cid)


def _check_links(value: Any, name: str, bound: int, cid: CID | None, *, record_links: bool) -> None:
    if type(value) is list and not value:
        return
    if type(value) is not list or not all(type(v) is CID for v in value):
        raise SchemaError(f"{name} must be a list of CIDs", cid=cid)
    if len(value) > bound:
        raise SizeLimitError(f"too many {name}", limit=bound, got=len(value), cid=cid)
    if any(a >= b for a, b in itertools.pairwise(value)):
        raise SchemaError(f"{name} must be sorted by binary CID without duplicates", cid=cid)
    if record_links and any(v.codec != DAG_CBOR for v in value):
        raise SchemaError("parents must be dag-cbor CIDs", cid=cid)
