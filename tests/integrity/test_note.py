"""C2SP signed notes (docs/integrity.md §8): the reference vector, our checkpoint notes, and an
independent verifier written from the C2SP text alone."""

from __future__ import annotations

import base64
import hashlib

import nacl.exceptions
import nacl.signing
import pytest
from hypothesis import given
from hypothesis import strategies as st

from convgraph import ManualClock, Replica, SigningKey
from convgraph.core.keys import actor_text
from convgraph.errors import NoteError
from convgraph.integrity import note as n
from convgraph.integrity.statement import heads_digest

# the signed-note reference example (Go golang.org/x/mod/sumdb/note), which C2SP's format is
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_LINE = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
PETER_NOTE = PETER_TEXT + "\n" + PETER_LINE


# ---- an independent reading of C2SP signed-note and tlog-cosignature: no convgraph import ----

def _spec_key_id(name: str, sig_type: int, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\x0a" + bytes([sig_type]) + public).digest()[:4]


def _spec_verify(note: str, name: str, public: bytes, sig_type: int) -> list[int | None]:
    """Every line by (name, key) verified; returns cosignature times (None for type 0x01)."""
    split = note.rindex("\n\n")
    text, sigs = note[: split + 1], note[split + 2 :]
    assert sigs.endswith("\n")
    found: list[int | None] = []
    for line in sigs[:-1].split("\n"):
        assert line.startswith("\u2014 ")
        line_name, b64 = line[2:].split(" ")
        raw = base64.b64decode(b64, validate=True)
        if line_name != name or raw[:4] != _spec_key_id(name, sig_type, public):
            continue
        vk = nacl.signing.VerifyKey(public)
        if sig_type == 0x01:
            vk.verify(text.encode(), raw[4:])
            found.append(None)
        else:
            t = int.from_bytes(raw[4:12], "big")
            vk.verify(b"cosignature/v1\ntime " + str(t).encode() + b"\n" + text.encode(), raw[12:])
            found.append(t)
    return found


def _spec_body(conv: str, count: int, heads: list[bytes], cid_text: str) -> str:
    safe = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-"
    origin = "convgraph/" + "".join(chr(b) if b in safe else f"%{b:02X}" for b in conv.encode())
    digest = hashlib.sha256(b"convgraph/heads/v1\n" + b"".join(sorted(heads))).digest()
    return f"{origin}\n{count}\n{base64.b64encode(digest).decode()}\ncheckpoint {cid_text}\n"


# ---- the reference vector ----

def test_reference_key_id_and_signature() -> None:
    key = n.parse_vkey(PETER_VKEY)
    assert key.name == "PeterNeumann" and key.sig_type == n.ED25519
    assert key.key_id.hex() == "c74f20a3" and key.vkey == PETER_VKEY
    note = n.parse_note(PETER_NOTE)
    assert note.body == PETER_TEXT and note.text == PETER_NOTE
    assert [s.line for s in note.signatures] == [PETER_LINE]
    assert n.verify_note(note, [key]) == (n.Verified(key, None),)


def test_reference_note_fails_when_text_changes() -> None:
    key = n.parse_vkey(PETER_VKEY)
    tampered = n.parse_note(PETER_NOTE.replace("answer", "Answer"))
    with pytest.raises(NoteError) as err:
        n.verify_note(tampered, [key])
    assert err.value.reason == "signature" and err.value.rule == "note"


def test_unknown_name_or_id_is_ignored_and_no_known_line_is_untrusted() -> None:
    peter = n.parse_vkey(PETER_VKEY)
    other = SigningKey(bytes(32))
    same_name = n.NoteKey("PeterNeumann", other.public)  # shares the name, not the ID
    same_id_other_name = n.NoteSignature("PaulNeumann", peter.key_id, b"\x00" * 64)
    note = n.parse_note(PETER_NOTE + same_id_other_name.line)
    assert n.verify_note(note, [peter]) == (n.Verified(peter, None),)  # the stranger line is ignored
    with pytest.raises(NoteError) as err:
        n.verify_note(note, [same_name])
    assert err.value.reason == "untrusted"


def test_a_known_key_that_fails_rejects_the_note_even_beside_a_good_line() -> None:
    peter = n.parse_vkey(PETER_VKEY)
    bad = n.NoteSignature("PeterNeumann", peter.key_id, b"\x01" * 64)
    with pytest.raises(NoteError) as err:
        n.verify_note(n.parse_note(PETER_NOTE + bad.line), [peter])
    assert err.value.reason == "signature"


@pytest.mark.parametrize(
    "text",
    [
        PETER_TEXT + PETER_LINE,                                  # no empty line
        PETER_NOTE[:-1],                                          # last line without newline
        PETER_TEXT + "\n" + "- PeterNeumann AAAAAAAA\n",          # hyphen, not em dash
        PETER_TEXT + "\n" + "— Peter+Neumann x08go/ZJ\n",         # plus in the name
        PETER_TEXT + "\n" + "— PeterNeumann AAAA\n",              # 3 bytes: no room for a signature
        PETER_TEXT + "\n" + "— PeterNeumann x08gow==\n",          # a key ID and nothing signed
        PETER_TEXT + "\n" + "— PeterNeumann x08go/ZJ!!!\n",       # not base64
        PETER_TEXT + "\n" + "— PeterNeumann\n",                   # no signature at all
        PETER_TEXT.replace("\n", "\r\n", 1) + "\n" + PETER_LINE,  # a control character
        PETER_TEXT + "\n" + PETER_LINE * (n.MAX_SIGNATURES + 1),   # too many lines
    ],
)
def test_malformed_notes_are_refused(text: str) -> None:
    with pytest.raises(NoteError) as err:
        n.parse_note(text)
    assert err.value.reason == "format"


def test_not_utf8_is_refused() -> None:
    with pytest.raises(NoteError):
        n.parse_note(PETER_NOTE.encode() + b"\xff")


def test_vkey_with_a_wrong_key_id_is_refused() -> None:
    with pytest.raises(NoteError):
        n.parse_vkey(PETER_VKEY.replace("c74f20a3", "c74f20a4"))
    with pytest.raises(NoteError):
        n.parse_vkey("PeterNeumann+c74f20a3")


# ---- origin encoding ----

@pytest.mark.parametrize(
    ("conv", "line"),
    [
        ("demo", "convgraph/demo"),
        ("a b+c/d", "convgraph/a%20b%2Bc%2Fd"),
        ("x.y_z~-9", "convgraph/x.y_z~-9"),
        ("é", "convgraph/%C3%A9"),
        ("%", "convgraph/%25"),
    ],
)
def test_origin_percent_encodes_every_byte_outside_the_unreserved_set(conv: str, line: str) -> None:
    assert n.origin(conv) == line
    assert n.conv_of_origin(line) == conv


@pytest.mark.parametrize("line", ["convgraph/a%2fb", "convgraph/a/b", "convgraph/%C3", "convgraph/", "x/demo",
                                  "convgraph/a%2"])
def test_origin_only_in_its_canonical_spelling(line: str) -> None:
    with pytest.raises(NoteError):
        n.conv_of_origin(line)


@given(st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40))
def test_origin_round_trips(conv: str) -> None:
    line = n.origin(conv)
    assert line.isascii() and " " not in line and "+" not in line
    assert n.conv_of_origin(line) == conv


