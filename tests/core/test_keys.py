"""Ed25519 keys: signatures, key files (0600, never overwritten, refused when open to others).

Strict verification (docs/format.md §6) is checked three ways: the forgery vectors, which
satisfy the cofactorless equation, are refused; every encoding our own byte checks refuse,
libsodium refuses too; and with libsodium swapped for OpenSSL, which accepts five of the
forgeries, `verify` still refuses them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import dag_cbor
import nacl.bindings
import nacl.exceptions
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import given
from hypothesis import strategies as st

from convgraph.core import keys as _keys
from convgraph.core.keys import (
    SigningKey,
    actor_text,
    fingerprint,
    load_key,
    parse_actor,
    save_key,
    verify,
)
from convgraph.errors import KeyFileError

KEY = SigningKey(bytes(range(32)))
INVALID = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "invalid.json").read_text("utf-8"))


@given(st.binary(max_size=200))
def test_sign_verify(message: bytes) -> None:
    sig = KEY.sign(message)
    assert len(sig) == 64
    assert verify(KEY.public, message, sig)
    assert not verify(KEY.public, message + b"x", sig)
    flipped = bytes([sig[0] ^ 1]) + sig[1:]
    assert not verify(KEY.public, message, flipped)
    assert not verify(SigningKey.generate().public, message, sig)


def test_rfc8032_test_vector_1() -> None:
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    key = SigningKey(seed)
    assert key.public.hex() == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    assert key.sign(b"").hex() == (
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )


def test_malformed_inputs_do_not_verify() -> None:
    assert not verify(b"short", b"m", KEY.sign(b"m"))
    assert not verify(KEY.public, b"m", b"short")
    assert not verify(b"\xff" * 32, b"m", b"\x00" * 64)


def test_key_file_round_trip_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "k"
    save_key(KEY, path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_key(path).public == KEY.public
    with pytest.raises(KeyFileError):
        save_key(SigningKey.generate(), path)  # never overwrites
    assert load_key(path).public == KEY.public


def test_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k"
    save_key(KEY, path)
    os.chmod(path, 0o644)
    with pytest.raises(KeyFileError, match="accessible by others"):
        load_key(path)


@pytest.mark.parametrize(
    "body",
    ["", "garbage\n", "convgraph-ed25519-seed-v1\nzz\n", "convgraph-ed25519-seed-v1\n" + "00" * 31 + "\n",
     "convgraph-ed25519-seed-v1\n" + "00" * 32],
)
def test_malformed_key_file_is_refused(tmp_path: Path, body: str) -> None:
    path = tmp_path / "k"
    path.write_text(body)
    os.chmod(path, 0o600)
    with pytest.raises(KeyFileError):
        load_key(path)


def test_missing_key_file(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError):
        load_key(tmp_path / "absent")


def test_actor_text_and_fingerprint() -> None:
    text = actor_text(KEY.public)
    assert len(text) == 52 and parse_actor(text) == KEY.public
    assert len(fingerprint(KEY.public)) == 12
    assert fingerprint(KEY.public) != fingerprint(SigningKey.generate().public)
    with pytest.raises(KeyFileError):
        parse_actor(text[:-1])


# --- strict Ed25519 -----------------------------------------------------------------------------

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
SMALL_ORDER_Y = [  # libsodium's blocklist, the sign bit clear
    "00" * 32,
    "01" + "00" * 31,
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "ec" + "ff" * 30 + "7f",
    "ed" + "ff" * 30 + "7f",
    "ee" + "ff" * 30 + "7f",
]
SMALL_ORDER = [bytes.fromhex(y[:62] + f"{int(y[62:], 16) | sign:02x}") for y in SMALL_ORDER_Y for sign in (0, 0x80)]
NON_CANONICAL = [((P + i) | sign << 255).to_bytes(32, "little") for i in range(19) for sign in (0, 1)]
IDENTITY = bytes.fromhex("01" + "00" * 31)
MESSAGE = b"convgraph/record/v1\nany message at all"


def sodium_accepts(public: bytes, message: bytes, sig: bytes) -> bool:
    try:
        nacl.bindings.crypto_sign_open(sig + message, public)
    except (nacl.exceptions.BadSignatureError, ValueError):
        return False
    return True


def openssl_accepts(public: bytes, message: bytes, sig: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(sig, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def forgeries() -> dict[str, tuple[bytes, bytes, bytes]]:
    """(key, message, signature) of the signature reject vectors that satisfy [S]B = R + [k]A
    (tests/core/test_vectors.py checks that): only the strict rules refuse them."""
    out = {}
    for case in INVALID["cases"]:
        if case["name"].startswith(("signature_small_order", "signature_s_not")):
            record = dag_cbor.decode(bytes.fromhex(case["hex"]))
            sig = record.pop("sig")
            out[case["name"]] = (record["actor"], b"convgraph/record/v1\n" + dag_cbor.encode(record), sig)
    return out


def test_blocklist_is_fourteen_encodings_and_the_non_canonical_ones_thirty_eight() -> None:
    assert len(set(SMALL_ORDER)) == 14 and len(set(NON_CANONICAL)) == 38
    assert len(set(SMALL_ORDER) & set(NON_CANONICAL)) == 4  # y = p and y = p + 1, either sign


def test_the_spec_states_the_same_rule() -> None:
    spec = (Path(__file__).resolve().parents[2] / "docs" / "format.md").read_text("utf-8")
    section = spec[spec.index("**Verification**") : spec.index("## 7.")]
    assert re.findall(r"^   ([0-9a-f]{64})   ", section, re.MULTILINE) == SMALL_ORDER_Y
    assert "`L = 2**252 + 27742317777372353535851937790883648493`" in section
    assert "`p = 2**255 - 19`" in section


def test_the_forgeries_are_the_six_vectors() -> None:
    assert len(forgeries()) == 6


@pytest.mark.parametrize("name", sorted(forgeries()))
def test_forgeries_are_refused(name: str) -> None:
    public, message, sig = forgeries()[name]
    assert not verify(public, message, sig)
    assert not sodium_accepts(public, message, sig)


@pytest.mark.parametrize("point", SMALL_ORDER + NON_CANONICAL, ids=lambda b: b.hex()[:8] + b.hex()[-2:])
def test_what_our_byte_checks_refuse_libsodium_refuses_too(point: bytes) -> None:
    as_key = IDENTITY + bytes(32)  # with a key at the identity the equation holds for it
    assert not verify(point, MESSAGE, as_key) and not sodium_accepts(point, MESSAGE, as_key)
    as_r = point + KEY.sign(MESSAGE)[32:]
    assert not verify(KEY.public, MESSAGE, as_r) and not sodium_accepts(KEY.public, MESSAGE, as_r)


@pytest.mark.parametrize("s", [L, L + 1, 2**253, 2**256 - 1])
def test_an_unreduced_s_is_refused_by_both(s: int) -> None:
    sig = KEY.sign(MESSAGE)[:32] + s.to_bytes(32, "little")
    assert not verify(KEY.public, MESSAGE, sig) and not sodium_accepts(KEY.public, MESSAGE, sig)


@given(seed=st.binary(min_size=32, max_size=32), message=st.binary(max_size=64))
def test_honest_signatures_pass_the_byte_checks(seed: bytes, message: bytes) -> None:
    key = SigningKey(seed)
    assert verify(key.public, message, key.sign(message))


def test_strictness_does_not_rest_on_libsodium(monkeypatch: pytest.MonkeyPatch) -> None:
    """With OpenSSL in libsodium's place, which accepts five of the forgeries, none passes."""
    accepted_by_openssl = [n for n, (a, m, s) in forgeries().items() if openssl_accepts(a, m, s)]
    assert len(accepted_by_openssl) == 5 and "signature_s_not_reduced" not in accepted_by_openssl

    def open_with_openssl(signed: bytes, public: bytes) -> bytes:
        if not openssl_accepts(public, signed[64:], signed[:64]):
            raise nacl.exceptions.BadSignatureError("OpenSSL says no")
        return signed[64:]

    lenient: Callable[[bytes, bytes], bytes] = open_with_openssl
    monkeypatch.setattr(nacl.bindings, "crypto_sign_open", lenient)
    assert verify(KEY.public, MESSAGE, KEY.sign(MESSAGE))  # the stand-in does verify
    for name, (public, message, sig) in forgeries().items():
        assert not verify(public, message, sig), name
