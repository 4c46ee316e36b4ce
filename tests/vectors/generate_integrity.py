"""Generate the witnessed-history vectors (`integrity.json`): statements, refusals, checkpoints,
cosignatures and a bundle of every finding kind that proves and one that does not.

Run by hand from the repository root after a deliberate change to docs/integrity.md or
docs/format.md §16:

    .venv/bin/python tests/vectors/generate_integrity.py           # rewrite integrity.json
    .venv/bin/python tests/vectors/generate_integrity.py --check   # exit 1 if it would change

Every input is fixed (keys from fixed seeds, Ed25519 signatures are deterministic), so the
output is byte-identical unless the formats changed. `tests/integrity/test_integrity_vectors.py`
checks each vector against the decoder and the verifier. `DESCRIPTION` says what each part
means, so an implementation in another language can be tested against the file alone.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import SIGNING_DOMAIN, Record, sign_record
from convgraph.integrity import note as signed_note
from convgraph.integrity.builders import (
    divergent_fork_finding,
    record_equivocation_finding,
    self_inconsistent_finding,
    statements_finding,
    unverifiable_checkpoint_finding,
)
from convgraph.integrity.checkpoints import causal_past
from convgraph.integrity.cosignature import Cosignature, cosign_checkpoint
from convgraph.integrity.evidence import encode_bundle
from convgraph.integrity.findings import Finding
from convgraph.integrity.note import checkpoint_body
from convgraph.integrity.statement import STATEMENT_DOMAIN, Statement, sign_statement
from convgraph.projections import state as state_

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path
import integrity_artifacts
import writer

HERE = Path(__file__).resolve().parent
INTEGRITY_FILE = HERE / "integrity.json"
SERVER = SigningKey(bytes(range(32)))
ALICE = SigningKey(bytes([7]) * 32)
BOB = SigningKey(bytes([9]) * 32)
WITNESS = SigningKey(bytes([11]) * 32)
CONV = "c"
T = 1_700_000_000_000

DESCRIPTION = [
    "Witnessed-history vectors for docs/integrity.md (statements, §2) and evidence bundles",
    "(docs/format.md §16, docs/integrity.md §6). Binary values are lower-case hex; CIDs are text.",
    "keys: the Ed25519 seeds of the signers (the statement signer is `server`).",
    "records[]: {name, cid, hex}: valid records of conversation \"c\" used by the statements and bundles.",
    "  a1 <- b1 <- a2 <- b2 <- a3 is a chain (a* by alice, b* by bob); f (bob, seq 2, like b2) is a",
    "  child of a2: a fork of the chain and a record equivocation with b2. Each record also names its",
    "  author's previous one (docs/format.md §11.2): a2 names b1 and a1, b2 a2 and b1, a3 b2 and a2,",
    "  f a2 and b1; so every record ingests, in any order, on any replica (f and b2 as an equivocation).",
    "  cp_* are checkpoints (docs/integrity.md §7): cp_b2, cp_f, cp_a3, cp_count, cp_heads, cp_snapshot,",
    "  cp_heads_count by `server`, in one chain of seq 1 to 7, each naming the one before as parent (cp_b2",
    "  names a3 and f; cp_f and cp_a3 also name it as `previous`); cp_alice_f by alice at seq 4, parents",
    "  a3 and f. cp_b2, cp_f, cp_a3 and cp_alice_f are true",
    "  (heads [b2], [f], [a3], [f]); cp_count claims count 5 at [b2]; cp_heads has heads [a2, b2], a2 an",
    "  ancestor of b2; cp_snapshot names the CID of a1 as snapshot at [b2]; cp_heads_count has heads",
    "  [a2, b2] and count 7 (its heads fail first).",
    "cosignatures[]: {name, checkpoint, body, witness_name, key, time, sig, line}: the `witness` seed's",
    "  C2SP cosignature/v1 (docs/integrity.md §8) of checkpoint `checkpoint` (a record name): `body` is",
    "  the note body it signs, `time` POSIX seconds, `sig` the 64-byte Ed25519 signature, `line` the",
    "  signature line. The map form a divergent_fork bundle lists (§7.5) is {checkpoint, name, key,",
    "  time, sig}, with `name` = witness_name.",
    "statements[]: {name, note, statement, hex, cid, heads_digest}: decoding `hex` gives `statement`",
    "  (key and sig in hex, heads and stored as CID text, `stored` only when present), and signing",
    "  `statement` without its sig with the seed of `server` gives `hex` exactly.",
    "statement_refusals[]: {name, note, hex, reason}: decoding refuses with StatementError `reason`",
    "  (decode, schema or signature).",
    "bundles[]: {name, note, kind, hex, id, result}: `result` is `proves` (verify-evidence exits 0),",
    "  `does_not_prove` (exits 1) or `not_a_bundle` (exits 2); `id` is the CID of `hex` (the finding id)",
    "  when the bytes are a bundle. Every bundle that proves is the one the replica's builder makes from",
    "  its statements (or records) and these records: the canonical form of docs/integrity.md §10.",
    "  divergent_fork and unverifiable_checkpoint bundles name records by",
    "  link (claim a, b or checkpoint); a divergent_fork by a witness carries `cosignatures`.",
    *integrity_artifacts.DESCRIPTION,
    "notes[]: {name, note, text, known, result, verified}: a C2SP signed note (docs/integrity.md §8), the",
    "  keys a verifier knows ({name, key, type}: 1 Ed25519, 4 cosignature/v1) and what verifying gives:",
    "  `verified` with the names of the lines that verified, or the NoteError reason.",
    "The bundles after the artifact ones pin rules an implementer had to guess (§2.4 step 3, §6.3, §7.5);",
    "  the two named noncanonical_* prove without being in the canonical form.",
]


def _record(key: SigningKey, seq: int, wall: int, *parents: Record) -> Record:
    return sign_record(key, conv=CONV, seq=seq, hlc=Hlc(wall, 0), parents=[p.cid for p in parents],
                       kind="user_message", payload={"content": f"turn {seq} at {wall}"})


def _records() -> dict[str, Record]:
    a1 = _record(ALICE, 1, T + 1)
    b1 = _record(BOB, 1, T + 2, a1)
    # each names its author's previous record too (docs/format.md §11.2): every one ingests
    a2 = _record(ALICE, 2, T + 3, b1, a1)
    b2 = _record(BOB, 2, T + 4, a2, b1)
    a3 = _record(ALICE, 3, T + 5, b2, a2)
    f = _record(BOB, 2, T + 6, a2, b1)
    turns = {"a1": a1, "b1": b1, "a2": a2, "b2": b2, "a3": a3, "f": f}
    return {**turns, **_checkpoints(turns)}


def _true(turns: dict[str, Record], *heads: str) -> dict[str, Any]:
    """The payload of a true checkpoint at `heads`: its causal past's count and fold's snapshot."""
    held = {x.cid: x for x in turns.values()}
    past = causal_past([turns[h].cid for h in heads], lambda c: (held[c].hlc, held[c].parents) if c in held
                       else None).held
    folded = state_.ConvState()
    for cid in sorted(past):
        state_.apply(folded, state_.entry_from_bytes(cid, held[cid].data))
    return {"heads": sorted(turns[h].cid for h in heads), "count": len(past),
            "snapshot": state_.snapshot_cid(state_.snapshot(folded))}


def _checkpoints(turns: dict[str, Record]) -> dict[str, Record]:
    """The server's chain of seven checkpoints (the first three true, chained by `previous`),
    and alice's true checkpoint of the fork."""
    at_b2 = _true(turns, "b2")
    payloads = [
        ("cp_b2", at_b2),
        ("cp_f", _true(turns, "f")),
        ("cp_a3", _true(turns, "a3")),
        ("cp_count", {**at_b2, "count": 5}),
        ("cp_heads", {**at_b2, "heads": sorted([turns["a2"].cid, turns["b2"].cid])}),
        ("cp_snapshot", {**at_b2, "snapshot": turns["a1"].cid}),
        ("cp_heads_count", {**at_b2, "heads": sorted([turns["a2"].cid, turns["b2"].cid]), "count": 7}),
    ]
    tips = sorted([turns["a3"].cid, turns["f"].cid])
    out: dict[str, Record] = {}
    previous: Record | None = None
    for seq, (name, claim) in enumerate(payloads, start=1):
        chained = {**claim, "previous": previous.cid} if previous is not None and seq <= 3 else claim
        previous = out[name] = sign_record(
            SERVER, conv=CONV, seq=seq, hlc=Hlc(T + 10 + seq, 0), kind="checkpoint", payload=chained,
            parents=[previous.cid] if previous is not None else tips)
    out["cp_alice_f"] = sign_record(ALICE, conv=CONV, seq=4, hlc=Hlc(T + 20, 0), parents=tips, kind="checkpoint",
                                    payload=_true(turns, "f"))
    return out


