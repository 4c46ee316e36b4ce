"""Generate the sync wire vectors (`sync.json`): messages of each kind and edge, and refusals.

Run by hand from the repository root after a deliberate change to docs/sync.md's grammar:

    .venv/bin/python tests/vectors/generate_sync.py           # rewrite sync.json
    .venv/bin/python tests/vectors/generate_sync.py --check   # exit 1 if it would change

Every input is fixed, so the output is byte-identical unless the grammar changed;
`tests/sync/test_sync_vectors.py` checks that, and checks both the encoder (JSON form to
hex) and the decoder (hex to JSON form, or the refusal's reason). The JSON form of a
message is described in `DESCRIPTION`; it names every value the grammar carries, so an
implementation in another language can be tested against it without convgraph.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

from convgraph.artifacts.blocks import split
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import sign_record
from convgraph.integrity.statement import sign_statement
from convgraph.sync.keyset import INFINITY, MINUS_INFINITY, STRONG_LEN, Bound, fingerprint, item_hash
from convgraph.sync.reconcile import cid_of
from convgraph.sync.varint import uvarint
from convgraph.sync.wire import Base, Fate, Kind, Message, Mode, Range, Reported, Section, Want, encode

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path
import writer

HERE = Path(__file__).resolve().parent
SYNC_FILE = HERE / "sync.json"
SALT = bytes.fromhex("0001020304050607")
KEY = SigningKey(bytes(range(32)))
OTHER = SigningKey(bytes(range(1, 33)))  # signs the gossiped statements
T_STATEMENT = 1_700_000_001_000

DESCRIPTION = [
    "Sync wire vectors for docs/sync.md, protocol version 4. All binary values are lower-case hex.",
    "messages[]: {name, note, message, hex}: encoding `message` gives `hex`; decoding `hex` gives `message`.",
    "A message is {kind: INITIATE|REPLY|CONTINUE, salt, sections: [section]}; a section is {conv, and only",
    "the parts it carries: summary {count, strong}, tip {wall, digest}, probes [{bound, fp}],",
    "ranges [{upper, mode: SKIP|FINGERPRINT|IDS, fp?, hashes?}], wants [{lower, upper, hashes}],",
    "records [hex], gone [digest], report [{fate, digest?, index?, rule?, parents?, retry_ms?}],",
    "base {checkpoint, snapshot, cover} (each hex), statement (hex: a signed statement, docs/integrity.md",
    "§2; every REPLY section must carry one), gossip [hex], needs [CID text], blocks [{cid: CID text,",
    "data: hex}]}. A message without `version` is version 4; `version: 3` marks one an older peer sends.",
    "Section flags are a varint: 0x80 0x01 is 128.",
    "A bound is {wall, prefix} or the string \"inf\"; {wall: 0, prefix: \"\"} is below every key.",
    "refusals[]: {name, note, hex, reason, by}: `by` decoder: decoding refuses with `reason`;",
    "`by` responder: it decodes, and a responder refuses it (HTTP 400 with that reason).",
    "item_hashes[]: blake2b(digest, key=salt, digest_size=3). fingerprints[]: the 4- and 16-byte",
    "fingerprints of a set of digests (sha256(sum mod 2^256, 32 bytes LE || varint(count)), truncated).",
]


def _digest(n: int) -> bytes:
    return hashlib.sha256(b"digest %d" % n).digest()


def _strong(digests: list[bytes]) -> bytes:
    return fingerprint(sum(int.from_bytes(d, "little") for d in digests), len(digests), STRONG_LEN)


def _record(seq: int, wall: int, text: str, parents: tuple[Any, ...] = ()) -> bytes:
    return sign_record(KEY, conv="c", seq=seq, hlc=Hlc(wall, 0), parents=list(parents), kind="user_message",
                       payload={"content": text}).data


def _sections(kind: Kind, *sections: Section) -> Message:
    return Message(kind, SALT, sections)


def _statement(digests: list[bytes], *, stored: tuple[bytes, ...] = (), key: SigningKey = KEY,
               conv: str = "c") -> bytes:
    """A signed statement holding `digests` (the last one the head), naming `stored` as stored."""
    heads = [cid_of(digests[-1])] if digests else []
    return sign_statement(key, conv, len(digests), heads, T_STATEMENT,
                          stored=[cid_of(d) for d in stored]).data


def _reply(conv: str, digests: list[bytes], **parts: Any) -> Section:
    """A REPLY section with its summary and statement: every reply section carries both."""
    return Section(conv, len(digests), _strong(digests), statement=_statement(digests, conv=conv), **parts)


def _messages() -> list[tuple[str, str, Message]]:
    d1, d2, d3 = _digest(1), _digest(2), _digest(3)
    first = _record(1, 1_700_000_000_000, "hello")
    h = [item_hash(SALT, d) for d in (d1, d2, d3)]
    return [
        ("initiate_no_sections", "an INITIATE may name no conversation", _sections(Kind.INITIATE)),
        ("initiate_empty_set", "count 0: the strong fingerprint of no keys, and no tip",
         _sections(Kind.INITIATE, Section("c", 0, _strong([])))),
        ("initiate_one_key", "count 1 with its tip",
         _sections(Kind.INITIATE, Section("c", 1, _strong([d1]), (1_700_000_000_000, d1)))),
        ("initiate_probes", "two probes along one delta chain, the second with a prefix",
         _sections(Kind.INITIATE, Section("c", 300, _strong([d1, d2]), (1_700_000_000_500, d2), probes=(
             (Bound(1_700_000_000_000), b"\x01\x02\x03\x04"),
             (Bound(1_700_000_000_100, b"\xab"), b"\x05\x06\x07\x08"))))),
        ("initiate_two_conversations", "sections sorted by name, bytewise",
         _sections(Kind.INITIATE, Section("a", 0, _strong([])), Section("b", 1, _strong([d3]), (7, d3)))),
        ("reply_in_sync", "the summary, the tip and the statement: d = 0 in one round trip",
         _sections(Kind.REPLY, _reply("c", [d1], tip=(1_700_000_000_000, d1)))),
        ("reply_ranges", "a cover: FINGERPRINT, IDS (bound with a prefix) and SKIP up to infinity",
         _sections(Kind.REPLY, _reply("c", [d1, d2, d3], ranges=(
             Range(Bound(1000), Mode.FINGERPRINT, fp=b"\xde\xad\xbe\xef"),
             Range(Bound(1000, b"\x7f"), Mode.IDS, hashes=(h[0], h[1])),
             Range(INFINITY, Mode.SKIP))))),
        ("reply_one_infinite_range", "the whole key space as one IDS range: ∞ is delta 0",
         _sections(Kind.REPLY, _reply("c", [d1], ranges=(Range(INFINITY, Mode.IDS, hashes=(h[0],)),)))),
        ("reply_empty_ids", "an IDS range may list no hash: this side holds nothing there",
         _sections(Kind.REPLY, _reply("c", [], ranges=(Range(INFINITY, Mode.IDS),)))),
        ("continue_chained_wants", "one delta chain through the whole wants part: 100,200 then 300,400",
         _sections(Kind.CONTINUE, Section("c", wants=(Want(Bound(100), Bound(200), (h[0],)),
                                                       Want(Bound(300), Bound(400), (h[1], h[2])))))),
        ("continue_want_below_every_key", "a want from below every key (wall 0, no prefix) to infinity",
         _sections(Kind.CONTINUE, Section("c", wants=(Want(MINUS_INFINITY, INFINITY, (h[2],)),)))),
        ("continue_records", "one signed record pushed",
         _sections(Kind.CONTINUE, Section("c", records=(first,)))),
        ("reply_gone", "digests asked for that the responder can no longer serve",
         _sections(Kind.REPLY, _reply("c", [d1, d2], gone=(d3,)))),
        ("reply_report_each_fate", "one report entry of each fate; the receipt names the stored three",
         _sections(Kind.REPLY, Section("c", 2, _strong([d1, d2]), statement=_statement([d1, d2], stored=(d1, d2, d3)),
                                        report=(
             Reported(Fate.ACCEPTED, d1), Reported(Fate.RELEASED, d2), Reported(Fate.DUPLICATE, d3),
             Reported(Fate.QUARANTINED, d1, parents=(d2, d3)), Reported(Fate.HELD, d2, retry_ms=1_700_000_060_000),
             Reported(Fate.REJECTED, d3, rule="signature"), Reported(Fate.REJECTED_AT, index=7, rule="size"),
             Reported(Fate.EVICTED, d1))))),
        ("reply_report_forgotten", "records of a conversation the responder forgot: each REJECTED, rule "
         "`forgotten`; the receipt names none of them",
         _sections(Kind.REPLY, Section("c", 0, _strong([]), statement=_statement([], stored=()), report=(
             Reported(Fate.REJECTED, d1, rule="forgotten"), Reported(Fate.REJECTED, d2, rule="forgotten"))))),
        ("reply_receipt", "a report of one record ACCEPTED, and the receipt that names it",
         _sections(Kind.REPLY, Section("c", 1, _strong([d1]), report=(Reported(Fate.ACCEPTED, d1),),
                                        statement=_statement([d1], stored=(d1,))))),
        ("initiate_gossip", "an INITIATE gossips another key's statement about its conversation",
         _sections(Kind.INITIATE, Section("c", 1, _strong([d1]), (1_700_000_000_000, d1),
                                           gossip=(_statement([d1], key=OTHER),)))),
        ("reply_gossip", "a reply gossips two statements of another key; flags 1536 take two bytes",
         _sections(Kind.REPLY, _reply("c", [d1], gossip=(_statement([d1, d2], key=OTHER),
                                                        _statement([d1], key=OTHER))))),
        ("continue_base", "a base pushed instead of the records it covers; flags 256 take two bytes",
         _sections(Kind.CONTINUE, Section("c", base=Base(first, b"\xa2\x61v\x01", b"\xa3\x61v\x01")))),
        ("continue_needs", "artifact blocks the initiator lacks: a manifest and a raw leaf, in CID order",
         _sections(Kind.CONTINUE, Section("c", needs=tuple(sorted((_MANIFEST, CID.of_raw(b""))))))),
        ("reply_blocks", "blocks answering a needs part: the empty artifact (0 bytes) and one chunk; "
         "the responder's own needs; flags 6657 take two bytes",
         _sections(Kind.REPLY, _reply("c", [d1], blocks=((CID.of_raw(b""), b""), (CID.of_raw(b"x"), b"x")),
                                     needs=(_MANIFEST,)))),
        ("initiate_version_3", "an older initiator's message: read, and answered in version 3",
         Message(Kind.INITIATE, SALT, (Section("c", 0, _strong([])),), 3)),
        ("reply_base_and_report", "a base sent with a record; the report's first entry is the base's",
         _sections(Kind.REPLY, Section("c", 1, _strong([d1]), records=(first,),
                                        report=(Reported(Fate.REJECTED, d2, rule="untrusted_checkpoint"),
                                                Reported(Fate.ACCEPTED, d3)),
                                        base=Base(first, b"\xa2\x61v\x01", b"\xa3\x61v\x01"),
                                        statement=_statement([d1], stored=(d3,))))),
    ]


_MANIFEST = split(b"m" * (262_144 + 1))[0]  # a two-chunk artifact's manifest CID


def _refusals() -> list[tuple[str, str, bytes, str, str]]:
    head = SALT
    init, cont, reply = b"\x04\x01" + head, b"\x04\x03" + head, b"\x04\x02" + head
    leaf = b"\x55" + _digest(1)
    summary = b"\x00" + _strong([])
    empty = _statement([])
    statement = uvarint(len(empty)) + empty
    return [
        ("version_1", "a version-1 message: nothing of it is read", b"\x01\x01" + head + b"\x00", "version", "decoder"),
        ("version_2", "a version-2 message (no statements): nothing of it is read",
         b"\x02\x01" + head + b"\x00", "version", "decoder"),
        ("version_5", "a version-5 message", b"\x05\x01" + head + b"\x00", "version", "decoder"),
        ("unknown_kind", "kind 9", b"\x04\x09" + head + b"\x00", "kind", "decoder"),
        ("needs_in_version_3", "a version-3 message may not carry needs (flag 2048)",
         b"\x03\x03" + head + b"\x01\x01c" + uvarint(0x800) + b"\x01" + leaf, "part", "decoder"),
        ("needs_in_initiate", "needs in an INITIATE",
         init + b"\x01\x01c" + uvarint(0x801) + b"\x00" + _strong([]) + b"\x01" + leaf, "part", "decoder"),
        ("needs_unsorted", "two needed CIDs, the larger first",
         cont + b"\x01\x01c" + uvarint(0x800) + b"\x02" + b"\x71" + _digest(1) + leaf, "malformed", "decoder"),
        ("needs_empty", "the needs flag with n = 0", cont + b"\x01\x01c" + uvarint(0x800) + b"\x00",
         "malformed", "decoder"),
        ("block_unknown_codec", "a block under codec 0x70 (dag-pb)",
         cont + b"\x01\x01c" + uvarint(0x1000) + b"\x01\x70" + _digest(1) + b"\x00", "malformed", "decoder"),
        ("block_too_large", "a block declared 262,145 bytes long, over one chunk: refused at its length",
         cont + b"\x01\x01c" + uvarint(0x1000) + b"\x01" + leaf + uvarint(262_145),
         "limit", "decoder"),
        ("reply_to_responder", "a REPLY sent by an initiator", reply + b"\x00", "kind", "responder"),
        ("initiate_without_summary", "flags 0 in an INITIATE", init + b"\x01\x01c\x00", "part", "decoder"),
        ("initiate_tip_for_empty_set", "count 0 with a tip",
         init + b"\x01\x01c\x03" + summary + b"\x01" + _digest(1), "part", "decoder"),
        ("initiate_count_without_tip", "count 1 without its tip",
         init + b"\x01\x01c\x01\x01" + _strong([_digest(1)]), "part", "decoder"),
        ("initiate_with_records", "records in an INITIATE",
         init + b"\x01\x01c\x21" + summary + b"\x01\x01\xa0", "part", "decoder"),
        ("continue_no_sections", "a CONTINUE about nothing", cont + b"\x00", "part", "decoder"),
        ("continue_empty_section", "a CONTINUE section with no part", cont + b"\x01\x01c\x00", "part", "decoder"),
        ("continue_with_summary", "a summary in a CONTINUE",
         cont + b"\x01\x01c\x21" + summary + b"\x01\x01\xa0", "part", "decoder"),
        ("continue_with_report", "an initiator's report",
         cont + b"\x01\x01c" + uvarint(0xA0) + b"\x01\x01\xa0\x01\x01" + _digest(1), "part", "decoder"),
        ("initiate_with_base", "a base in an INITIATE",
         init + b"\x01\x01c" + uvarint(0x101) + summary + b"\x01\xa0\x01\xa0\x01\xa0", "part", "decoder"),
        ("unknown_flag", "flag bit 8192, which no part has",
         reply + b"\x01\x01c" + uvarint(0x2001 | 0x200) + summary + statement, "part", "decoder"),
        ("reply_with_probes", "probes in a REPLY",
         reply + b"\x01\x01c" + uvarint(0x205) + summary + b"\x01\x01\x00\x01\x02\x03\x04" + statement,
         "part", "decoder"),
        ("reply_without_statement", "a REPLY section must carry its statement",
         reply + b"\x01\x01c\x01" + summary, "part", "decoder"),
        ("initiate_with_statement", "a statement in an INITIATE",
         init + b"\x01\x01c" + uvarint(0x201) + summary + statement, "part", "decoder"),
        ("continue_with_gossip", "gossip in a CONTINUE",
         cont + b"\x01\x01c" + uvarint(0x400) + b"\x01" + statement, "part", "decoder"),
        ("empty_statement", "a statement of 0 bytes",
         reply + b"\x01\x01c" + uvarint(0x201) + summary + b"\x00", "malformed", "decoder"),
        ("empty_gossip", "the gossip flag with n = 0",
         init + b"\x01\x01c" + uvarint(0x401) + summary + b"\x00", "malformed", "decoder"),
        ("too_much_gossip", "17 gossiped statements, over the limit of 16",
         init + b"\x01\x01c" + uvarint(0x401) + summary + b"\x11" + statement * 17, "limit", "decoder"),
        ("trailing_byte", "one byte after the last section", init + b"\x00\x00", "malformed", "decoder"),
        ("non_minimal_varint", "the section count as 80 00", init + b"\x80\x00", "malformed", "decoder"),
        ("truncated_salt", "the salt cut short", b"\x04\x01\x00\x01", "malformed", "decoder"),
        ("unsorted_sections", "b before a",
         init + b"\x02\x01b" + b"\x01" + summary + b"\x01a\x01" + summary, "malformed", "decoder"),
        ("empty_records_list", "the records flag with n = 0", cont + b"\x01\x01c\x20\x00", "malformed", "decoder"),
        ("infinite_probe", "a probe at infinity",
         init + b"\x01\x01c\x05" + summary + b"\x01\x00\x00\x01\x02\x03\x04", "malformed", "decoder"),
        ("cover_not_ending_at_infinity", "the last range ends at wall 5",
         cont + b"\x01\x01c\x08\x01\x06\x00", "malformed", "decoder"),
        ("unknown_fate", "report entry fate 9",
         reply + b"\x01\x01c" + uvarint(0x281) + summary + b"\x01\x09" + _digest(1) + statement, "malformed",
         "decoder"),
        ("quarantined_without_parents", "a QUARANTINED entry naming no parent",
         reply + b"\x01\x01c" + uvarint(0x281) + summary + b"\x01\x04" + _digest(1) + b"\x00" + statement,
         "malformed", "decoder"),
        ("too_many_sections", "1,025 sections, over the limit of 1,024", init + uvarint(1025), "limit", "decoder"),
        ("empty_conversation_name", "a section whose conv is the empty string (conv is str(1..256))",
         cont + b"\x01\x00\x20\x01\x01\xa0", "malformed", "decoder"),
        ("conversation_name_too_long", "a conversation name of 257 bytes, over the limit of 256",
         cont + b"\x01" + uvarint(257) + b"c" * 257 + b"\x20\x01\x01\xa0", "limit", "decoder"),
        ("too_many_probes", "65 probes, over the limit of 64",
         init + b"\x01\x01c\x05" + summary + uvarint(65) + (b"\x02\x00\x01\x02\x03\x04" * 65), "limit", "decoder"),
        ("rule_too_long", "a REJECTED entry whose rule is 65 bytes, over the limit of 64",
         reply + b"\x01\x01c" + uvarint(0x281) + summary + b"\x01\x06" + _digest(1) + uvarint(65) + b"r" * 65
         + statement, "limit", "decoder"),
        ("empty_rule", "a REJECTED entry whose rule is empty (rule is str(1..64))",
         reply + b"\x01\x01c" + uvarint(0x281) + summary + b"\x01\x06" + _digest(1) + b"\x00" + statement,
         "malformed", "decoder"),
        ("too_many_parents", "a QUARANTINED entry naming 1,025 parents, over the limit of 1,024",
         reply + b"\x01\x01c" + uvarint(0x281) + summary + b"\x01\x04" + _digest(1) + uvarint(1025)
         + _digest(2) * 1025 + statement, "limit", "decoder"),
        ("too_many_report_entries", "a report of 65,538 entries, over the limit of 65,537 (the records and a base)",
         reply + b"\x01\x01c" + uvarint(0x281) + summary + uvarint(65_538), "limit", "decoder"),
    ]


def _bound(b: Bound) -> Any:
    return "inf" if b.infinite else {"wall": b.wall_ms, "prefix": b.prefix.hex()}


def to_json(m: Message) -> dict[str, Any]:
    """The JSON form of a message (see DESCRIPTION)."""
    version = {} if m.version == 4 else {"version": m.version}
    return {**version, "kind": m.kind.name, "salt": m.salt.hex(), "sections": [_section_json(s) for s in m.sections]}


def _section_json(s: Section) -> dict[str, Any]:
    out: dict[str, Any] = {"conv": s.conv}
    if s.count is not None:
        out["summary"] = {"count": s.count, "strong": s.strong.hex()}
    if s.tip is not None:
        out["tip"] = {"wall": s.tip[0], "digest": s.tip[1].hex()}
    if s.probes:
        out["probes"] = [{"bound": _bound(b), "fp": fp.hex()} for b, fp in s.probes]
    if s.ranges is not None:
        out["ranges"] = [{"upper": _bound(r.upper), "mode": r.mode.name,
                          **({"fp": r.fp.hex()} if r.mode is Mode.FINGERPRINT else {}),
                          **({"hashes": [x.hex() for x in r.hashes]} if r.mode is Mode.IDS else {})}
                         for r in s.ranges]
    if s.wants:
        out["wants"] = [{"lower": _bound(w.lower), "upper": _bound(w.upper), "hashes": [x.hex() for x in w.hashes]}
                        for w in s.wants]
    if s.records:
        out["records"] = [r.hex() for r in s.records]
    if s.gone:
        out["gone"] = [g.hex() for g in s.gone]
    if s.report is not None:
        out["report"] = [_entry_json(e) for e in s.report]
    if s.base is not None:
        out["base"] = {"checkpoint": s.base.checkpoint.hex(), "snapshot": s.base.snapshot.hex(),
                       "cover": s.base.cover.hex()}
    if s.statement is not None:
        out["statement"] = s.statement.hex()
    if s.gossip:
        out["gossip"] = [g.hex() for g in s.gossip]
    if s.needs:
        out["needs"] = [str(c) for c in s.needs]
    if s.blocks:
        out["blocks"] = [{"cid": str(c), "data": d.hex()} for c, d in s.blocks]
    return out


def _entry_json(e: Reported) -> dict[str, Any]:
    out: dict[str, Any] = {"fate": e.fate.name}
    if e.fate is Fate.REJECTED_AT:
        out["index"] = e.index
    else:
        out["digest"] = e.digest.hex()
    if e.fate in (Fate.REJECTED, Fate.REJECTED_AT):
        out["rule"] = e.rule
    if e.fate is Fate.QUARANTINED:
        out["parents"] = [p.hex() for p in e.parents]
    if e.fate is Fate.HELD:
        out["retry_ms"] = e.retry_ms
    return out


def build() -> dict[str, Any]:
    salts = [SALT, bytes(8), b"\xff" * 8]
    digests = [_digest(i) for i in range(3)]
    sets = [[], digests[:1], digests, [b"\xff" * 32] * 2]
    return {
        "description": DESCRIPTION,
        "version": 4,
        "messages": [{"name": n, "note": note, "message": to_json(m), "hex": encode(m).hex()}
                     for n, note, m in _messages()],
        "refusals": [{"name": n, "note": note, "hex": data.hex(), "reason": reason, "by": by}
                     for n, note, data, reason, by in _refusals()],
        "item_hashes": [{"salt": s.hex(), "digest": d.hex(), "hash": item_hash(s, d).hex()}
                        for s in salts for d in digests],
        "fingerprints": [{"digests": [d.hex() for d in ds],
                          "fp4": fingerprint(sum(int.from_bytes(d, "little") for d in ds), len(ds), 4).hex(),
                          "fp16": _strong(ds).hex()} for ds in sets],
    }


render = writer.render  # the tests compare render(build()) with the committed file


def main(argv: list[str] | None = None) -> int:
    return writer.main(__doc__, build, SYNC_FILE, "generate_sync.py", argv)


if __name__ == "__main__":
    sys.exit(main())
