"""C2SP signed notes of checkpoints: the note body, the author's line, witness cosignatures.

A checkpoint record exports as a `c2sp.org/tlog-checkpoint` body signed per
`c2sp.org/signed-note` (type 0x01) and cosigned per `c2sp.org/tlog-cosignature` (type 0x04,
`cosignature/v1`), docs/integrity.md §8. Invariant: every signature `sign` or `cosign` makes
verifies under `verify_note` with its key, and `parse_note(n.text) == n` for every note `n`
that `parse_note` returned.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from convgraph.core.cid import CID
from convgraph.core.keys import PUBLIC_KEY_LEN, SIGNATURE_LEN, SigningKey, actor_text, verify
from convgraph.core.record import Record
from convgraph.errors import ConvgraphError, NoteError
from convgraph.integrity.statement import heads_digest

ED25519: Final = 0x01
COSIGNATURE_V1: Final = 0x04
ORIGIN_PREFIX: Final = "convgraph/"
ACTOR_NAME_PREFIX: Final = "convgraph/actor/"
WITNESS_NAME_PREFIX: Final = "convgraph/witness/"
# C2SP asks verifiers to take at least 16; Go's sumdb/note takes 100, and so do we
MAX_SIGNATURES: Final = 100
MAX_TIME: Final = (1 << 63) - 1
_DASH: Final = "\u2014 "
_KEY_ID_LEN: Final = 4
_TIME_LEN: Final = 8
_UNRESERVED: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-")
_HEX: Final = frozenset("0123456789ABCDEF")
_EXTENSION: Final = "checkpoint "


def origin(conv: str) -> str:
    """The origin line of `conv`: each UTF-8 byte outside [A-Za-z0-9._~-] as %XX (upper-case)."""
    try:
        raw = conv.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NoteError(f"conversation id {conv[:64]!r} is not UTF-8 text", reason="format") from exc
    return ORIGIN_PREFIX + "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in raw)


def conv_of_origin(line: str) -> str:
    """The conversation an origin line names; only the one spelling `origin` makes is accepted."""
    if not line.startswith(ORIGIN_PREFIX) or len(line) == len(ORIGIN_PREFIX):
        raise NoteError(f"origin {line[:80]!r} is not convgraph/<conversation>", reason="format")
    out, text, i = bytearray(), line[len(ORIGIN_PREFIX):], 0
    while i < len(text):
        if text[i] == "%" and len(text) >= i + 3 and set(text[i + 1 : i + 3]) <= _HEX:
            out.append(int(text[i + 1 : i + 3], 16))
            i += 3
        elif text[i].isascii():
            out.append(ord(text[i]))
            i += 1
        else:
            break
    try:
        conv = out.decode("utf-8") if i == len(text) else None
    except UnicodeDecodeError:
        conv = None
    if conv is None or origin(conv) != line:
        raise NoteError(f"origin {line[:80]!r} is not a canonical percent-encoding", reason="format")
    return conv


@dataclass(frozen=True, slots=True)
class CheckpointBody:
    """The four lines of a checkpoint's note body (§8); `text` is their exact spelling."""

    conv: str
    count: int
    root: bytes
    checkpoint: CID

    @property
    def text(self) -> str:
        """origin, count, base64 root, `checkpoint <cid>`, each ending in a newline."""
        root = base64.b64encode(self.root).decode("ascii")
        return f"{origin(self.conv)}\n{self.count}\n{root}\n{_EXTENSION}{self.checkpoint}\n"


def checkpoint_body(record: Record) -> CheckpointBody:
    """The note body of a checkpoint record: its conversation, `count`, heads digest and CID."""
    if record.kind != "checkpoint":
        raise NoteError(f"a {record.kind} record has no checkpoint note", reason="format", cid=record.cid)
    payload = record.payload
    return CheckpointBody(record.conv, payload["count"], heads_digest(payload["heads"]), record.cid)


def parse_body(text: str) -> CheckpointBody:
    """Read a checkpoint note body back; anything `CheckpointBody.text` would not write is refused."""
    lines = text.split("\n")
    if len(lines) != 5 or lines[4] != "":
        raise NoteError("a checkpoint note body is exactly four lines, each ending in a newline",
                        reason="format")
    conv = conv_of_origin(lines[0])
    try:
        count = int(lines[1]) if lines[1].isascii() and lines[1].isdigit() else -1
        root = base64.b64decode(lines[2], validate=True)
        cid = CID.parse(lines[3][len(_EXTENSION):]) if lines[3].startswith(_EXTENSION) else None
    except (ValueError, ConvgraphError) as exc:  # binascii.Error, or a non-ASCII base64 line
        raise NoteError(f"checkpoint note body does not parse: {exc}", reason="format") from exc
    if count < 0 or cid is None or len(root) != hashlib.sha256().digest_size:
        raise NoteError("checkpoint note body lines are not count, root and `checkpoint <cid>`",
                        reason="format")
    body = CheckpointBody(conv, count, root, cid)
    if body.text != text:
        raise NoteError("checkpoint note body is not in its one canonical spelling", reason="format")
    return body