def _state(members: list[Record], time_ms: int, stored: list[Record] | None = None) -> Statement:
    named = {p for r in members for p in r.parents}
    return sign_statement(SERVER, CONV, len(members), [r.cid for r in members if r.cid not in named], time_ms,
                          stored=[r.cid for r in stored or []])


def statement_json(s: Statement) -> dict[str, Any]:
    out: dict[str, Any] = {"v": 1, "conv": s.conv, "count": s.count, "heads": [str(c) for c in s.heads],
                           "key": s.key.hex(), "time": s.time_ms}
    if s.stored:
        out["stored"] = [str(c) for c in s.stored]
    out["sig"] = s.sig.hex()
    return out


def _statements(r: dict[str, Record]) -> list[tuple[str, str, Statement]]:
    chain = [r["a1"], r["b1"], r["a2"], r["b2"]]
    return [
        ("empty", "count 0: no heads", sign_statement(SERVER, CONV, 0, [], T)),
        ("one_head", "a state of four records with one head", _state(chain, T)),
        ("two_heads", "a state with the fork: heads b2 and f, sorted by CID bytes",
         _state([*chain, r["f"]], T)),
        ("receipt", "a receipt: `stored` names the records this reply stored", _state(chain, T, [r["a2"], r["b2"]])),
        ("time_bounds", "time 0 and count 2^53 - 1 are in range", sign_statement(SERVER, CONV, 2**53 - 1,
                                                                                  [r["a1"].cid], 0)),
        ("long_conv", "a conversation name of 256 UTF-8 bytes (128 two-byte characters)",
         sign_statement(SERVER, "é" * 128, 1, [r["a1"].cid], T)),
    ]


