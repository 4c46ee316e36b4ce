"""Rooted conversations: the id derived from the owner's key, the rooted form, and the root rule
(docs/format.md §15), checked through both sign_record and decode_record."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.keys import SigningKey
from convgraph.core.kinds import CAPABILITIES, KINDS, ROOTED_KINDS
from convgraph.core.record import Record, decode_record, sign_record, signing_bytes
from convgraph.core.rooted import CONV_DOMAIN, check_root, conv_id, is_rooted
from convgraph.errors import GenesisError, SchemaError

KEY = SigningKey(bytes(range(32)))  # the test key of the golden vectors
STRANGER = SigningKey(bytes(range(32, 64)))
NONCE = bytes(range(16))
# The id of the golden vector rooted_genesis (docs/format.md §15.1), written out: the spec.
KNOWN_ID = "cg16by6u6pu7qlwwjbkwuqqbtx32ehyxylu"
CONV = conv_id(KEY.public, NONCE)
T0 = 1_700_000_000_000
ROOTED_FORM = re.compile(r"^cg1[a-z2-7]{32}$")

keys32 = st.binary(min_size=32, max_size=32)
nonces = st.binary(min_size=16, max_size=16)


def independent_id(owner: bytes, nonce: bytes) -> str:
    """The id as docs/authority.md §2 writes it, from hashlib and base64 alone."""
    digest = hashlib.sha256(b"convgraph/conv/v1\n" + owner + nonce).digest()[:20]
    return "cg1" + base64.b32encode(digest).decode("ascii").lower()


def unsigned(key: SigningKey = KEY, **changes: Any) -> dict[str, Any]:
    """The owner's genesis as a record map without sig, with `changes` (`...` drops a field)."""
    m: dict[str, Any] = {
        "conv": CONV, "actor": key.public, "seq": 1, "hlc": [T0, 0], "parents": [],
        "kind": "genesis", "payload": {"nonce": NONCE, "title": "design review"}, "refs": [],
    }
    m.update(changes)
    return {k: v for k, v in m.items() if v is not ...}


def resigned(m: dict[str, Any], key: SigningKey = KEY) -> bytes:
    """`m` signed as is, bypassing sign_record's checks: what a hostile peer can send."""
    return codec.encode({**m, "sig": key.sign(signing_bytes(m))})


def sign(m: dict[str, Any], key: SigningKey = KEY) -> Record:
    """sign_record with the fields of `m` (its actor must be `key`'s)."""
    assert m["actor"] == key.public
    fields = {k: v for k, v in m.items() if k != "actor"}
    fields["hlc"] = tuple(fields["hlc"])
    return sign_record(key, **fields)


Outcome = type[Exception] | None


def both_ways(m: dict[str, Any], expected: Outcome, key: SigningKey = KEY) -> None:
    """sign_record and decode_record agree on `m`: both accept, or both raise exactly `expected`."""
    data = resigned(m, key)
    attempts: list[Callable[[], Any]] = [lambda: sign(m, key), lambda: decode_record(data)]
    for attempt in attempts:
        if expected is None:
            attempt()
            continue
        with pytest.raises(SchemaError) as info:
            attempt()
        assert type(info.value) is expected, info.value
    if expected is None:
        assert sign(m, key).data == data and decode_record(data).data == data


GENESIS = sign(unsigned())
AFTER = [GENESIS.cid]  # parents for a rooted record that is not the genesis


# --- the id ---------------------------------------------------------------------------------


def test_conv_id_of_the_test_key_and_nonce_is_the_documented_value() -> None:
    assert CONV_DOMAIN == b"convgraph/conv/v1\n" and len(CONV_DOMAIN) == 18
    assert conv_id(KEY.public, NONCE) == KNOWN_ID == independent_id(KEY.public, NONCE)
    assert len(KNOWN_ID) == 35 and ROOTED_FORM.match(KNOWN_ID) and is_rooted(KNOWN_ID)


@given(owner=keys32, nonce=nonces)
def test_conv_id_has_the_rooted_form_and_is_the_specified_hash(owner: bytes, nonce: bytes) -> None:
    cid = conv_id(owner, nonce)
    assert len(cid) == 35 and ROOTED_FORM.match(cid) and is_rooted(cid)
    assert cid == independent_id(owner, nonce)


@given(owner=keys32, other=keys32, nonce=nonces, other_nonce=nonces)
def test_a_different_owner_or_nonce_gives_a_different_id(
    owner: bytes, other: bytes, nonce: bytes, other_nonce: bytes
) -> None:
    assume(owner != other and nonce != other_nonce)
    ids = {conv_id(owner, nonce), conv_id(other, nonce), conv_id(owner, other_nonce)}
    assert len(ids) == 3