def key_id(name: str, sig_type: int, public: bytes) -> bytes:
    """SHA-256(name || 0x0A || type || public key)[:4], the C2SP key ID."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes((sig_type,)) + public).digest()[:_KEY_ID_LEN]


def actor_key_name(public: bytes) -> str:
    """The key name of a checkpoint author's note signature."""
    return ACTOR_NAME_PREFIX + actor_text(public)


def witness_key_name(public: bytes) -> str:
    """A witness's default key name."""
    return WITNESS_NAME_PREFIX + actor_text(public)


def check_key_name(name: str) -> str:
    """`name` if it is a C2SP key name (non-empty, no Unicode space, no `+`), else `NoteError`."""
    if not name or "+" in name or any(c.isspace() or c < " " for c in name):
        raise NoteError(f"key name {name[:80]!r} is empty or holds a space or `+`", reason="format")
    return name


@dataclass(frozen=True, slots=True)
class NoteKey:
    """A key a verifier knows: name, Ed25519 public key and signature type (0x01 or 0x04)."""

    name: str
    public: bytes
    sig_type: int = ED25519

    def __post_init__(self) -> None:
        check_key_name(self.name)
        if len(self.public) != PUBLIC_KEY_LEN or self.sig_type not in (ED25519, COSIGNATURE_V1):
            raise NoteError(f"key {self.name!r}: a 32-byte Ed25519 key of type 0x01 or 0x04",
                            reason="format")

    @property
    def key_id(self) -> bytes:
        """The C2SP key ID of this key."""
        return key_id(self.name, self.sig_type, self.public)

    @property
    def vkey(self) -> str:
        """The C2SP verifier key text: name+hex(key ID)+base64(type || public key)."""
        material = base64.b64encode(bytes((self.sig_type,)) + self.public).decode("ascii")
        return f"{self.name}+{self.key_id.hex()}+{material}"


def parse_vkey(text: str) -> NoteKey:
    """A `NoteKey` from its verifier key text; the key ID in the text must be the computed one."""
    parts = text.split("+")
    try:
        material = base64.b64decode(parts[2], validate=True) if len(parts) == 3 else b""
    except ValueError:  # binascii.Error, or non-ASCII text
        material = b""
    if len(material) != 1 + PUBLIC_KEY_LEN:
        raise NoteError(f"verifier key {text[:80]!r} is not name+id+base64(type||key)", reason="format")
    key = NoteKey(parts[0], material[1:], material[0])
    if key.key_id.hex() != parts[1]:
        raise NoteError(f"verifier key {text[:80]!r} names key ID {parts[1]!r}, not {key.key_id.hex()}",
                        reason="format")
    return key


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line: key name, key ID and the signature bytes after the key ID."""

    name: str
    key_id: bytes
    sig: bytes

    @property
    def line(self) -> str:
        """`— name base64(key ID || sig)` and a newline."""
        return f"{_DASH}{self.name} {base64.b64encode(self.key_id + self.sig).decode('ascii')}\n"

    @property
    def time(self) -> int | None:
        """The POSIX time of a cosignature/v1 line (the 8 bytes before its signature), else None."""
        if len(self.sig) != _TIME_LEN + SIGNATURE_LEN:
            return None
        return int.from_bytes(self.sig[:_TIME_LEN], "big")


@dataclass(frozen=True, slots=True)
class SignedNote:
    """A note body and its signature lines, in their order."""

    body: str
    signatures: tuple[NoteSignature, ...]

    @property
    def text(self) -> str:
        """The body, an empty line, then every signature line."""
        return self.body + "\n" + "".join(s.line for s in self.signatures)


def sign(key: SigningKey, name: str, body: str) -> NoteSignature:
    """The Ed25519 (type 0x01) signature of `body` by `key` under key name `name`."""
    text = _check_body(body)
    return NoteSignature(check_key_name(name), key_id(name, ED25519, key.public), key.sign(text))


def cosignature_message(body: str, time_s: int) -> bytes:
    """What a cosignature/v1 signs: the header line, the time line, then the whole body."""
    return f"cosignature/v1\ntime {time_s}\n".encode("ascii") + _check_body(body)


def cosign(key: SigningKey, name: str, body: str, time_s: int) -> NoteSignature:
    """A witness's cosignature/v1 (type 0x04) of `body` at POSIX time `time_s` (seconds)."""
    if not 0 <= time_s <= MAX_TIME:
        raise NoteError(f"cosignature time {time_s} is outside [0, 2^63 - 1]", reason="format")
    stamped = time_s.to_bytes(_TIME_LEN, "big") + key.sign(cosignature_message(body, time_s))
    return NoteSignature(check_key_name(name), key_id(name, COSIGNATURE_V1, key.public), stamped)