def _sign_map(m: dict[str, Any], domain: bytes = STATEMENT_DOMAIN) -> bytes:
    unsigned = {k: v for k, v in m.items() if k != "sig"}
    return codec.encode({**unsigned, "sig": SERVER.sign(domain + codec.encode(unsigned))})


_LINK = b"\xd8\x2a\x58\x25\x00\x01\x71\x12\x20"  # tag 42, 37 bytes: 00, CIDv1 dag-cbor sha2-256 of 32


def _refusals(r: dict[str, Record]) -> list[tuple[str, str, bytes, str]]:
    good = _state([r["a1"], r["b1"], r["a2"], r["b2"]], T, [r["b2"]])
    base = codec.decode(good.data)
    heads2 = sorted([r["b2"].cid, r["f"].cid])
    flipped = bytearray(good.data)
    flipped[-1] ^= 1
    return [
        ("not_cbor", "trailing bytes after the map", good.data + b"\x00", "decode"),
        ("non_canonical", "count 4 encoded in two bytes", good.data.replace(b"ecount\x04", b"ecount\x18\x04"),
         "decode"),
        ("not_a_map", "a list", codec.encode([1]), "schema"),
        ("extra_key", "a key §2.1 does not list", _sign_map({**base, "note": "hi"}), "schema"),
        ("missing_time", "`time` is required", _sign_map({k: v for k, v in base.items() if k != "time"}), "schema"),
        ("version_2", "v must be 1", _sign_map({**base, "v": 2}), "schema"),
        ("count_too_big", "count must be below 2^53", _sign_map({**base, "count": 2**53}), "schema"),
        ("empty_conv", "conv must be 1 to 256 bytes", _sign_map({**base, "conv": ""}), "schema"),
        ("heads_without_count", "heads must be empty exactly when count is 0", _sign_map({**base, "count": 0}),
         "schema"),
        ("unsorted_heads", "heads sorted by CID bytes", _sign_map({**base, "heads": heads2[::-1]}), "schema"),
        ("duplicate_heads", "no head twice", _sign_map({**base, "heads": [heads2[0], heads2[0]]}), "schema"),
        ("empty_stored", "`stored` is absent when there are none", _sign_map({**base, "stored": []}), "schema"),
        ("raw_link", "heads are dag-cbor CIDs", _sign_map({**base, "heads": [CID.of_raw(b"x")]}), "schema"),
        ("short_key", "key is 32 bytes", _sign_map({**base, "key": bytes(31)}), "schema"),
        ("bad_signature", "the last signature byte flipped", bytes(flipped), "signature"),
        ("record_domain", "signed under the record domain, not the statement one",
         _sign_map(base, SIGNING_DOMAIN), "signature"),
        ("dag_pb_link", "a head whose CID names codec dag-pb (0x70): not a link form docs/format.md §2.5 allows, "
         "so the bytes do not decode (a raw-codec link decodes and is refused by §2.1: `raw_link`)",
         good.data.replace(_LINK, _LINK[:6] + b"\x70" + _LINK[7:], 1), "decode"),
    ]