@pytest.mark.parametrize(("owner", "nonce"), [
    (KEY.public[:31], NONCE), (KEY.public + b"\x00", NONCE), (KEY.public, NONCE[:15]),
    (KEY.public, NONCE + b"\x00"), (bytearray(KEY.public), NONCE), (KEY.public, bytearray(NONCE)),
    (KEY.public.hex(), NONCE), (KEY.public, b""),
])
def test_conv_id_needs_a_32_byte_key_and_a_16_byte_nonce(owner: Any, nonce: Any) -> None:
    with pytest.raises(SchemaError) as info:
        conv_id(owner, nonce)
    assert info.value.message == "a conversation id needs a 32-byte owner key and a 16-byte nonce"


# --- the rooted form ----------------------------------------------------------------------------

BODY = KNOWN_ID[3:]


@pytest.mark.parametrize("text", [
    KNOWN_ID.upper(), "CG1" + BODY, "cg1" + BODY.upper(), "cg1" + BODY[:-1] + "A",  # upper case
    KNOWN_ID[:34], KNOWN_ID + "a", KNOWN_ID + "2",  # 34 and 36 characters
    *("cg1" + BODY[:-1] + c for c in "0189"),  # digits outside base32's 2-7
    "cg1" + "0" * 32, "cg1" + "1" * 32, "cg1" + "8" * 32, "cg1" + "9" * 32,
    KNOWN_ID + "\n", "\n" + KNOWN_ID, " " + KNOWN_ID, KNOWN_ID + " ",  # no anchoring slack
    "cg2" + BODY, "cg0" + BODY, "cgl" + BODY, "xg1" + BODY, "cg" + BODY + "a",  # the prefix
    "cg1" + BODY[:-1] + "=", "cg1" + BODY[:31] + "é",  # padding, a non-ASCII letter
    "demo", "kinds", "会話-ü", "é" * 128, "", "cg1", "x" * 35,  # legacy names, the vectors' among them
])
def test_is_rooted_rejects_everything_else(text: str) -> None:
    assert not is_rooted(text)


@pytest.mark.parametrize("text", [
    "cg1" + "a" * 32, "cg1" + "2" * 32, "cg1" + "7" * 32, "cg1" + "z" * 32,
    "cg1" + "abcdefghijklmnopqrstuvwxyz234567",
])
def test_is_rooted_is_a_test_on_the_text_alone(text: str) -> None:
    """Any 32 base32 characters after cg1 are rooted, whether or not some key derives them."""
    assert is_rooted(text)


@given(st.text(alphabet="cgCG0123456789abyzAZ=é \n", max_size=40) | st.from_regex(ROOTED_FORM))
def test_is_rooted_is_exactly_the_documented_pattern(text: str) -> None:
    by_hand = (
        len(text) == 35 and text[:3] == "cg1"
        and all(c in "abcdefghijklmnopqrstuvwxyz234567" for c in text[3:])
    )
    assert is_rooted(text) == by_hand


def test_the_rooted_table_adds_genesis_and_system_prompt_to_the_legacy_twenty() -> None:
    assert len(KINDS) == 20 and "genesis" not in KINDS and "system_prompt" not in KINDS
    assert set(ROOTED_KINDS) == set(KINDS) | {"genesis", "system_prompt"} and len(ROOTED_KINDS) == 22
    assert CAPABILITIES == ("admin", "decide", "merge", "read", "review", "write")


# --- the genesis and the root rule (format.md §15.2, check 15a) -----------------------------


def test_the_owners_genesis_is_accepted() -> None:
    rec = decode_record(GENESIS.data)
    assert rec.kind == "genesis" and rec.conv == CONV and rec.payload == {
        "nonce": NONCE, "title": "design review"
    }
    both_ways(unsigned(), None)


@pytest.mark.parametrize("payload", [
    {"nonce": NONCE},
    {"nonce": NONCE, "title": ""},
    {"nonce": NONCE, "migrated_from": "demo", "meta": {"by": "convgraph migrate"}},
])
def test_genesis_payloads_the_rooted_table_allows(payload: dict[str, Any]) -> None:
    both_ways(unsigned(payload=payload), None)


def test_a_genesis_may_carry_refs() -> None:
    """refs are free: a migration names the heads of the legacy conversation it copies."""
    both_ways(unsigned(refs=sorted([CID.of_record(b"old head"), CID.of_raw(b"blob")])), None)


@given(seed=keys32, nonce=nonces)
def test_anyone_may_root_a_conversation_of_their_own(seed: bytes, nonce: bytes) -> None:
    key = SigningKey(seed)
    m = unsigned(key, conv=conv_id(key.public, nonce), payload={"nonce": nonce})
    assert decode_record(resigned(m, key)).conv == independent_id(key.public, nonce)


