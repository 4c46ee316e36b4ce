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
from typing import Any, Final, NamedTuple, cast

from convgraph.core import codec, keys
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.core.hlc import MAX_COUNTER, MAX_WALL_MS, Hlc
from convgraph.core.kinds import check_payload
from convgraph.core.rooted import check_root, is_rooted
from convgraph.core.text import check_value_text, utf8
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
_REQUIRED_UNSIGNED: Final = _REQUIRED - {"sig"}
_FIELDS_UNSIGNED: Final = _FIELDS - {"sig"}


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


class _Slots:
    """`Record`'s fields: a record is filled in as this plain class, then becomes a `Record`."""

    __slots__ = (
        "_payload",
        "actor",
        "branch",
        "cid",
        "conv",
        "data",
        "hlc",
        "kind",
        "parents",
        "refs",
        "seq",
        "sig",
    )
    conv: str
    actor: bytes
    seq: int
    hlc: Hlc
    parents: tuple[CID, ...]
    kind: str
    refs: tuple[CID, ...]
    branch: str | None
    sig: bytes
    data: bytes
    cid: CID
    _payload: dict[str, Any] | None


class Record(_Slots):
    """A verified record. Equality and hashing are by CID; every attribute is read-only.

    Only `load_trusted`, `decode_record` and `sign_record` build one. `payload` is decoded
    from `data` on first use when the builder did not already hold a decoded copy.
    """

    __slots__ = ()

    def __new__(  # noqa: PLR0917  positional: built once per record read, keep it cheap
        cls, conv: str, actor: bytes, seq: int, hlc: Hlc, parents: tuple[CID, ...], kind: str,
        payload: dict[str, Any] | None, refs: tuple[CID, ...], branch: str | None, sig: bytes,
        data: bytes, cid: CID,
    ) -> Record:
        # Stores into a plain slotted object are specialised by the interpreter; through
        # Record's refusing __setattr__ each is a generic call, five times the cost, and ingest
        # builds one record per record. The two classes share one layout, so the object can
        # take on its final class once filled.
        r = _new_object(_Slots)
        r.conv, r.actor, r.seq, r.hlc, r.parents, r.kind = conv, actor, seq, hlc, parents, kind
        r._payload, r.refs, r.branch, r.sig, r.data, r.cid = payload, refs, branch, sig, data, cid
        r.__class__ = Record
        return cast(Record, r)

    @property
    def payload(self) -> dict[str, Any]:
        """The payload map, as decoded from `data` (never an object the writer still holds)."""
        payload = self._payload
        if payload is None:
            payload = codec.decode_trusted(self.data)["payload"]
            _set(self, "_payload", payload)
        return payload

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Record is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Record is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and self.cid == other.cid

    def __hash__(self) -> int:
        return hash(self.cid)

    def __repr__(self) -> str:
        return f"Record({self.cid}, kind={self.kind!r}, conv={self.conv!r}, seq={self.seq})"

    def __reduce__(self) -> tuple[Any, tuple[bytes, CID]]:
        return (load_trusted, (self.data, self.cid))

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


_set: Final = object.__setattr__


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
    return SIGNING_DOMAIN + codec.encode(unsigned if type(unsigned) is dict else dict(unsigned))


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
    # Each argument is checked directly rather than by re-walking the assembled map as
    # decode does: same rules, a third of the cost on the path every local write takes.
    parent_list = _sorted_links(parents, "parents", limits.max_parents, record_links=True)
    ref_list = _sorted_links(refs, "refs", limits.max_refs, record_links=False)
    _check_name(conv, "conv", limits, None)
    if branch is not None:
        _check_name(branch, "branch", limits, None)
    if type(seq) is not int or not 1 <= seq <= MAX_SEQ:
        raise SchemaError(f"seq must be an integer in [1, {MAX_SEQ}]")
    if type(hlc) not in (Hlc, tuple, list) or len(hlc) != 2:
        raise SchemaError("hlc must be (wall_ms, counter)")
    wall, counter = hlc
    if type(wall) is not int or type(counter) is not int or wall < 0 or counter < 0:
        raise SchemaError("hlc must be [wall_ms, counter] of bounded non-negative integers")
    if wall > MAX_WALL_MS or counter > MAX_COUNTER:
        # the local clock ran past the last stamp a record can carry (docs/format.md §11.4)
        raise SchemaError(f"hlc [{wall}, {counter}] is past the last stamp a record can carry, "
                          f"[{MAX_WALL_MS}, {MAX_COUNTER}]: no record can be written after it")
    if type(kind) is not str:
        raise SchemaError("kind must be text")
    check_payload(kind, payload, rooted=is_rooted(conv))
    unsigned: dict[str, Any] = {
        "conv": conv, "actor": key.public, "seq": seq, "hlc": [wall, counter],
        "parents": parent_list, "kind": kind, "payload": payload, "refs": ref_list,
    }
    if branch is not None:
        unsigned["branch"] = branch
    check_root(unsigned)
    try:
        signed = signing_bytes(unsigned)
    except SchemaError:
        check_value_text(payload, "payload")  # a lone surrogate: say which field holds it
        raise
    sig = key.sign(signed)
    unsigned["sig"] = sig
    data = codec.encode(unsigned)
    if len(data) > limits.max_record_bytes:
        raise SizeLimitError("record too large", limit=limits.max_record_bytes, got=len(data))
    # payload stays undecoded: the record must share no mutable object with the caller
    return Record(conv, key.public, seq, Hlc(wall, counter), tuple(parent_list), kind, None,
                  tuple(ref_list), branch, sig, data, CID.of_record(data))