def test_a_signature_split_differently_from_its_message_does_not_verify() -> None:
    # libsodium reads the first 64 bytes of signature + message as the signature: only the
    # length check keeps a 63-byte "signature" and a message that starts with its last byte
    # from verifying
    sig = KEY.sign(b"message")
    assert not verify(KEY.public, sig[63:] + b"message", sig[:63])
    assert not verify(KEY.public, b"message"[1:], sig + b"message"[:1])


def test_a_seed_of_the_wrong_length_is_refused_saying_so() -> None:
    with pytest.raises(KeyFileError, match=r"^an Ed25519 seed is 32 bytes, got 31$"):
        SigningKey(bytes(31))


def test_a_key_shows_only_its_fingerprint() -> None:
    assert repr(KEY) == f"SigningKey(actor={fingerprint(KEY.public)})"
    assert KEY.seed.hex() not in repr(KEY)


def _key_file(tmp_path: Path, body: str | bytes) -> Path:
    path = tmp_path / "k"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    os.chmod(path, 0o600)
    return path


HEADER = "convgraph-ed25519-seed-v1"


@pytest.mark.parametrize(("body", "why"), [
    ("garbage\n" + "00" * 32 + "\n", "malformed key file {path}"),  # the header is wrong, the seed fine
    (HEADER + "\n" + "00" * 32 + "\nmore", "malformed key file {path}"),
    (HEADER + "\n" + "zz" * 32 + "\n", "malformed key file {path}: the seed must be 64 lower-case hex digits"),
    (HEADER + "\n" + "AB" * 32 + "\n", "malformed key file {path}: the seed must be 64 lower-case hex digits"),
    (HEADER + "\n" + "X" + "0" * 63 + "\n", "malformed key file {path}: the seed must be 64 lower-case hex digits"),
    (HEADER + "\n" + "00" * 31 + "\n", "malformed key file {path}: the seed must be 64 lower-case hex digits"),
])
def test_a_malformed_key_file_is_refused_saying_why(tmp_path: Path, body: str, why: str) -> None:
    path = _key_file(tmp_path, body)
    with pytest.raises(KeyFileError) as info:
        load_key(path)
    assert info.value.message == why.format(path=path)