@given(seed=keys32, nonce=nonces)
def test_a_stranger_cannot_write_the_genesis_of_the_owners_id(seed: bytes, nonce: bytes) -> None:
    """Naming the owner's id with the stranger's own key fails, whatever nonce it tries."""
    stranger = SigningKey(seed)
    assume(stranger.public != KEY.public)
    both_ways(unsigned(stranger, payload={"nonce": nonce}), GenesisError, stranger)


def test_the_stranger_genesis_with_the_owners_own_nonce_is_refused() -> None:
    both_ways(unsigned(STRANGER), GenesisError, STRANGER)


@given(nonce=nonces)
def test_a_genesis_whose_nonce_does_not_derive_its_conv_is_refused(nonce: bytes) -> None:
    assume(nonce != NONCE)
    both_ways(unsigned(payload={"nonce": nonce}), GenesisError)


def test_a_genesis_must_have_seq_1() -> None:
    for seq in (2, 3, 2**53 - 1):
        both_ways(unsigned(seq=seq), GenesisError)


def test_a_genesis_must_have_no_parents() -> None:
    both_ways(unsigned(parents=[CID.of_record(b"an earlier record")]), GenesisError)
    both_ways(unsigned(parents=sorted([CID.of_record(b"1"), CID.of_record(b"2")])), GenesisError)


def test_a_genesis_must_have_no_branch() -> None:
    for branch in ("main", "experiment"):
        both_ways(unsigned(branch=branch), GenesisError)


def test_a_genesis_in_a_legacy_conversation_is_refused() -> None:
    """The kind is known, so the payload passes check 15 and the root rule refuses it."""
    for conv in ("demo", KNOWN_ID.upper(), KNOWN_ID[:34], "会話"):
        both_ways(unsigned(conv=conv), GenesisError)


def test_a_malformed_genesis_payload_is_a_schema_error_not_a_root_error() -> None:
    """Check 15 runs before 15a: a nonce of the wrong size is a payload fault, in either table."""
    for conv in (CONV, "demo"):
        for payload in ({"nonce": NONCE[:15]}, {"nonce": NONCE + b"\x00"}, {"nonce": NONCE.hex()},
                        {"title": "no nonce"}, {"nonce": NONCE, "migrated_from": " "},
                        {"nonce": NONCE, "owner": KEY.public}):
            both_ways(unsigned(conv=conv, payload=payload), SchemaError)


@pytest.mark.parametrize(("kind", "payload"), [
    ("user_message", {"content": "first!"}),
    ("agent_message", {"text": "I was here first"}),
    ("grant", {"grantee": STRANGER.public, "rights": ["admin"]}),
    ("checkpoint", {"heads": [CID.of_record(b"h")], "count": 1, "snapshot": CID.of_raw(b"s")}),
])
def test_in_a_rooted_conversation_a_parentless_record_must_be_the_genesis(
    kind: str, payload: dict[str, Any]
) -> None:
    for key in (KEY, STRANGER):  # the owner is bound by the rule too
        both_ways(unsigned(key, kind=kind, payload=payload), GenesisError, key)
        both_ways(unsigned(key, kind=kind, payload=payload, seq=2), GenesisError, key)
        # with a parent, the same record passes the intrinsic checks
        both_ways(unsigned(key, kind=kind, payload=payload, parents=AFTER), None, key)


@given(conv=st.from_regex(ROOTED_FORM, fullmatch=True), kind=st.sampled_from(["user_message", "pin"]))
def test_any_rooted_id_refuses_a_parentless_non_genesis(conv: str, kind: str) -> None:
    payload = {"content": "x"} if kind == "user_message" else {"target": CID.of_record(b"t")}
    with pytest.raises(GenesisError):
        decode_record(resigned(unsigned(conv=conv, kind=kind, payload=payload)))
    assert decode_record(resigned(unsigned(conv=conv, kind=kind, payload=payload, parents=AFTER)))


def test_a_rooted_record_with_parents_needs_no_particular_seq() -> None:
    """Whose parents and which seq are causal questions (11.2), not the root rule's."""
    for seq in (1, 2, 40):
        both_ways(unsigned(kind="user_message", payload={"content": "hi"}, parents=AFTER, seq=seq), None)


def test_legacy_conversations_keep_the_version_1_rules() -> None:
    """A parentless first message is fine in a legacy conversation, whatever its name."""
    for conv in ("demo", KNOWN_ID.upper(), KNOWN_ID[:34], KNOWN_ID + "a", "cg1" + BODY[:-1] + "0"):
        both_ways(unsigned(conv=conv, kind="user_message", payload={"content": "hello"}), None)


def test_decode_names_the_record_in_a_genesis_error() -> None:
    data = resigned(unsigned(seq=2))
    with pytest.raises(GenesisError) as info:
        decode_record(data)
    assert info.value.cid == str(CID.of_record(data)) and info.value.rule == "genesis"


