"""Golden vectors: the record format pinned byte for byte, and checked by a second implementation.

Three kinds of check:
* the vectors in tests/vectors/ against convgraph (sign, encode, decode, reject);
* the same vectors against an independent path: the pure-Python `dag_cbor` encoder with
  `multiformats` CIDs, `hashlib` and PyNaCl, fed only from the JSON inputs — no convgraph code;
  for rooted conversations, the conv id and the root rule (check 15a) from `hashlib`, `base64`
  and `re` alone;
* a property test: for random keys, links and byte strings (including byte strings that are
  a CID's binary form), convgraph's bytes equal dag_cbor's, and bytes stay bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import dag_cbor
import nacl.exceptions
import nacl.signing
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from dag_cbor.decoding import CBORDecodingError
from hypothesis import given
from hypothesis import strategies as st
from multiformats import CID as MfCID
from multiformats import multihash
from multiformats.multihash import MultihashValueError

import convgraph.errors
from convgraph.core import codec, keys
from convgraph.core.cid import CID
from convgraph.core.hlc import MAX_COUNTER, MAX_WALL_MS
from convgraph.core.keys import SigningKey
from convgraph.core.kinds import KINDS, ROOTED_KINDS
from convgraph.core.record import (
    DEFAULT_LIMITS,
    MAX_SEQ,
    SIGNING_DOMAIN,
    Limits,
    decode_record,
    sign_record,
    signing_bytes,
)
from convgraph.errors import ConvgraphError, SizeLimitError
from vectors.loader import generator

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
FORMAT_DOC = Path(__file__).resolve().parents[2] / "docs" / "format.md"
RECORDS = json.loads((VECTORS / "records.json").read_text("utf-8"))
INVALID = json.loads((VECTORS / "invalid.json").read_text("utf-8"))
CASES = RECORDS["cases"]
BAD = INVALID["cases"]

DOMAIN = b"convgraph/record/v1\n"  # written out again on purpose: the spec, not the code
CONV_DOMAIN = b"convgraph/conv/v1\n"  # docs/format.md §15.1, likewise
ROOTED_ID = re.compile(r"cg1[a-z2-7]{32}")
DAG_CBOR_SHA256 = b"\x01\x71\x12\x20"
RAW_SHA256 = b"\x01\x55\x12\x20"


def by_name(cases: list[dict[str, Any]]) -> Any:
    return pytest.mark.parametrize("case", cases, ids=[c["name"] for c in cases])


# --- reading the JSON form (see the description in records.json) ---------------------------


def from_json(value: Any, link: Any) -> Any:
    """A JSON-form value as a data-model value; `link` turns CID text into a CID object."""
    if isinstance(value, dict):
        if set(value) == {"/"}:
            inner = value["/"]
            if isinstance(inner, str):
                return link(inner)
            text = inner["bytes"]
            return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        return {k: from_json(v, link) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v, link) for v in value]
    return value


def mf_link(text: str) -> MfCID:
    cid = MfCID.decode(text)
    assert cid.encode("base32") == text
    return cid


def record_map(inputs: dict[str, Any], link: Any) -> dict[str, Any]:
    """The record map (without sig) that `inputs` describe, with `link` CIDs."""
    m = {
        "conv": inputs["conv"],
        "actor": bytes.fromhex(inputs["actor"]),
        "seq": inputs["seq"],
        "hlc": list(inputs["hlc"]),
        "parents": [link(t) for t in inputs["parents"]],
        "kind": inputs["kind"],
        "payload": from_json(inputs["payload"], link),
        "refs": [link(t) for t in inputs["refs"]],
    }
    if "branch" in inputs:
        m["branch"] = inputs["branch"]
    return m


def sign_fields(inputs: dict[str, Any]) -> dict[str, Any]:
    """`sign_record` keyword arguments for `inputs` (parents and refs handed over reversed)."""
    fields = record_map(inputs, CID.parse)
    del fields["actor"]
    fields["hlc"] = tuple(fields["hlc"])
    fields["parents"] = fields["parents"][::-1]
    fields["refs"] = fields["refs"][::-1]
    return fields


def typed(value: Any) -> Any:
    """A form of a data-model value where equal means same kind too (1 != 1.0 != True,
    bytes != CID, 0.0 != -0.0), for either CID class."""
    if isinstance(value, (CID, MfCID)):
        return ("link", bytes(value))
    if type(value) is dict:
        return ("map", tuple(sorted((k, typed(v)) for k, v in value.items())))
    if type(value) is list:
        return ("list", tuple(typed(v) for v in value))
    if type(value) is float:
        return ("float", struct.pack(">d", value))
    return (type(value).__name__, value)


def container_depth(value: Any) -> int:
    """How deep maps and lists nest in `value` (a scalar is 0, `{}` is 1)."""
    if type(value) is dict:
        return 1 + max(map(container_depth, value.values()), default=0)
    if type(value) is list:
        return 1 + max(map(container_depth, value), default=0)
    return 0


def independent_cid_text(data: bytes) -> str:
    raw = DAG_CBOR_SHA256 + hashlib.sha256(data).digest()
    return "b" + base64.b32encode(raw).decode("ascii").lower().rstrip("=")


def independent_conv_id(owner: bytes, nonce: bytes) -> str:
    """docs/format.md §15.1: cg1 + base32lower_nopad(sha256(domain ‖ owner ‖ nonce)[0:20])."""
    digest = hashlib.sha256(CONV_DOMAIN + owner + nonce).digest()[:20]
    return "cg1" + base64.b32encode(digest).decode("ascii").lower()


def root_faults(m: dict[str, Any]) -> list[str]:
    """The rules of check 15a (docs/format.md §15.2) that the record map `m` breaks, read from
    the spec alone; `m` has the header and payload types its kind needs."""
    rooted = ROOTED_ID.fullmatch(m["conv"]) is not None
    if m["kind"] != "genesis":
        return ["a parentless record that is not the genesis"] if rooted and m["parents"] == [] else []
    if not rooted:
        return ["a genesis in a legacy conversation"]
    faults = [rule for rule, broken in (
        ("seq", m["seq"] != 1), ("parents", m["parents"] != []), ("branch", "branch" in m),
        ("conv", independent_conv_id(m["actor"], m["payload"]["nonce"]) != m["conv"]),
    ) if broken]
    return [f"a genesis with the wrong {rule}" for rule in faults]


# --- the vector files themselves --------------------------------------------------------------


def test_golden_cases_cover_every_kind_and_the_required_shapes() -> None:
    assert {c["inputs"]["kind"] for c in CASES} == set(ROOTED_KINDS) == set(KINDS) | {"genesis", "system_prompt"}
    assert len(KINDS) == 20 and len(ROOTED_KINDS) == 22
    names = {c["name"] for c in CASES}
    assert {
        "genesis_user_message", "two_parents_and_refs", "record_on_branch", "float_payload",
        "negative_and_wide_integers", "length_first_key_sort", "bytes_that_look_like_cids",
        "unicode_text", "limits_at_bounds", "payload_depth_64", "latency_ms_negative_zero",
        "latency_ms_float_at_bound", "grant_rights_all_three",
        # rooted conversations (§15)
        "rooted_genesis", "rooted_user_message", "rooted_grant_all_six", "rooted_revocation",
        "rooted_decision_request", "rooted_system_prompt",
    } <= names
    assert len(names) == len(CASES)
    shapes = {c["name"]: c["inputs"] for c in CASES}
    assert container_depth(from_json(shapes["payload_depth_64"]["payload"], mf_link)) == 64
    deep = {c["name"]: c for c in BAD}["payload_depth_65"]
    assert container_depth(dag_cbor.decode(bytes.fromhex(deep["hex"]))["payload"]) == 65
    assert len(shapes["two_parents_and_refs"]["parents"]) == 2 and shapes["two_parents_and_refs"]["refs"]
    assert "branch" in shapes["record_on_branch"]


def test_invalid_cases_cover_the_required_rules() -> None:
    names = {c["name"] for c in BAD}
    assert len(names) == len(BAD)
    assert {
        "map_keys_bytewise_order", "non_minimal_int", "half_float", "nan", "indefinite_length_array",
        "trailing_bytes", "unknown_kind", "bad_signature_bit_flip", "seq_zero", "missing_field_refs",
        "extra_top_level_field", "unsorted_parents", "duplicate_parents", "raw_codec_parent",
        "tag42_cid_too_short", "payload_undeclared_field", "payload_depth_65", "sig_wrong_length",
        # strict Ed25519 (docs/format.md §6)
        "signature_small_order_key_identity", "signature_small_order_key_order_2",
        "signature_small_order_r", "signature_s_not_reduced", "signature_cofactored_only",
        # the error class of input that is not well-formed, or has several faults (§2.7)
        "info31_on_unsigned_int", "info31_on_negative_int", "info31_on_tag",
        "indefinite_bytes_with_text_chunk", "indefinite_bytes_with_indefinite_chunk",
        "half_float_nan", "single_float_nan", "form_fault_then_bad_utf8", "two_form_faults",
        # payload types at their edges (§9.3)
        "grant_rights_unsorted", "latency_ms_negative", "latency_ms_too_large",
        # rooted conversations: the root rule (§15.2, check 15a) and the rooted table
        "genesis_in_legacy_conversation", "rooted_parentless_non_genesis",
        "genesis_nonce_does_not_derive_conv", "genesis_by_stranger", "genesis_seq_2",
        "genesis_with_parent", "genesis_with_branch", "rooted_revocation_by_target",
        "rooted_grant_unknown_right", "rooted_grant_rights_unsorted", "genesis_nonce_15_bytes",
        "rooted_decision_request_reviewers_unsorted", "system_prompt_in_legacy_conversation",
        "rooted_system_prompt_blocks",
    } <= names


def _load_generator() -> ModuleType:
    return generator("generate.py")


def test_generator_reproduces_the_committed_files_exactly() -> None:
    gen = _load_generator()
    assert gen.render(gen.build_records()) == (VECTORS / "records.json").read_text("utf-8")
    assert gen.render(gen.build_invalid()) == (VECTORS / "invalid.json").read_text("utf-8")


def test_format_doc_shows_the_worked_example_as_generated() -> None:
    doc = FORMAT_DOC.read_text("utf-8")
    blocks = [b for b in _load_generator().example().split("\n\n") if b.strip()]
    assert len(blocks) >= 8
    for block in blocks:
        assert block in doc, f"docs/format.md lacks this block of the worked example:\n{block}"
    table = {m.group(1) for m in re.finditer(r"^\| `([a-z_]+)` \| ", doc, re.MULTILINE)}
    assert set(ROOTED_KINDS) <= table, f"kinds missing from the tables in docs/format.md: {set(ROOTED_KINDS) - table}"
    rooted = {c["name"]: c for c in CASES}["rooted_genesis"]["inputs"]["conv"]
    section = doc[doc.index("### 15.1"):doc.index("### 15.2")]
    assert rooted in section, f"§15.1 of docs/format.md lacks the example id {rooted}"


def test_the_test_key_and_its_text_forms() -> None:
    key = RECORDS["key"]
    seed = bytes.fromhex(key["seed_hex"])
    assert seed == bytes(range(32))
    public = nacl.signing.SigningKey(seed).verify_key.encode()
    assert SigningKey(seed).public == public and key["public_hex"] == public.hex()
    assert key["actor_text"] == base64.b32encode(public).decode().lower().rstrip("=")
    assert keys.actor_text(public) == key["actor_text"] and len(key["actor_text"]) == 52
    assert keys.parse_actor(key["actor_text"]) == public
    fp = base64.b32encode(hashlib.sha256(public).digest()).decode().lower()[:12]
    assert keys.fingerprint(public) == fp == key["fingerprint"]
    assert bytes.fromhex(RECORDS["signing_domain_hex"]) == SIGNING_DOMAIN == DOMAIN


def test_bounds_are_the_documented_constants() -> None:
    assert (MAX_SEQ, MAX_WALL_MS, MAX_COUNTER) == (2**53 - 1, 2**53 - 1, 2**32 - 1)
    documented = Limits(max_record_bytes=1 << 20, max_parents=1024, max_refs=1024, max_name_bytes=256)
    assert documented == DEFAULT_LIMITS


# --- golden vectors against convgraph ---------------------------------------------------------


@by_name(CASES)
def test_signing_reproduces_the_vector(case: dict[str, Any], test_key: SigningKey) -> None:
    assert test_key.public.hex() == case["inputs"]["actor"]
    rec = sign_record(test_key, **sign_fields(case["inputs"]))
    unsigned = rec.to_map()
    sig = unsigned.pop("sig")
    assert codec.encode(unsigned).hex() == case["unsigned_hex"]
    assert signing_bytes(unsigned).hex() == case["signing_input_hex"]
    assert sig.hex() == case["sig_hex"]
    assert rec.data.hex() == case["record_hex"]
    assert str(rec.cid) == case["cid"] and CID.parse(case["cid"]) == rec.cid


@by_name(CASES)
def test_decoding_accepts_the_vector(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["record_hex"])
    rec = decode_record(data, expected_cid=CID.parse(case["cid"]))
    assert rec.data == data and str(rec.cid) == case["cid"]
    expected = {**record_map(case["inputs"], CID.parse), "sig": bytes.fromhex(case["sig_hex"])}
    assert typed(rec.to_map()) == typed(expected) == typed(codec.decode(data))
    assert rec.branch == case["inputs"].get("branch")


# --- golden vectors against an independent implementation -------------------------------------


@by_name(CASES)
def test_vector_matches_an_independent_implementation(case: dict[str, Any]) -> None:
    unsigned = record_map(case["inputs"], mf_link)
    unsigned_bytes = dag_cbor.encode(unsigned)
    assert unsigned_bytes.hex() == case["unsigned_hex"]
    signing_input = DOMAIN + unsigned_bytes
    assert signing_input.hex() == case["signing_input_hex"]
    seed = bytes.fromhex(RECORDS["key"]["seed_hex"])
    sig = nacl.signing.SigningKey(seed).sign(signing_input).signature  # RFC 8032: deterministic
    assert sig.hex() == case["sig_hex"]
    nacl.signing.VerifyKey(unsigned["actor"]).verify(signing_input, sig)
    record = dag_cbor.encode({**unsigned, "sig": sig})
    assert record.hex() == case["record_hex"]
    assert independent_cid_text(record) == case["cid"]
    mh = multihash.wrap(hashlib.sha256(record).digest(), "sha2-256")
    assert MfCID("base32", 1, "dag-cbor", mh).encode() == case["cid"]
    assert typed(dag_cbor.decode(record)) == typed({**unsigned, "sig": sig})


ROOTED_CASES = [c for c in CASES if ROOTED_ID.fullmatch(c["inputs"]["conv"])]


@by_name(ROOTED_CASES)
def test_rooted_case_derives_its_conv_independently(case: dict[str, Any]) -> None:
    """Every rooted case belongs to a conversation whose genesis is in the file and derives its id."""
    conv = case["inputs"]["conv"]
    geneses = [c["inputs"] for c in ROOTED_CASES if c["inputs"]["conv"] == conv and c["inputs"]["kind"] == "genesis"]
    assert len(geneses) == 1
    genesis = record_map(geneses[0], mf_link)
    nonce = genesis["payload"]["nonce"]
    assert type(nonce) is bytes and len(nonce) == 16
    assert independent_conv_id(genesis["actor"], nonce) == conv and len(conv) == 35
    assert genesis["seq"] == 1 and genesis["parents"] == [] and "branch" not in genesis
    if case["inputs"]["kind"] != "genesis":
        assert case["inputs"]["parents"]


def test_the_rooted_vectors_use_the_documented_key_and_nonce() -> None:
    genesis = {c["name"]: c for c in CASES}["rooted_genesis"]["inputs"]
    nonce = from_json(genesis["payload"]["nonce"], mf_link)
    assert nonce == bytes(range(16)) and genesis["actor"] == RECORDS["key"]["public_hex"]
    assert genesis["conv"] == independent_conv_id(bytes.fromhex(RECORDS["key"]["public_hex"]), nonce)


@by_name(CASES)
def test_golden_case_keeps_the_root_rule_by_an_independent_reading(case: dict[str, Any]) -> None:
    assert root_faults(record_map(case["inputs"], mf_link)) == []


# A reject vector whose payload fault stops it before the root rule: with a 15-byte nonce
# no key derives its conv, but check 15 (the payload) runs before check 15a.
BEFORE_THE_ROOT_RULE = {"genesis_nonce_15_bytes"}


@by_name([c for c in BAD if c["well_formed_dag_cbor"]])
def test_reject_vector_breaks_the_root_rule_only_if_it_says_so(case: dict[str, Any]) -> None:
    """Each GenesisError vector breaks exactly one rule of check 15a, read from the spec alone;
    every other reject vector that reaches it breaks none."""
    value = dag_cbor.decode(bytes.fromhex(case["hex"]))
    if not (type(value) is dict and type(value.get("conv")) is str and type(value.get("kind")) is str
            and "parents" in value):
        assert case["error"] != "GenesisError"
        return
    faults = root_faults(value)
    if case["error"] == "GenesisError":
        assert len(faults) == 1, faults
    elif case["name"] in BEFORE_THE_ROOT_RULE:
        assert len(value["payload"]["nonce"]) == 15 and faults == ["a genesis with the wrong conv"]
    else:
        assert faults == []


def test_independent_path_can_tell_a_wrong_record_apart() -> None:
    """The independent checks above are not vacuous: a one-field change moves every output."""
    case = CASES[0]
    unsigned = record_map(case["inputs"], mf_link)
    unsigned["seq"] += 1
    assert dag_cbor.encode(unsigned).hex() != case["unsigned_hex"]
    sig = bytes.fromhex(case["sig_hex"])
    with pytest.raises(nacl.exceptions.BadSignatureError):
        nacl.signing.VerifyKey(unsigned["actor"]).verify(DOMAIN + dag_cbor.encode(unsigned), sig)


# --- reject vectors ---------------------------------------------------------------------------


@by_name(BAD)
def test_decoding_rejects_with_the_named_error(case: dict[str, Any]) -> None:
    error = getattr(convgraph.errors, case["error"])
    claimed = CID.parse(case["claimed_cid"]) if "claimed_cid" in case else None
    with pytest.raises(ConvgraphError) as info:
        decode_record(bytes.fromhex(case["hex"]), expected_cid=claimed)
    assert type(info.value).__name__ == case["error"] and isinstance(info.value, error)


@by_name(BAD)
def test_reject_vector_is_what_it_says_to_an_independent_decoder(case: dict[str, Any]) -> None:
    """Bad encodings fail a generic strict DAG-CBOR decoder; the others are well-formed, and
    (where the fields allow a check) carry a signature that is valid unless the rule is it."""
    data = bytes.fromhex(case["hex"])
    if not case["well_formed_dag_cbor"]:
        with pytest.raises((CBORDecodingError, MultihashValueError)):
            dag_cbor.decode(data)
        return
    value = dag_cbor.decode(data)
    assert dag_cbor.encode(value) == data
    if not (type(value) is dict and type(value.get("sig")) is bytes and len(value["sig"]) == 64):
        return
    actor = value.get("actor")
    if not (type(actor) is bytes and len(actor) == 32):
        return
    sig = value.pop("sig")
    try:
        nacl.signing.VerifyKey(actor).verify(DOMAIN + dag_cbor.encode(value), sig)
        valid = True
    except nacl.exceptions.BadSignatureError:
        valid = False
    assert valid == (case["error"] != "SignatureError")


# The signature vectors whose signature satisfies [S]B = R + [k]A (points read leniently, S
# unreduced): only libsodium's encoding rules refuse them. OpenSSL checks S < L but not the rest.
ISOLATED_BY_STRICT_RULES = {
    "signature_small_order_key_identity": True, "signature_small_order_key_order_2": True,
    "signature_small_order_key_non_canonical": True, "signature_small_order_key_negative_x": True,
    "signature_small_order_r": True, "signature_s_not_reduced": False,
}


def _signature_parts(name: str) -> tuple[bytes, bytes, bytes]:
    """(actor, signing input, sig) of a signature reject vector, read by the independent decoder."""
    value = dag_cbor.decode(bytes.fromhex({c["name"]: c for c in BAD}[name]["hex"]))
    sig = value.pop("sig")
    return value["actor"], DOMAIN + dag_cbor.encode(value), sig


@pytest.mark.parametrize("name", sorted(ISOLATED_BY_STRICT_RULES))
def test_signature_vector_breaks_only_the_strict_rules(name: str) -> None:
    gen = _load_generator()
    actor, message, sig = _signature_parts(name)
    assert gen.ed_equation(actor, sig, message)
    try:
        Ed25519PublicKey.from_public_bytes(actor).verify(sig, message)
        openssl = True
    except InvalidSignature:
        openssl = False
    assert openssl == ISOLATED_BY_STRICT_RULES[name]  # OpenSSL would take it; we must not
    with pytest.raises(convgraph.errors.SignatureError):
        decode_record(bytes.fromhex({c["name"]: c for c in BAD}[name]["hex"]))


def test_cofactored_only_vector_pins_the_cofactorless_equation() -> None:
    gen = _load_generator()
    actor, message, sig = _signature_parts("signature_cofactored_only")
    assert actor.hex() == RECORDS["key"]["public_hex"]  # an honest key, signing with its secret
    assert gen.ed_equation(actor, sig, message, cofactor=8)
    assert not gen.ed_equation(actor, sig, message)


def _resigned(key: SigningKey, m: dict[str, Any]) -> bytes:
    """A record map signed as is, bypassing sign_record's checks."""
    return codec.encode({**m, "sig": key.sign(signing_bytes(m))})