# ---- our checkpoint notes ----

@pytest.fixture
def cp() -> tuple[Replica, n.CheckpointBody]:
    r = Replica.in_memory(SigningKey(bytes(range(32))), clock=ManualClock())
    r.write("team/a b", "user_message", {"content": "hi"})
    other = Replica.in_memory(SigningKey(bytes(range(1, 33))), clock=ManualClock())
    other.ingest([rec.data for rec in r.records("team/a b")])
    r.ingest([other.write("team/a b", "agent_message", {"content": "yo"}).data])
    r.write("team/a b", "user_message", {"content": "more"})
    record = r.checkpoint("team/a b")
    return r, n.checkpoint_body(record)


def test_checkpoint_body_lines(cp: tuple[Replica, n.CheckpointBody]) -> None:
    r, body = cp
    record = r.records("team/a b")[-1]
    assert record.kind == "checkpoint"
    lines = body.text.split("\n")
    assert lines[0] == "convgraph/team%2Fa%20b"
    assert lines[1] == str(record.payload["count"]) == "3"
    assert base64.b64decode(lines[2]) == heads_digest(record.payload["heads"])
    assert lines[3] == f"checkpoint {record.cid}" and lines[4] == ""
    assert n.parse_body(body.text) == body
    heads = [bytes(h) for h in record.payload["heads"]]
    assert body.text == _spec_body("team/a b", 3, heads, str(record.cid))