@pytest.mark.parametrize(("changes", "says"), [
    ({"conv": "demo"}, "a genesis names a legacy conversation id 'demo'"),
    # a legacy id may be as long as any conv (256 bytes); the message shows its first 64 characters
    ({"conv": "d" * 64 + "e" * 36}, f"a genesis names a legacy conversation id {'d' * 64!r}"),
    ({"kind": "user_message", "payload": {"content": "first!"}},
     "a record without parents must be its conversation's genesis"),
    ({"parents": AFTER}, "a genesis has seq 1, no parents and no branch"),
    ({"payload": {"nonce": bytes(16)}}, "the genesis's actor and nonce do not derive its conversation id"),
])
def test_each_genesis_error_names_the_record_and_the_rule_it_broke(
    changes: dict[str, Any], says: str
) -> None:
    data = resigned(unsigned(**changes))
    with pytest.raises(GenesisError) as info:
        decode_record(data)
    assert info.value.message == says and info.value.cid == str(CID.of_record(data))


def test_check_root_reads_only_the_root_fields() -> None:
    """Called on a map that passed the payload checks; a legacy non-genesis is never inspected."""
    check_root({"conv": "demo", "kind": "user_message"})
    check_root({"conv": CONV, "kind": "pin", "parents": AFTER})
    with pytest.raises(GenesisError, match="legacy"):
        check_root({"conv": "demo", "kind": "genesis"})


# --- the rooted payload table, against the legacy one ---------------------------------------


def grant(rights: list[str], conv: str = CONV) -> dict[str, Any]:
    parents = AFTER if conv == CONV else []
    return unsigned(conv=conv, seq=2, parents=parents, kind="grant",
                    payload={"grantee": STRANGER.public, "rights": rights})


@pytest.mark.parametrize("cap", CAPABILITIES)
def test_each_of_the_six_capabilities_is_a_rooted_right(cap: str) -> None:
    both_ways(grant([cap]), None)
    revoke = {"grantee": STRANGER.public, "rights": [cap], "reason": "left"}
    both_ways(unsigned(seq=2, parents=AFTER, kind="revocation", payload=revoke), None)


@pytest.mark.parametrize("cap", CAPABILITIES)
def test_legacy_grants_keep_their_three_rights(cap: str) -> None:
    both_ways(grant([cap], conv="demo"), None if cap in ("admin", "read", "write") else SchemaError)


def test_all_six_rights_together_and_the_set_rules() -> None:
    both_ways(grant(list(CAPABILITIES)), None)
    both_ways(grant(list(CAPABILITIES), conv="demo"), SchemaError)
    for rights in (["write", "read"], ["read", "read"], [], ["read", "sudo"], ["Read"], ["read", 1]):
        both_ways(grant(rights), SchemaError)
    expiring = grant(["decide", "review"])
    expiring["payload"] = {**expiring["payload"], "expires_ms": T0 + 86_400_000, "note": "a week"}
    both_ways(expiring, None)


def test_revocation_by_target_is_legacy_only() -> None:
    by_target = {"target": CID.of_record(b"a grant"), "reason": "device lost"}
    both_ways(unsigned(conv="demo", kind="revocation", payload=by_target), None)
    both_ways(unsigned(seq=2, parents=AFTER, kind="revocation", payload=by_target), SchemaError)
    by_grantee = {"grantee": STRANGER.public, "rights": ["read"]}
    both_ways(unsigned(conv="demo", kind="revocation", payload=by_grantee), SchemaError)
    both_ways(unsigned(seq=2, parents=AFTER, kind="revocation",
                       payload={**by_grantee, "target": by_target["target"]}), SchemaError)


def test_decision_request_reviews_and_reviewers_are_rooted_only() -> None:
    reviewers = sorted([KEY.public, STRANGER.public])
    request = {"question": "Ship it?", "options": ["yes", "no"], "reviews": 2, "reviewers": reviewers}
    both_ways(unsigned(seq=2, parents=AFTER, kind="decision_request", payload=request), None)
    both_ways(unsigned(conv="demo", kind="decision_request", payload=request), SchemaError)
    legacy = {"question": "Ship it?", "options": ["yes", "no"]}
    both_ways(unsigned(conv="demo", kind="decision_request", payload=legacy), None)
    both_ways(unsigned(seq=2, parents=AFTER, kind="decision_request", payload=legacy), None)
    for bad in ({"reviewers": reviewers[::-1]}, {"reviewers": [KEY.public] * 2}, {"reviewers": []},
                {"reviewers": [KEY.public[:31]]}, {"reviews": -1}, {"reviews": 1.0}):
        both_ways(unsigned(seq=2, parents=AFTER, kind="decision_request",
                           payload={**request, **bad}), SchemaError)