def _sorted_links(values: Iterable[CID], name: str, bound: int, *, record_links: bool) -> list[CID]:
    links = list(values)
    for link in links:
        if type(link) is not CID:
            raise SchemaError(f"{name} must be CIDs")
        if record_links and link.codec != DAG_CBOR:
            raise SchemaError("parents must be dag-cbor CIDs")
    if len(links) > 1:
        links = sorted(set(links))
    if len(links) > bound:
        raise SizeLimitError(f"too many {name}", limit=bound, got=len(links))
    return links


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
    check_payload(value["kind"], value["payload"], cid=text, rooted=is_rooted(value["conv"]))
    check_root(value, text)
    if not keys.verify(value["actor"], _signed_part(value, sig, data), sig):
        raise SignatureError("signature does not verify under the record's actor", cid=text)
    return _build(value, sig, data, cid)


_new_hlc: Final = tuple.__new__
_new_object: Final = object.__new__
_SIG_ENTRY: Final = b"\x63sig\x58\x40"  # the text key "sig", then the head of a 64-byte string


def _signed_part(m: dict[str, Any], sig: bytes, data: bytes) -> bytes:
    """`signing_bytes(m)` cut out of `data`, the canonical bytes of `m` plus `sig` (checked
    structure), instead of encoded a second time.

    A canonical map is its head, then its entries in key order, shorter keys first: `hlc` and
    `seq` are the only keys before `sig`, so its entry starts where their values' widths put it,
    and the bytes without it are those of `m` under a head counting one entry less.
    """
    wall, counter = m["hlc"]
    at = 10 + _uint_width(wall) + _uint_width(counter) + _uint_width(m["seq"])
    if 0xA1 <= data[0] <= 0xB7 and data[at : at + 70] == _SIG_ENTRY + sig:
        return b"".join((SIGNING_DOMAIN, bytes((data[0] - 1,)), data[1:at], data[at + 70 :]))
    return signing_bytes(m)  # not reached for canonical bytes of a checked structure


def _uint_width(n: int) -> int:
    """Bytes in the canonical CBOR encoding of the unsigned integer `n`."""
    return 1 if n < 24 else 2 if n < 0x100 else 3 if n < 0x10000 else 5 if n < 0x100000000 else 9


def load_trusted(data: bytes, cid: CID) -> Record:
    """Rebuild a record from bytes this replica verified before (no signature check)."""
    value = codec.decode_trusted(data)
    return _build(value, value.pop("sig"), data, cid)


def _build(m: dict[str, Any], sig: bytes, data: bytes, cid: CID) -> Record:
    # the checked [wall, counter] list as an Hlc without NamedTuple's Python-level __new__
    return Record(m["conv"], m["actor"], m["seq"], _new_hlc(Hlc, m["hlc"]), tuple(m["parents"]), m["kind"],
                  m["payload"], tuple(m["refs"]), m.get("branch"), sig, data, cid)


def _check_structure(m: dict[str, Any], limits: Limits, cid: CID | None) -> None:
    if not _REQUIRED_UNSIGNED <= m.keys() <= _FIELDS_UNSIGNED:
        keys_present = m.keys() | {"sig"}
        missing = sorted(_REQUIRED - keys_present)
        extra = sorted(str(k)[:32] for k in keys_present - _FIELDS)
        raise SchemaError(f"record fields wrong: missing {missing}, unknown {extra}", cid=cid)
    _check_name(m["conv"], "conv", limits, cid)
    if "branch" in m:
        _check_name(m["branch"], "branch", limits, cid)
    actor = m["actor"]
    if type(actor) is not bytes or len(actor) != keys.PUBLIC_KEY_LEN:
        raise SchemaError("actor must be a 32-byte Ed25519 public key", cid=cid)
    seq = m["seq"]
    if type(seq) is not int or not 1 <= seq <= MAX_SEQ:
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
    size = len(utf8(value, name, cid=cid))
    if size > limits.max_name_bytes:
        raise SchemaError(f"{name} longer than {limits.max_name_bytes} bytes", cid=cid)


def _check_links(value: Any, name: str, bound: int, cid: CID | None, *, record_links: bool) -> None:
    if type(value) is not list:
        raise SchemaError(f"{name} must be a list of CIDs", cid=cid)
    for link in value:
        if type(link) is not CID:
            raise SchemaError(f"{name} must be a list of CIDs", cid=cid)
    if len(value) > bound:
        raise SizeLimitError(f"too many {name}", limit=bound, got=len(value), cid=cid)
    if len(value) > 1 and any(a >= b for a, b in itertools.pairwise(value)):
        raise SchemaError(f"{name} must be sorted by binary CID without duplicates", cid=cid)
    if record_links:
        for link in value:
            if link.codec != DAG_CBOR:
                raise SchemaError("parents must be dag-cbor CIDs", cid=cid)