def _bundle(kind: str, statements: list[Statement], records: list[Record], claim: dict[str, Any]) -> bytes:
    return encode_bundle(kind, CONV, [s.data for s in statements], [x.data for x in records], claim)


def _bundles(r: dict[str, Record]) -> list[tuple[str, str, str, bytes, str]]:
    chain = [r["a1"], r["b1"], r["a2"], r["b2"]]
    fork = [r["a1"], r["b1"], r["a2"], r["f"]]
    pair = {"earlier": 0, "later": 1}
    later = T + 5_000
    held = {x.cid: x.data for x in r.values()}

    def built(finding: Finding | None) -> bytes:
        assert finding is not None  # the builder proves what these records show
        return finding.bundle

    def about(kind: str, earlier: Statement, then: Statement) -> bytes:
        return built(statements_finding(kind, earlier, then, held.get, 0))

    receipt = _state(chain, T, [r["b2"]])
    proving = [
        ("rollback_count", "the later statement holds fewer records: no record is needed", "rollback",
         about("rollback", _state(chain, T), _state(chain[:2], later))),
        ("rollback_fork", "same count, but the later heads do not cover b2", "rollback",
         about("rollback", _state(chain, T), _state(fork, later))),
        ("deletion", "b2 was receipted, the later state lacks it", "deletion",
         about("deletion", receipt, _state(fork, later))),
        ("withholding_pair", "as deletion (§4 step 5 after a receipt)", "withholding",
         about("withholding", receipt, _state(fork, later))),
        ("withholding_self", "a receipt names f, which its own heads (b2) do not cover: the walk from b2 "
         "down to f's hlc reaches nothing below it, so the region is {b2, f}", "withholding",
         built(self_inconsistent_finding(_state(chain, T, [r["f"]]), held.get, 0))),
        ("server_equivocation", "two statements 500 ms apart, neither extends the other", "server_equivocation",
         about("server_equivocation", _state(chain, T), _state(fork, T + 500))),
        ("record_equivocation", "bob signed b2 and f, both at seq 2", "record_equivocation",
         record_equivocation_finding(r["b2"].data, r["f"].data, 0).bundle),
    ]
    walked = set(codec.decode(proving[1][3])["records"])  # what rollback_fork's walk reaches
    walk_records = [x for x in r.values() if x.data in walked]
    tampered_statement = codec.decode(proving[1][3])
    tampered_statement["statements"][1] = tampered_statement["statements"][1][:-1] + b"\x00"
    tampered_record = codec.decode(proving[1][3])
    tampered_record["records"][0] = tampered_record["records"][0].replace(b"turn", b"tUrn")
    not_proving = [
        ("rollback_within_slack", "the later statement is exactly ORDER_SLACK_MS after: not later", "rollback",
         _bundle("rollback", [_state(chain, T), _state(chain[:2], T + 1_000)], [], pair)),
        ("rollback_missing_walk_record", "a2, which the walk reaches, is not in the bundle: undecided",
         "rollback", _bundle("rollback", [_state(chain, T), _state(fork, later)],
                             [x for x in walk_records if x is not r["a2"]], pair)),
        ("deletion_without_receipt", "b2 is missing later but no statement named it as stored", "deletion",
         _bundle("deletion", [_state(chain, T), _state(fork, later)], walk_records, pair)),
        ("honest_successor", "the later statement extends the earlier one", "server_equivocation",
         _bundle("server_equivocation", [receipt, _state([*chain, r["a3"]], later)], [], pair)),
        ("tampered_statement", "the later statement's signature altered", "rollback",
         codec.encode(tampered_statement)),
        ("tampered_record", "a record's payload altered: its signature fails", "rollback",
         codec.encode(tampered_record)),
        ("two_keys", "the statements are by two keys", "rollback",
         _bundle("rollback", [_state(chain, T), sign_statement(ALICE, CONV, 1, [r["a1"].cid], later)], [], pair)),
    ]
    good = codec.decode(proving[0][3])
    not_bundles = [
        ("wrong_type", "type must be convgraph/evidence", "", codec.encode({**good, "type": "evidence"})),
        ("unknown_kind", "kind not one of §6.1", "", codec.encode({**good, "kind": "lie"})),
        ("claim_shape", "a rollback claim needs earlier and later", "", codec.encode({**good, "claim": {}})),
        ("extra_key", "a key §16 does not list", "", codec.encode({**good, "note": ""})),
        ("trailing_byte", "one byte after the map", "", proving[0][3] + b"\x00"),
    ]
    return ([(n, note, kind, data, "proves") for n, note, kind, data in proving]
            + [(n, note, kind, data, "does_not_prove") for n, note, kind, data in not_proving]
            + [(n, note, kind, data, "not_a_bundle") for n, note, kind, data in not_bundles])


