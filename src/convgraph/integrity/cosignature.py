"""A witness's cosignature of a checkpoint, as it travels: an attestation record's payload.

docs/integrity.md §7.4: `subject` = the checkpoint's CID, `statement` = "cosignature/v1",
`claims` = {name, key, time, sig}; the signature is the C2SP cosignature/v1 over the
checkpoint's note body (§8). Invariant: `cosignature_of_payload(c.payload()) == c`, and
`verify(c, checkpoint)` is true for every `c` that `cosign_checkpoint` made of `checkpoint`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.core.keys import PUBLIC_KEY_LEN, SIGNATURE_LEN, SigningKey
from convgraph.core.record import Record
from convgraph.errors import NoteError
from convgraph.integrity import note

COSIGNATURE_STATEMENT: Final = "cosignature/v1"
_CLAIMS: Final = frozenset({"name", "key", "time", "sig"})


@dataclass(frozen=True, slots=True)
class Cosignature:
    """Witness `key` (key name `name`) cosigned checkpoint `checkpoint` at POSIX `time` seconds."""

    checkpoint: CID
    name: str
    key: bytes
    time: int
    sig: bytes

    def payload(self) -> dict[str, Any]:
        """The payload of the attestation record that carries this cosignature."""
        return {"subject": self.checkpoint, "statement": COSIGNATURE_STATEMENT, "claims": self.claims()}

    def claims(self) -> dict[str, Any]:
        """The attestation's `claims` map."""
        return {"name": self.name, "key": self.key, "time": self.time, "sig": self.sig}

    def to_map(self) -> dict[str, Any]:
        """The map a `divergent_fork` bundle lists it as (§7.5): the claims plus `checkpoint`."""
        return {"checkpoint": self.checkpoint, **self.claims()}

    def line(self) -> note.NoteSignature:
        """Its C2SP signature line (type 0x04), for a signed note of the checkpoint."""
        key_id = note.key_id(self.name, note.COSIGNATURE_V1, self.key)
        return note.NoteSignature(self.name, key_id, self.time.to_bytes(8, "big") + self.sig)


def cosign_checkpoint(
    key: SigningKey, checkpoint: Record, time_s: int, name: str | None = None
) -> Cosignature:
    """The witness's cosignature/v1 of `checkpoint` at `time_s`; `name` defaults to §8's."""
    name = note.witness_key_name(key.public) if name is None else name
    line = note.cosign(key, name, note.checkpoint_body(checkpoint).text, time_s)
    return Cosignature(checkpoint.cid, name, key.public, time_s, line.sig[8:])


def cosignature_of_line(checkpoint: CID, public: bytes, line: note.NoteSignature) -> Cosignature:
    """The cosignature a witness's signature line holds (shape only: `verify` checks it)."""
    if line.time is None or line.key_id != note.key_id(line.name, note.COSIGNATURE_V1, public):
        raise NoteError(f"line of {line.name!r} is not a cosignature/v1 by that key", reason="format")
    return cosignature_of_map({"checkpoint": checkpoint, "name": line.name, "key": public,
                               "time": line.time, "sig": line.sig[8:]})


def cosignature_of_payload(payload: Any, *, cid: object = None) -> Cosignature:
    """Read an attestation payload as a cosignature, or `NoteError` (`format`) saying why not."""
    if type(payload) is not dict or payload.get("statement") != COSIGNATURE_STATEMENT:
        raise NoteError("not a cosignature/v1 attestation", reason="format", cid=cid)
    claims = payload.get("claims")
    if type(claims) is not dict or claims.keys() != _CLAIMS:
        raise NoteError("cosignature claims are exactly name, key, time and sig", reason="format", cid=cid)
    return cosignature_of_map({"checkpoint": payload.get("subject"), **claims}, cid=cid)


def cosignature_of_record(record: Record) -> Cosignature:
    """The cosignature an attestation record carries."""
    if record.kind != "attestation":
        raise NoteError(f"a {record.kind} record carries no cosignature", reason="format", cid=record.cid)
    return cosignature_of_payload(record.payload, cid=record.cid)


def cosignature_of_map(m: Any, *, cid: object = None) -> Cosignature:
    """A cosignature from its map form (§7.5), each field typed and bounded."""
    if type(m) is not dict or m.keys() != _CLAIMS | {"checkpoint"}:
        raise NoteError("a cosignature map is exactly checkpoint, name, key, time and sig",
                        reason="format", cid=cid)
    checkpoint, name, key, time, sig = m["checkpoint"], m["name"], m["key"], m["time"], m["sig"]
    ok = (
        type(checkpoint) is CID and type(name) is str
        and type(key) is bytes and len(key) == PUBLIC_KEY_LEN
        and type(time) is int and 0 <= time <= note.MAX_TIME
        and type(sig) is bytes and len(sig) == SIGNATURE_LEN
    )
    if not ok:
        raise NoteError("a cosignature field has the wrong type or is out of range", reason="format", cid=cid)
    return Cosignature(checkpoint, note.check_key_name(name), key, time, sig)


def verify(cosignature: Cosignature, checkpoint: Record) -> bool:
    """True when `cosignature` names `checkpoint` and its signature is over that checkpoint's body."""
    if cosignature.checkpoint != checkpoint.cid or checkpoint.kind != "checkpoint":
        return False
    body = note.checkpoint_body(checkpoint).text
    return note.verify_cosignature(cosignature.key, body, cosignature.time, cosignature.sig)
