"""Ed25519 identities: one signing key per device or agent; its public key is the actor id.

Signing goes through PyNaCl (libsodium), measured faster here than `cryptography`. A key
file holds the 32-byte seed only, written once with mode 0600 and never rewritten; a file
that others can read, or that is malformed, is refused with `KeyFileError`. Verification is
strict as libsodium's releases are (docs/format.md §6): the encoding rules are checked here on
the bytes too, so they hold whatever libsodium build is linked and no verifier that lacks
them (OpenSSL accepts a small-order key with the signature identity ‖ 0) can be swapped in.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import stat
from pathlib import Path
from typing import Final

import nacl.bindings
import nacl.exceptions

from convgraph.errors import KeyFileError

PUBLIC_KEY_LEN: Final = 32
SIGNATURE_LEN: Final = 64
_SEED_LEN: Final = 32
_FILE_HEADER: Final = "convgraph-ed25519-seed-v1"
_P: Final = 2**255 - 19  # the field prime: an encoded y must be below it
_L: Final = 2**252 + 27742317777372353535851937790883648493  # the group order: S must be below it
# libsodium's blocklist (ge25519_has_small_order): the y of every point of order 1, 2, 4 or 8,
# plus p and p + 1, the non-canonical spellings of y = 0 and y = 1. It is matched with the x
# sign bit (the top bit of byte 31) cleared, so each entry blocks two encodings.
_SMALL_ORDER: Final = frozenset(bytes.fromhex(y) for y in (
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
))


class SigningKey:
    """A private Ed25519 key. Invariant: `public` is derived from the seed, never stored."""

    __slots__ = ("_secret", "public")

    def __init__(self, seed: bytes) -> None:
        if len(seed) != _SEED_LEN:
            raise KeyFileError(f"an Ed25519 seed is {_SEED_LEN} bytes, got {len(seed)}")
        public, secret = nacl.bindings.crypto_sign_seed_keypair(seed)
        self.public: bytes = public
        self._secret: bytes = secret

    @classmethod
    def generate(cls) -> SigningKey:
        """A fresh key from the operating system's CSPRNG."""
        return cls(os.urandom(_SEED_LEN))

    @property
    def seed(self) -> bytes:
        """The 32-byte seed this key was made from (what a key file stores)."""
        return self._secret[:_SEED_LEN]

    def sign(self, message: bytes) -> bytes:
        """The 64-byte detached signature of `message`."""
        return bytes(nacl.bindings.crypto_sign(message, self._secret)[:SIGNATURE_LEN])

    def __repr__(self) -> str:
        return f"SigningKey(actor={fingerprint(self.public)})"


def verify(public: bytes, message: bytes, signature: bytes) -> bool:
    """True when `signature` is a valid Ed25519 signature of `message` under `public`."""
    if len(public) != PUBLIC_KEY_LEN or len(signature) != SIGNATURE_LEN:
        return False
    if not _strictly_encoded(public, signature):
        return False
    try:
        nacl.bindings.crypto_sign_open(signature + message, public)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, ValueError):
        return False
    return True


def _strictly_encoded(public: bytes, signature: bytes) -> bool:
    """False when S is not reduced, or the key or R is small-order or not canonically encoded."""
    return (
        int.from_bytes(signature[32:], "little") < _L
        and _key_canonical(public)
        and _large_order_canonical(signature[:32])
    )


def _large_order_canonical(point: bytes) -> bool:
    # R's canonicity is implied by libsodium's final comparison of encodings; checking it
    # here as well changes no outcome and keeps the rule whole without libsodium.
    y = point[:31] + bytes((point[31] & 0x7F,))
    return y not in _SMALL_ORDER and int.from_bytes(y, "little") < _P


# a key signs many records: its answer is asked once (R differs in every signature)
_key_canonical: Final = functools.lru_cache(maxsize=4096)(_large_order_canonical)


def actor_text(public: bytes) -> str:
    """The full text form of an actor id: base32 lower-case, no padding (52 characters)."""
    return base64.b32encode(public).decode("ascii").lower().rstrip("=")


def parse_actor(text: str) -> bytes:
    """Inverse of `actor_text`."""
    try:
        public = base64.b32decode(text.upper() + "====")
    except ValueError as exc:
        raise KeyFileError(f"not an actor id: {text!r}") from exc
    if len(public) != PUBLIC_KEY_LEN or actor_text(public) != text:
        raise KeyFileError(f"not an actor id: {text!r}")
    return public


def fingerprint(public: bytes) -> str:
    """A short display name for an actor: 12 base32 characters of sha256(public key)."""
    return base64.b32encode(hashlib.sha256(public).digest()).decode("ascii").lower()[:12]


def save_key(key: SigningKey, path: Path) -> None:
    """Write `key` to a new file readable by its owner only; never overwrites.

    The file appears whole or not at all (written to a temp file, fsynced, then hard-linked
    into place), so a concurrent opener or a crash never sees a half-written key.
    """
    body = f"{_FILE_HEADER}\n{key.seed.hex()}\n".encode("ascii")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, path)
        _fsync_dir(path.parent)
    except FileExistsError as exc:
        raise KeyFileError(f"key file already exists: {path}") from exc
    except OSError as exc:
        raise KeyFileError(f"cannot create key file {path}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_key(path: Path) -> SigningKey:
    """Read a key file written by `save_key`, refusing one that others may read."""
    try:
        mode = path.stat().st_mode
        text = path.read_text("ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(f"key file {path} is accessible by others (mode {mode & 0o777:o})")
    lines = text.split("\n")
    if len(lines) != 3 or lines[0] != _FILE_HEADER or lines[2] != "":
        raise KeyFileError(f"malformed key file {path}")
    if len(lines[1]) != 2 * _SEED_LEN or lines[1].strip("0123456789abcdef"):
        raise KeyFileError(f"malformed key file {path}: the seed must be 64 lower-case hex digits")
    return SigningKey(bytes.fromhex(lines[1]))


def load_or_create_key(path: Path) -> SigningKey:
    """The key in `path`, generated and saved first when there is none (a concurrent creator
    may win the race: then its key is the one read)."""
    if not path.exists():
        try:
            save_key(SigningKey.generate(), path)
        except KeyFileError:
            if not path.exists():
                raise
    return load_key(path)