def _cosignatures(r: dict[str, Record]) -> dict[str, Cosignature]:
    return {f"witness_{n}": cosign_checkpoint(WITNESS, r[n], T // 1000 + i) for i, n in enumerate(["cp_b2",
                                                                                                  "cp_alice_f"])}


def _flip_last(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


def _added_bundles(r: dict[str, Record]) -> list[tuple[str, str, str, bytes, str]]:
    """The vectors of the two kinds of §7.5, and the two kinds whose claims had no vector that
    does not prove; after the first ones, so that their positions stay."""
    held = {x.cid: x.data for x in r.values()}

    def built(finding: Finding | None) -> bytes:
        assert finding is not None  # the builder proves what the store holds
        return finding.bundle

    def cp_bundle(kind: str, names: list[str], claim: dict[str, Any], **extra: Any) -> bytes:
        return encode_bundle(kind, CONV, [], [r[n].data for n in names], claim, **extra)

    def fork(a: str, b: str, cosigned: bool = False) -> bytes:
        signed = list(_cosignatures(r).values()) if cosigned else []
        return built(divergent_fork_finding(r[a].cid, r[b].cid, CONV, held.get, 0, cosignatures=signed))

    def false(name: str) -> bytes:
        return built(unverifiable_checkpoint_finding(r[name].cid, CONV, held.get, 0))

    def links(a: str, b: str) -> dict[str, CID]:
        first, second = sorted([r[a].cid, r[b].cid], key=bytes)
        return {"a": first, "b": second}

    past4 = ["a1", "b1", "a2", "b2"]
    cos = _cosignatures(r)
    bad_sig = {**cos["witness_cp_b2"].to_map(), "sig": _flip_last(cos["witness_cp_b2"].sig)}
    sig = r["cp_count"].sig  # flipped inside the record's bytes
    bad_record = r["cp_count"].data.replace(sig, _flip_last(sig))
    proving = [
        ("divergent_fork", "server checkpoints cp_b2 and cp_f: neither covers the other's head", "divergent_fork",
         fork("cp_b2", "cp_f")),
        ("divergent_fork_witness", "cp_b2 (server) and cp_alice_f (alice), both cosigned by the witness",
         "divergent_fork", fork("cp_b2", "cp_alice_f", cosigned=True)),
        ("unverifiable_checkpoint_count", "cp_count: its heads cover 4 records, it claims 5",
         "unverifiable_checkpoint", false("cp_count")),
        ("unverifiable_checkpoint_heads", "cp_heads: head a2 is an ancestor of head b2", "unverifiable_checkpoint",
         false("cp_heads")),
        ("unverifiable_checkpoint_snapshot", "cp_snapshot: the fold of its 4 records is not snapshot a1",
         "unverifiable_checkpoint", false("cp_snapshot")),
        ("unverifiable_checkpoint_heads_first", "cp_heads_count fails heads and count: heads is the claim",
         "unverifiable_checkpoint", false("cp_heads_count")),
    ]
    in_fork = set(codec.decode(proving[0][3])["records"])
    fork_records = [n for n, x in r.items() if x.data in in_fork]  # what the two walks reach
    in_witnessed = set(codec.decode(proving[1][3])["records"])
    witnessed_records = [n for n, x in r.items() if x.data in in_witnessed]  # cp_b2 and cp_alice_f's walks
    not_proving = [
        ("divergent_fork_successor", "cp_a3 extends cp_b2 (count 5 >= 4, b2 covered by a3)", "divergent_fork",
         cp_bundle("divergent_fork", ["cp_b2", "cp_a3", "b2", "a3"], links("cp_b2", "cp_a3"))),
        ("divergent_fork_missing_walk_record", "a2, which the walk from f reaches, is not in the bundle",
         "divergent_fork", cp_bundle("divergent_fork", [n for n in fork_records if n != "a2"],
                                     links("cp_b2", "cp_f"))),
        ("divergent_fork_one_checkpoint", "a and b name the same checkpoint", "divergent_fork",
         cp_bundle("divergent_fork", fork_records, {"a": r["cp_b2"].cid, "b": r["cp_b2"].cid})),
        ("divergent_fork_two_authors", "cp_b2 and cp_alice_f have two authors and no cosignatures",
         "divergent_fork", cp_bundle("divergent_fork", witnessed_records,
                                     links("cp_b2", "cp_alice_f"))),
        ("divergent_fork_one_cosignature", "the witness cosigned only cp_alice_f", "divergent_fork",
         cp_bundle("divergent_fork", witnessed_records, links("cp_b2", "cp_alice_f"),
                   cosignatures=[cos["witness_cp_alice_f"].to_map()])),
        ("divergent_fork_bad_cosignature", "the cosignature of cp_b2 has its last signature byte flipped",
         "divergent_fork", cp_bundle("divergent_fork", witnessed_records,
                                     links("cp_b2", "cp_alice_f"),
                                     cosignatures=[bad_sig, cos["witness_cp_alice_f"].to_map()])),
        ("unverifiable_checkpoint_true", "cp_b2 is true: check count holds", "unverifiable_checkpoint",
         cp_bundle("unverifiable_checkpoint", ["cp_b2", *past4], {"checkpoint": r["cp_b2"].cid, "check": "count"})),
        ("unverifiable_checkpoint_not_first", "cp_heads_count fails count, but heads fails first",
         "unverifiable_checkpoint", cp_bundle("unverifiable_checkpoint", ["cp_heads_count", *past4],
                                              {"checkpoint": r["cp_heads_count"].cid, "check": "count"})),
        ("unverifiable_checkpoint_wrong_check", "cp_count's heads are right: check heads holds",
         "unverifiable_checkpoint", cp_bundle("unverifiable_checkpoint", ["cp_count", *past4],
                                              {"checkpoint": r["cp_count"].cid, "check": "heads"})),
        ("unverifiable_checkpoint_missing_record", "a1, in the causal past of cp_count's heads, is left out",
         "unverifiable_checkpoint", cp_bundle("unverifiable_checkpoint", ["cp_count", *past4[1:]],
                                              {"checkpoint": r["cp_count"].cid, "check": "count"})),
        ("unverifiable_checkpoint_not_a_checkpoint", "the claim names b2, a user_message",
         "unverifiable_checkpoint", cp_bundle("unverifiable_checkpoint", past4,
                                              {"checkpoint": r["b2"].cid, "check": "count"})),
        ("withholding_self_covered", "a receipt names b2, which its own heads hold", "withholding",
         _bundle("withholding", [_state([r["a1"], r["b1"], r["a2"], r["b2"]], T, [r["b2"]])], [],
                 {"earlier": 0, "later": 0})),
        ("record_equivocation_two_seqs", "bob signed b1 and b2 at seqs 1 and 2: no equivocation",
         "record_equivocation", _bundle("record_equivocation", [], [r["b1"], r["b2"]], {})),
        ("unverifiable_checkpoint_tampered", "cp_count's signature altered: the record does not verify",
         "unverifiable_checkpoint", encode_bundle("unverifiable_checkpoint", CONV, [],
                                                  [bad_record, *(r[n].data for n in past4)],
                                                  {"checkpoint": r["cp_count"].cid, "check": "count"})),
    ]
    count = codec.decode(proving[2][3])
    fork_map = codec.decode(proving[0][3])
    not_bundles = [
        ("check_unknown", "check must be heads, count or snapshot", "",
         codec.encode({**count, "claim": {**count["claim"], "check": "size"}})),
        ("check_missing", "an unverifiable_checkpoint claim has the key check", "",
         codec.encode({**count, "claim": {"checkpoint": count["claim"]["checkpoint"]}})),
        ("cosignatures_wrong_kind", "cosignatures belong to divergent_fork only", "",
         codec.encode({**count, "cosignatures": []})),
        ("fork_claim_indices", "a divergent_fork claim holds links, not statement indices", "",
         codec.encode({**fork_map, "claim": {"a": 0, "b": 1}})),
    ]
    return ([(n, note, kind, data, "proves") for n, note, kind, data in proving]
            + [(n, note, kind, data, "does_not_prove") for n, note, kind, data in not_proving]
            + [(n, note, kind, data, "not_a_bundle") for n, note, kind, data in not_bundles])


def _guessed_bundles(r: dict[str, Record]) -> list[tuple[str, str, str, bytes, str]]:
    """Bundles that pin what an outside implementer had to guess (issue 30): after every other
    bundle, so that the positions of those stay."""
    held = {x.cid: x.data for x in r.values()}
    chain = [r["a1"], r["b1"], r["a2"], r["b2"]]
    later = T + 5_000
    # y and z break docs/format.md §11.2's clock order (z's parent y has the greater hlc): only
    # in this bundle, never in `records`, since no replica ingests them
    y = sign_record(ALICE, conv=CONV, seq=5, hlc=Hlc(T + 50, 0), parents=[r["a1"].cid], kind="user_message",
                    payload={"content": "y, clocked after its child"})
    z = sign_record(BOB, conv=CONV, seq=5, hlc=Hlc(T + 40, 0), parents=[y.cid], kind="user_message",
                    payload={"content": "z, clocked before its parent"})
    broken = encode_bundle("rollback", CONV, [_state(chain, T).data,
                                             sign_statement(SERVER, CONV, 4, [z.cid], later).data],
                           [r["a1"].data, r["b2"].data, y.data, z.data], {"earlier": 0, "later": 1})
    witnessed = codec.decode(next(d for n, _, _, d, _ in _added_bundles(r) if n == "divergent_fork_witness"))
    stray = cosign_checkpoint(WITNESS, r["cp_f"], T // 1000 + 9).to_map()  # valid, of a checkpoint not held
    bad = {**stray, "checkpoint": r["cp_b2"].cid}  # well-formed, names cp_b2, does not verify against it
    rollback_fork = codec.decode(next(d for n, _, _, d, _ in _bundles(r) if n == "rollback_fork"))
    elsewhere = sign_statement(ALICE, "d", 1, [r["a1"].cid], T).data  # another key, another conversation
    return [
        ("rollback_past_broken_order", "the later heads [z] reach y, whose hlc is not below z's: y is reached "
         "and expanded (§2.4 step 3) and is a gap, so b2 (not reached) is undecided, not missing: no rollback",
         "rollback", broken, "does_not_prove"),
        ("divergent_fork_extra_bad_cosignature", "divergent_fork_witness plus a third, well-formed cosignature "
         "that does not verify against the checkpoint it names: every listed one must verify (§7.5)",
         "divergent_fork", codec.encode({**witnessed, "cosignatures": [*witnessed["cosignatures"], bad]}),
         "does_not_prove"),
        ("divergent_fork_cosignature_not_held", "divergent_fork_witness plus a valid cosignature of cp_f, "
         "which is not in `records`: every listed one must name a checkpoint of the bundle (§7.5)",
         "divergent_fork", codec.encode({**witnessed, "cosignatures": [*witnessed["cosignatures"], stray]}),
         "does_not_prove"),
        ("noncanonical_extra_statement", "rollback_fork plus a third statement, by alice about conversation d: "
         "extra statements must verify, not be about `conv` or by the claimed key (§6.3)",
         "rollback", codec.encode({**rollback_fork, "statements": [*rollback_fork["statements"], elsewhere]}),
         "proves"),
        ("noncanonical_extra_record", "rollback_fork plus a3, a record the walk does not need (§6.3)",
         "rollback", codec.encode({**rollback_fork, "records": sorted([*rollback_fork["records"], held[r["a3"].cid]],
                                                                    key=lambda b: bytes(CID.of_record(b)))}),
         "proves"),
    ]


def _notes(r: dict[str, Record]) -> list[dict[str, Any]]:
    """Signed notes of §8 with the keys a verifier knows, and what it makes of them."""
    body = checkpoint_body(r["cp_b2"]).text
    named = signed_note.witness_key_name(WITNESS.public)
    line = signed_note.cosign(WITNESS, named, body, T // 1000).line
    other = signed_note.cosign(WITNESS, "other/witness", body, T // 1000).line
    strangers = [f"\u2014 stranger/{i} {base64.b64encode(bytes(4 + 64)).decode()}\n" for i in range(100)]
    known = [{"name": named, "key": WITNESS.public.hex(), "type": signed_note.COSIGNATURE_V1}]
    return [
        {"name": "hundred_signature_lines", "note": "100 signature lines (the limit counts the lines after the "
         "empty one; the body's do not count): one by the known witness, 99 by unknown keys, ignored",
         "text": body + "\n" + line + "".join(strangers[:99]), "known": known, "result": "verified",
         "verified": [named]},
        {"name": "hundred_and_one_signature_lines", "note": "101 signature lines: refused before any is checked",
         "text": body + "\n" + line + "".join(strangers), "known": known, "result": "format", "verified": []},
        {"name": "witness_under_another_name", "note": "the known witness's key signs under another key name: "
         "a line counts only when its name and key ID both match a known key, so it is ignored",
         "text": body + "\n" + other, "known": known, "result": "untrusted", "verified": []},
    ]


def _cosignature_json(r: dict[str, Record]) -> list[dict[str, Any]]:
    names = {x.cid: n for n, x in r.items()}
    return [{"name": n, "checkpoint": names[c.checkpoint], "body": checkpoint_body(r[names[c.checkpoint]]).text,
             "witness_name": c.name, "key": c.key.hex(), "time": c.time, "sig": c.sig.hex(),
             "line": c.line().line} for n, c in _cosignatures(r).items()]


def build() -> dict[str, Any]:
    turns = _records()
    r = {**turns, **integrity_artifacts.records(turns["cp_alice_f"])}
    return {
        "description": DESCRIPTION,
        "keys": {"server": SERVER.seed.hex(), "alice": ALICE.seed.hex(), "bob": BOB.seed.hex(),
                 "witness": WITNESS.seed.hex()},
        "records": [{"name": n, "cid": str(x.cid), "hex": x.data.hex()} for n, x in r.items()],
        "statements": [{"name": n, "note": note, "statement": statement_json(s), "hex": s.data.hex(),
                        "cid": str(s.cid), "heads_digest": s.heads_digest.hex()}
                       for n, note, s in _statements(r)],
        "statement_refusals": [{"name": n, "note": note, "hex": data.hex(), "reason": reason}
                               for n, note, data, reason in _refusals(r)],
        "bundles": [{"name": n, "note": note, "kind": kind, "hex": data.hex(),
                     "id": "" if result == "not_a_bundle" else str(CID.of_record(data)), "result": result}
                    for n, note, kind, data, result in [*_bundles(r), *_added_bundles(r),
                                                         *integrity_artifacts.bundles(r), *_guessed_bundles(r)]],
        "cosignatures": _cosignature_json(r),
        "artifacts": integrity_artifacts.artifacts_json(),
        "notes": _notes(r),
    }


render = writer.render  # the tests compare render(build()) with the committed file


def main(argv: list[str] | None = None) -> int:
    return writer.main(__doc__, build, INTEGRITY_FILE, "generate_integrity.py", argv)


if __name__ == "__main__":
    sys.exit(main())