def _content_for_size(key: SigningKey, size: int) -> dict[str, Any]:
    """An unsigned user_message map whose signed encoding is exactly `size` bytes."""
    base = {
        "conv": "big", "actor": key.public, "seq": 1, "hlc": [1, 0], "parents": [],
        "kind": "user_message", "payload": {"content": ""}, "refs": [],
    }
    overhead = len(_resigned(key, base)) - 1 + 5  # "" is 1 head byte; 65536..2**32-1 bytes take 5
    n = size - overhead
    assert n >= 65536
    return {**base, "payload": {"content": "x" * n}}


def test_record_of_exactly_one_mebibyte_is_accepted_one_byte_more_is_not(test_key: SigningKey) -> None:
    limit = DEFAULT_LIMITS.max_record_bytes
    at_limit = _resigned(test_key, _content_for_size(test_key, limit))
    assert len(at_limit) == limit == 1 << 20
    assert decode_record(at_limit).data == at_limit
    over = _resigned(test_key, _content_for_size(test_key, limit + 1))
    assert len(over) == limit + 1
    with pytest.raises(SizeLimitError) as info:
        decode_record(over)
    assert type(info.value) is SizeLimitError and (info.value.limit, info.value.got) == (limit, limit + 1)
    m = _content_for_size(test_key, limit + 1)
    with pytest.raises(SizeLimitError):
        sign_record(test_key, **{k: m[k] for k in ("conv", "seq", "parents", "kind", "payload")}, hlc=(1, 0))