@pytest.mark.parametrize(
    ("old", "new"),
    [("\n3\n", "\n03\n"), ("\n3\n", "\n+3\n"), ("=\n", "\n"), ("checkpoint ", "checkpoint  "),
     ("convgraph/team%2Fa", "convgraph/team%2fa")],
)
def test_body_in_another_spelling_is_refused(cp: tuple[Replica, n.CheckpointBody], old: str, new: str) -> None:
    text = cp[1].text
    assert old in text
    with pytest.raises(NoteError):
        n.parse_body(text.replace(old, new, 1))
    with pytest.raises(NoteError):
        n.parse_body(text + "extra\n")


def test_a_record_that_is_not_a_checkpoint_has_no_body(cp: tuple[Replica, n.CheckpointBody]) -> None:
    with pytest.raises(NoteError):
        n.checkpoint_body(cp[0].records("team/a b")[0])


def test_author_and_witness_lines_verify_independently(cp: tuple[Replica, n.CheckpointBody]) -> None:
    r, body = cp
    author_name = n.actor_key_name(r.key.public)
    assert author_name == "convgraph/actor/" + actor_text(r.key.public)
    author = n.sign(r.key, author_name, body.text)
    w1, w2 = SigningKey(b"\x07" * 32), SigningKey(b"\x08" * 32)
    cos = [n.cosign(w1, "zz.example/witness", body.text, 1_700_000_000),
           n.cosign(w2, n.witness_key_name(w2.public), body.text, 1_700_000_123)]
    note = n.export_note(body.text, author, cos)
    # author first, then cosignatures ordered by key name
    assert [s.name for s in note.signatures] == [author_name, n.witness_key_name(w2.public), "zz.example/witness"]
    text = note.text
    assert _spec_verify(text, author_name, r.key.public, 0x01) == [None]
    assert _spec_verify(text, n.witness_key_name(w2.public), w2.public, 0x04) == [1_700_000_123]
    assert _spec_verify(text, "zz.example/witness", w1.public, 0x04) == [1_700_000_000]
    # the witness's key ID is of type 0x04: a verifier that takes it for 0x01 finds nothing
    assert _spec_verify(text, "zz.example/witness", w1.public, 0x01) == []
    # and ours agrees
    keys = [n.NoteKey(author_name, r.key.public), n.NoteKey("zz.example/witness", w1.public, n.COSIGNATURE_V1)]
    assert [(v.key.name, v.time) for v in n.verify_note(n.parse_note(text), keys)] == [
        (author_name, None), ("zz.example/witness", 1_700_000_000)]
    raw = base64.b64decode(note.signatures[2].line.split(" ")[2])
    assert raw[4:12] == (1_700_000_000).to_bytes(8, "big") and len(raw) == 4 + 8 + 64


def test_independent_verifier_rejects_a_cosignature_over_another_time(cp: tuple[Replica, n.CheckpointBody]) -> None:
    _, body = cp
    w = SigningKey(b"\x07" * 32)
    good = n.cosign(w, "w", body.text, 5)
    forged = n.NoteSignature("w", good.key_id, (6).to_bytes(8, "big") + good.sig[8:])
    text = n.SignedNote(body.text, (forged,)).text
    with pytest.raises(nacl.exceptions.BadSignatureError):
        _spec_verify(text, "w", w.public, 0x04)
    with pytest.raises(NoteError) as err:
        n.verify_note(n.parse_note(text), [n.NoteKey("w", w.public, n.COSIGNATURE_V1)])
    assert err.value.reason == "signature"
    assert n.verify_cosignature(w.public, body.text, 5, good.sig[8:])
    assert not n.verify_cosignature(w.public, body.text, 6, good.sig[8:])
    assert not n.verify_cosignature(w.public, body.text, -1, good.sig[8:])