def verify_cosignature(public: bytes, body: str, time_s: int, sig: bytes) -> bool:
    """True when `sig` is `public`'s cosignature/v1 Ed25519 signature of `body` at `time_s`."""
    if not 0 <= time_s <= MAX_TIME:
        return False
    return verify(public, cosignature_message(body, time_s), sig)


def export_note(body: str, author: NoteSignature | None, cosignatures: Iterable[NoteSignature]) -> SignedNote:
    """The signed note of §8: the author's line first (when given), then cosignatures by key name."""
    lines = ((author,) if author is not None else ()) + tuple(
        sorted(set(cosignatures), key=lambda s: (s.name, s.line))
    )
    if not lines:
        raise NoteError("a signed note needs at least one signature line", reason="format")
    note = SignedNote(body, lines)
    return parse_note(note.text)  # the one check that what we export is what C2SP reads


def parse_note(data: str | bytes) -> SignedNote:
    """Split a signed note into body and signature lines, checking only the C2SP syntax."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        text.encode("utf-8")
    except UnicodeError as exc:
        raise NoteError("a signed note must be UTF-8", reason="format") from exc
    if any(c < " " and c != "\n" for c in text):
        raise NoteError("a signed note holds an ASCII control character other than newline",
                        reason="format")
    split = text.rfind("\n\n")
    if split < 0:
        raise NoteError("a signed note has no empty line before its signatures", reason="format")
    body, block = text[: split + 1], text[split + 2 :]
    if not block.endswith("\n"):
        raise NoteError("a signed note ends with signature lines, each ending in a newline",
                        reason="format")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"a signed note with {len(lines)} signatures (at most {MAX_SIGNATURES})",
                        reason="format")
    return SignedNote(body, tuple(_parse_line(line) for line in lines))


def _parse_line(line: str) -> NoteSignature:
    name, _, b64 = line.removeprefix(_DASH).partition(" ")
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not line.startswith(_DASH) or len(raw) <= _KEY_ID_LEN:
        raise NoteError(f"signature line {line[:80]!r} is not `— <name> <base64>`", reason="format")
    return NoteSignature(check_key_name(name), raw[:_KEY_ID_LEN], raw[_KEY_ID_LEN:])


@dataclass(frozen=True, slots=True)
class Verified:
    """A line that verified: by which known key, and, for a cosignature, at what time."""

    key: NoteKey
    time: int | None


def verify_note(note: SignedNote, known: Iterable[NoteKey]) -> tuple[Verified, ...]:
    """The lines of `note` by known keys, each verified; lines by unknown keys are ignored.

    C2SP rules: a line is by a known key only when both name and key ID match. A line by a
    known key that fails is `NoteError` (`signature`); no verified line is `untrusted`.
    """
    keys: dict[tuple[str, bytes], NoteKey] = {}
    for known_key in known:
        if keys.setdefault((known_key.name, known_key.key_id), known_key) != known_key:
            raise NoteError(
                f"two known keys share name {known_key.name!r} and key ID {known_key.key_id.hex()}",
                reason="format",
            )
    out: list[Verified] = []
    for line in note.signatures:
        key = keys.get((line.name, line.key_id))
        if key is None:
            continue
        if key.sig_type == COSIGNATURE_V1:
            time = line.time
            ok = time is not None and verify_cosignature(key.public, note.body, time, line.sig[_TIME_LEN:])
        else:
            time, ok = None, verify(key.public, _check_body(note.body), line.sig)
        if not ok:
            raise NoteError(f"the signature line of known key {key.name!r} does not verify",
                            reason="signature")
        out.append(Verified(key, time))
    if not out:
        raise NoteError("no signature line of the note is by a known key", reason="untrusted")
    return tuple(out)


def _check_body(body: str) -> bytes:
    if not body.endswith("\n") or any(c < " " and c != "\n" for c in body):
        raise NoteError("a note body is lines of text, each ending in a newline", reason="format")
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NoteError("a note body must be UTF-8 text", reason="format") from exc