@pytest.mark.parametrize("field", ["parents", "refs"])
def test_at_most_1024_parents_and_refs(field: str, test_key: SigningKey) -> None:
    links = sorted(CID.of_record(i.to_bytes(2, "big")) for i in range(1025))
    base = {
        "conv": "c", "actor": test_key.public, "seq": 1, "hlc": [1, 0], "parents": [],
        "kind": "user_message", "payload": {"content": "x"}, "refs": [],
    }
    ok = decode_record(_resigned(test_key, {**base, field: links[:1024]}))
    assert len(getattr(ok, field)) == 1024
    with pytest.raises(SizeLimitError) as info:
        decode_record(_resigned(test_key, {**base, field: links}))
    assert type(info.value) is SizeLimitError and info.value.got == 1025


# --- property: our bytes are dag_cbor's bytes -------------------------------------------------

digests = st.binary(min_size=32, max_size=32)
record_cids = digests.map(lambda d: CID(DAG_CBOR_SHA256 + d))
any_cids = record_cids | digests.map(lambda d: CID(RAW_SHA256 + d))
cid_shaped = digests.map(lambda d: DAG_CBOR_SHA256 + d)  # 36 bytes that parse as a CID
byte_values = st.binary(max_size=48) | cid_shaped | cid_shaped.map(lambda b: b"\x00" + b)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | byte_values
    | any_cids
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=16,
)
names = st.text(min_size=1, max_size=40).filter(lambda s: len(s.encode()) <= 256)