def test_cosign_refuses_bad_time_name_or_body() -> None:
    w = SigningKey(b"\x07" * 32)
    with pytest.raises(NoteError):
        n.cosign(w, "w", "x\n", n.MAX_TIME + 1)
    with pytest.raises(NoteError):
        n.cosign(w, "a b", "x\n", 1)
    with pytest.raises(NoteError):
        n.sign(w, "w", "no newline")
    with pytest.raises(NoteError):
        n.export_note("x\n", None, [])


def test_two_known_keys_with_one_name_and_id_is_refused() -> None:
    # a 32-bit key ID collides after some 2^16 keys; this pair was found by counting up
    a, b = n.NoteKey("w", (19325).to_bytes(32, "big")), n.NoteKey("w", (103965).to_bytes(32, "big"))
    assert a.key_id == b.key_id == bytes.fromhex("9bc41aed")
    peter = n.parse_vkey(PETER_VKEY)
    with pytest.raises(NoteError) as err:
        n.verify_note(n.parse_note(PETER_NOTE), [peter, a, b])
    assert err.value.reason == "format"
    assert n.verify_note(n.parse_note(PETER_NOTE), [peter, peter, a]) == (n.Verified(peter, None),)


# ---- found by mutation testing: every refusal's words and reason, and the edges of each rule ----

BODY = n.CheckpointBody("team/a b", 3, bytes(range(32)), n.CID.of_record(b"x"))


def _refusal(call: object, *args: object) -> NoteError:
    assert callable(call)
    with pytest.raises(NoteError) as err:
        call(*args)
    return err.value


def _says(err: NoteError, message: str, reason: str = "format") -> None:
    assert (err.message, err.reason, err.cid) == (message, reason, None)


LONG = "x" * 90  # the refusals quote 80 characters of what they refuse


def test_every_origin_refusal_says_why_in_its_words() -> None:
    _says(_refusal(n.origin, "a\ud800" + LONG), f"conversation id {('a' + chr(0xD800) + LONG)[:64]!r} is not UTF-8 text")
    _says(_refusal(n.conv_of_origin, "x/" + LONG), f"origin {('x/' + LONG)[:80]!r} is not convgraph/<conversation>")
    _says(_refusal(n.conv_of_origin, "convgraph/"), "origin 'convgraph/' is not convgraph/<conversation>")
    line = "convgraph/%2f" + LONG
    _says(_refusal(n.conv_of_origin, line), f"origin {line[:80]!r} is not a canonical percent-encoding")


@pytest.mark.parametrize("line", ["convgraph/a%", "convgraph/%", "convgraph/%G1", "convgraph/%1G", "convgraph/é",
                                  "convgraph/a\u00e9b", "convgraph/%FF"])
def test_a_percent_sign_without_two_hex_digits_or_a_raw_non_ascii_character_is_refused(line: str) -> None:
    _says(_refusal(n.conv_of_origin, line), f"origin {line!r} is not a canonical percent-encoding")


def test_a_record_that_is_not_a_checkpoint_is_refused_by_kind_and_cid(cp: tuple[Replica, n.CheckpointBody]) -> None:
    record = cp[0].records("team/a b")[0]
    err = _refusal(n.checkpoint_body, record)
    assert (err.message, err.reason, err.cid) == ("a user_message record has no checkpoint note", "format", str(record.cid))


def _lines(**change: str) -> str:
    lines = dict(zip(("origin", "count", "root", "ext"), BODY.text.split("\n")[:4], strict=True)) | change
    return "".join(f"{v}\n" for v in lines.values())


