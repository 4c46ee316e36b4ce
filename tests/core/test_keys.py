"""Ed25519 keys: signatures, key files (0600, never overwritten, refused when open to others)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