def to_mf(value: Any) -> Any:
    if isinstance(value, CID):
        return MfCID.decode(bytes(value))
    if type(value) is dict:
        return {k: to_mf(v) for k, v in value.items()}
    if type(value) is list:
        return [to_mf(v) for v in value]
    return value


def _without_sig(rec: Any) -> dict[str, Any]:
    m = rec.to_map()
    del m["sig"]
    return m


def byte_leaves(value: Any) -> list[bytes]:
    """Every byte string inside `value` (not CIDs), in a fixed walk order."""
    if type(value) is bytes:
        return [value]
    if type(value) is dict:
        return [b for k in sorted(value) for b in byte_leaves(value[k])]
    if type(value) is list:
        return [b for v in value for b in byte_leaves(v)]
    return []


@given(
    seed=digests,
    conv=names,
    seq=st.integers(min_value=1, max_value=MAX_SEQ),
    wall=st.integers(min_value=0, max_value=MAX_WALL_MS),
    counter=st.integers(min_value=0, max_value=MAX_COUNTER),
    parents=st.lists(record_cids, max_size=4),
    refs=st.lists(any_cids, max_size=4),
    branch=st.none() | names,
    blob=byte_values,
    meta=st.dictionaries(st.text(max_size=6), values, max_size=5),
)
def test_record_bytes_equal_dag_cbor_bytes_and_bytes_stay_bytes(
    seed: bytes, conv: str, seq: int, wall: int, counter: int, parents: list[CID],
    refs: list[CID], branch: str | None, blob: bytes, meta: dict[str, Any],
) -> None:
    rec = sign_record(
        SigningKey(seed), conv=conv, seq=seq, hlc=(wall, counter), parents=parents,
        kind="user_message", payload={"content": "x", "meta": {**meta, "blob": blob}}, refs=refs,
        branch=branch,
    )
    # The independent side builds the map from the inputs, not from the record.
    actor = nacl.signing.SigningKey(seed).verify_key.encode()
    unsigned: dict[str, Any] = {
        "conv": conv, "actor": actor, "seq": seq, "hlc": [wall, counter],
        "parents": [MfCID.decode(b) for b in sorted({bytes(p) for p in parents})],
        "kind": "user_message", "payload": to_mf({"content": "x", "meta": {**meta, "blob": blob}}),
        "refs": [MfCID.decode(b) for b in sorted({bytes(r) for r in refs})],
    }
    if branch is not None:
        unsigned["branch"] = branch
    signing_input = DOMAIN + dag_cbor.encode(unsigned)
    nacl.signing.VerifyKey(actor).verify(signing_input, rec.sig)
    assert signing_bytes(_without_sig(rec)) == signing_input
    theirs = dag_cbor.encode({**unsigned, "sig": rec.sig})
    assert rec.data == theirs
    assert bytes(rec.cid) == DAG_CBOR_SHA256 + hashlib.sha256(theirs).digest()
    assert str(rec.cid) == independent_cid_text(theirs)
    ours_back, theirs_back = codec.decode(rec.data), dag_cbor.decode(rec.data)
    assert typed(ours_back) == typed(theirs_back) == typed({**unsigned, "sig": rec.sig})
    for back in (ours_back, theirs_back, decode_record(rec.data).to_map()):
        assert type(back["actor"]) is bytes and type(back["sig"]) is bytes
        assert type(back["payload"]["meta"]["blob"]) is bytes
        assert byte_leaves(back["payload"]) == byte_leaves({"content": "x", "meta": {**meta, "blob": blob}})



def test_canonical_rules_hold_in_the_golden_bytes() -> None:
    """Spot checks of the rules the spec states, read straight from the golden bytes."""
    cases = {c["name"]: c for c in CASES}
    keys_case = bytes.fromhex(cases["length_first_key_sort"]["record_hex"])
    assert re.search(
        rb"\x60\x07\x61a\x01\x61c\x04\x62aa\x03\x62bb\x02\x62zz\x06\x62\xc3\xa9\x05", keys_case
    )
    floats = bytes.fromhex(cases["float_payload"]["record_hex"])
    assert b"\x63one\xfb\x3f\xf0" + bytes(6) in floats and b"\xfb\x80" + bytes(7) in floats
    looks = bytes.fromhex(cases["bytes_that_look_like_cids"]["record_hex"])
    genesis = CID.parse(cases["genesis_user_message"]["cid"])
    assert b"\x58\x24" + bytes(genesis) in looks  # bytes(36), not a link
    assert b"\x58\x25\x00" + bytes(genesis) in looks  # bytes(37) holding the tag-42 content
    assert b"\xd8\x2a\x58\x25\x00" + bytes(genesis) in looks  # the real link