FOUR_LINES = "a checkpoint note body is exactly four lines, each ending in a newline"
NOT_LINES = "checkpoint note body lines are not count, root and `checkpoint <cid>`"
NOT_CANONICAL = "checkpoint note body is not in its one canonical spelling"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a\nb\nc\n", FOUR_LINES),                                   # three lines
        (BODY.text + "x\n", FOUR_LINES),                             # five
        (BODY.text[:-1], FOUR_LINES),                                # no final newline
        (_lines(count="x"), NOT_LINES),                              # not a number
        (_lines(count="-1"), NOT_LINES),                             # negative
        (_lines(count="\u0663"), NOT_LINES),                         # a digit, but not ASCII
        (_lines(root=base64.b64encode(bytes(31)).decode()), NOT_LINES),   # not a SHA-256 digest
        (_lines(root=base64.b64encode(bytes(33)).decode()), NOT_LINES),
        (_lines(ext="checkpoinX " + str(BODY.checkpoint)), NOT_LINES),    # not the extension line
        (_lines(count="03"), NOT_CANONICAL),
        (_lines(count="-1", ext="checkpoinX " + str(BODY.checkpoint)), NOT_LINES),
    ],
)
def test_every_body_refusal_says_which_rule_it_broke(text: str, message: str) -> None:
    _says(_refusal(n.parse_body, text), message)


@pytest.mark.parametrize("root", ["!" + BODY.text.split("\n")[2], "\u00e9" + BODY.text.split("\n")[2][1:],
                                  BODY.text.split("\n")[2][:-1]])
def test_a_root_that_is_not_strict_base64_does_not_parse(root: str) -> None:
    # non-alphabet characters are an error, not skipped; a non-ASCII one is a NoteError too
    err = _refusal(n.parse_body, _lines(root=root))
    assert err.reason == "format" and err.message.startswith("checkpoint note body does not parse: ")


def test_a_body_of_count_zero_is_read_back() -> None:
    body = n.CheckpointBody("c", 0, bytes(32), BODY.checkpoint)
    assert n.parse_body(body.text) == body


def test_every_key_refusal_says_why() -> None:
    name = "a b" + LONG
    _says(_refusal(n.check_key_name, name), f"key name {name[:80]!r} is empty or holds a space or `+`")
    _says(_refusal(n.check_key_name, ""), "key name '' is empty or holds a space or `+`")
    public = bytes(32)
    for bad in [(public[:31], n.ED25519), (public, 0x02), (public + b"\x00", n.COSIGNATURE_V1)]:
        _says(_refusal(n.NoteKey, "w", *bad), "key 'w': a 32-byte Ed25519 key of type 0x01 or 0x04")
    assert n.NoteKey("w", public, n.COSIGNATURE_V1).sig_type == n.COSIGNATURE_V1


def test_a_verifier_key_of_either_type_round_trips() -> None:
    for sig_type in (n.ED25519, n.COSIGNATURE_V1):
        key = n.NoteKey("w.example/x", bytes(range(32)), sig_type)
        assert n.parse_vkey(key.vkey) == key


@pytest.mark.parametrize(
    "text",
    [
        PETER_VKEY.replace("ARpc2Q", "ARpc!2Q"),    # a character outside base64: not skipped
        PETER_VKEY.replace("ARpc2Q", "ARpc\u00e92Q"),  # a non-ASCII one
        PETER_VKEY + "+x",                           # four parts
        PETER_VKEY[:-4],                             # too short a key
        "PeterNeumann+c74f20a3+AA" + LONG,
    ],
)
def test_every_verifier_key_refusal_says_why(text: str) -> None:
    _says(_refusal(n.parse_vkey, text), f"verifier key {text[:80]!r} is not name+id+base64(type||key)")


def test_a_verifier_key_naming_another_key_id_says_both() -> None:
    text = PETER_VKEY.replace("c74f20a3", "c74f20a4")
    _says(_refusal(n.parse_vkey, text), f"verifier key {text!r} names key ID 'c74f20a4', not c74f20a3")
    long_name = "P" * 90
    key = n.NoteKey(long_name, bytes(32))
    text = key.vkey.replace(key.key_id.hex(), "00000000")
    _says(_refusal(n.parse_vkey, text), f"verifier key {text[:80]!r} names key ID '00000000', not {key.key_id.hex()}")