def test_a_key_file_that_is_not_ascii_cannot_be_read(tmp_path: Path) -> None:
    path = _key_file(tmp_path, HEADER + "\n" + "é" * 32 + "\n")
    with pytest.raises(KeyFileError, match=r"^cannot read key file"):
        load_key(path)
    with pytest.raises(KeyFileError, match=r"^cannot read key file"):
        load_key(tmp_path / "absent")


def test_the_refusal_of_an_open_key_file_shows_its_mode(tmp_path: Path) -> None:
    path = _key_file(tmp_path, "")
    os.chmod(path, 0o640)
    with pytest.raises(KeyFileError) as info:
        load_key(path)
    assert info.value.message == f"key file {path} is accessible by others (mode 640)"


def test_saving_a_key_says_why_it_failed_and_leaves_nothing_behind(tmp_path: Path) -> None:
    save_key(KEY, tmp_path / "k")
    with pytest.raises(KeyFileError, match=r"^key file already exists: "):
        save_key(KEY, tmp_path / "k")
    with pytest.raises(KeyFileError, match=r"^cannot create key file "):
        save_key(KEY, tmp_path / "missing" / "k")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"]


def test_only_the_canonical_actor_text_parses() -> None:
    text = actor_text(KEY.public)
    for bad in (text.upper(), text[:-1], text + "a", "!" * 52):
        with pytest.raises(KeyFileError) as info:
            parse_actor(bad)
        assert info.value.message == f"not an actor id: {bad!r}"


def test_the_byte_rules_refuse_s_from_l_up_whatever_libsodium_does() -> None:
    """The S < L rule is checked on the bytes (libsodium refuses too, which hides a weaker check)."""
    signature = SigningKey(bytes(32)).sign(b"m")
    public, r = SigningKey(bytes(32)).public, signature[:32]
    assert _keys._strictly_encoded(public, r + (L - 1).to_bytes(32, "little"))
    assert not _keys._strictly_encoded(public, r + L.to_bytes(32, "little"))
    assert not _keys._strictly_encoded(public, r + (L + 2**248).to_bytes(32, "little"))  # S's last byte counts