def test_cosignature_times_from_0_to_2_63_minus_1_sign_and_verify() -> None:
    w = SigningKey(b"\x07" * 32)
    for t in (0, n.MAX_TIME):
        line = n.cosign(w, "w", BODY.text, t)
        assert line.time == t and line.sig[:8] == t.to_bytes(8, "big")
        assert n.verify_cosignature(w.public, BODY.text, t, line.sig[8:])
        key = n.NoteKey("w", w.public, n.COSIGNATURE_V1)
        assert n.verify_note(n.export_note(BODY.text, None, [line]), [key]) == (n.Verified(key, t),)
    for t in (-1, n.MAX_TIME + 1):
        _says(_refusal(n.cosign, w, "w", BODY.text, t), f"cosignature time {t} is outside [0, 2^63 - 1]")
        assert not n.verify_cosignature(w.public, BODY.text, t, bytes(64))


def test_every_body_a_signer_refuses_says_why() -> None:
    w = SigningKey(b"\x07" * 32)
    for body in ("no newline", "a\tb\n"):
        _says(_refusal(n.sign, w, "w", body), "a note body is lines of text, each ending in a newline")
        _says(_refusal(n.cosign, w, "w", body, 1), "a note body is lines of text, each ending in a newline")
    _says(_refusal(n.sign, w, "w", "\ud800\n"), "a note body must be UTF-8 text")
    _says(_refusal(n.export_note, "x\n", None, []), "a signed note needs at least one signature line")


def test_every_note_refusal_says_why() -> None:
    _says(_refusal(n.parse_note, PETER_NOTE.encode() + b"\xff"), "a signed note must be UTF-8")
    _says(_refusal(n.parse_note, PETER_NOTE + "\ud800"), "a signed note must be UTF-8")
    _says(_refusal(n.parse_note, "a\rb\n\n" + PETER_LINE),
          "a signed note holds an ASCII control character other than newline")
    _says(_refusal(n.parse_note, PETER_TEXT + PETER_LINE), "a signed note has no empty line before its signatures")
    _says(_refusal(n.parse_note, PETER_NOTE[:-1]), "a signed note ends with signature lines, each ending in a newline")
    _says(_refusal(n.parse_note, PETER_TEXT + "\n" + PETER_LINE * 101), "a signed note with 101 signatures (at most 100)")
    line = "\u2014 PeterNeumann x08go/ZJ!!!" + LONG
    _says(_refusal(n.parse_note, PETER_TEXT + "\n" + line + "\n"), f"signature line {line[:80]!r} is not `— <name> <base64>`")


def test_a_signature_line_is_split_at_its_first_space() -> None:
    # `— name b64 b64`: the name is `name`, and `b64 b64` is not base64 (C2SP: the name holds no space)
    b64 = PETER_LINE.split(" ")[2].strip()
    line = f"\u2014 PeterNeumann {b64} {b64}"
    _says(_refusal(n.parse_note, PETER_TEXT + "\n" + line + "\n"), f"signature line {line[:80]!r} is not `— <name> <base64>`")


def test_a_hundred_signature_lines_are_read() -> None:
    assert len(n.parse_note(PETER_TEXT + "\n" + PETER_LINE * 100).signatures) == 100


def test_a_body_may_hold_empty_lines_and_be_one() -> None:
    # as Go's note.Open: the signatures follow the last empty line
    w = SigningKey(b"\x07" * 32)
    for body in ("a\n\nb\n", "\n", "a\n\n"):
        note = n.export_note(body, n.sign(w, "w", body), [])
        assert note.body == body and n.parse_note(note.text) == note
        assert n.verify_note(note, [n.NoteKey("w", w.public)]) == (n.Verified(n.NoteKey("w", w.public), None),)


def test_every_verification_refusal_says_why() -> None:
    peter = n.parse_vkey(PETER_VKEY)
    bad = n.NoteSignature("PeterNeumann", peter.key_id, b"\x01" * 64)
    _says(_refusal(n.verify_note, n.parse_note(PETER_TEXT + "\n" + bad.line), [peter]),
          "the signature line of known key 'PeterNeumann' does not verify", "signature")
    _says(_refusal(n.verify_note, n.parse_note(PETER_NOTE), [n.NoteKey("w", bytes(32))]),
          "no signature line of the note is by a known key", "untrusted")
    a, b = n.NoteKey("w", (19325).to_bytes(32, "big")), n.NoteKey("w", (103965).to_bytes(32, "big"))
    _says(_refusal(n.verify_note, n.parse_note(PETER_NOTE), [a, b]), "two known keys share name 'w' and key ID 9bc41aed")
