"""Fuzz `Replica.ingest` and `decode_record` with hostile bytes.

Inputs: random byte strings, random DAG-CBOR maps shaped like records (some validly
signed), and mutations of a corpus of valid records: bit flips, byte insert / delete /
overwrite, truncation, splicing two records, non-canonical re-encodings, and structural
edits (a field replaced by a value of another DAG-CBOR type, deleted, added; seq, hlc,
parents, conv, kind, payload, branch, refs or actor changed) that are re-signed with the
author's key, so the signature verifies but the content breaks the schema or the causal
rules. Properties, after every batch:

* ingest raises nothing; `decode_record` raises only `ConvgraphError` subclasses;
* nothing invalid is stored: `Replica.verify()` is ok, bytes `decode_record` refuses are
  neither stored nor quarantined, and every stored record is a corpus original or passes
  `decode_record` and an independent re-check (hashlib, the `dag-cbor` package, libsodium
  directly, the causal rules written out again);
* the record count grows by exactly the accepted records, and heads are the records no
  stored record names as parent; two stored records at one (actor, conv, seq) are kept
  as an equivocation pair;
* ingesting the same batch again accepts nothing; a later batch of originals may release
  waiting mutants, and moving the clock past the drift releases held ones: all of the
  above still holds after each.

Case counts in CI (examples x inputs per example): random bytes 2,000 x ~3.5, memory
mutations 4,000 x ~5.5 (plus originals), SQLite mutations 200 x ~5.5, decode_record alone
2,000 x 1: over 30,000 hostile inputs.
"""

from __future__ import annotations

import functools
import hashlib
import struct
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import dag_cbor
import nacl.signing
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import IN_CI, TEST_SEED
from convgraph import (
    CID,
    KINDS,
    SIGNING_DOMAIN,
    Config,
    ConvgraphError,
    DecodeError,
    Draft,
    IngestReport,
    ManualClock,
    QuarantineBounds,
    Record,
    Replica,
    SigningKey,
    conv_id,
    decode,
    decode_record,
    encode,
    sign_record,
    signing_bytes,
)
from convgraph.core.hlc import DEFAULT_MAX_DRIFT_MS, MAX_COUNTER, Hlc
from convgraph.core.record import load_trusted
from convgraph.store.rows import WriteSet

Item = tuple[bytes, CID | None]  # record bytes and the CID a peer claims for them (or none)

T0 = 1_700_000_000_000
AUTHOR_A = SigningKey(TEST_SEED)
AUTHOR_B = SigningKey(bytes(range(100, 132)))
REPLICA_KEY = SigningKey(bytes(range(200, 232)))  # the fuzzed replica's own key: never an author
KEYS = {k.public: k for k in (AUTHOR_A, AUTHOR_B)}
RAW_CID = CID.of_raw(b"artifact")

# CI's profile is derandomised: every run tries the same inputs, so its counts buy breadth once,
# not depth per run; they are sized so the whole suite stays well under 10 minutes on 2 cores
MEMORY_EXAMPLES = 1_200 if IN_CI else 200
RANDOM_EXAMPLES = 800 if IN_CI else 100
DECODE_EXAMPLES = 800 if IN_CI else 100
SQLITE_EXAMPLES = 200 if IN_CI else 20


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --------------------------------------------------------------------------- the corpus


@dataclass(frozen=True)
class Corpus:
    records: tuple[Record, ...]  # creation order, which is a topological order
    cids: frozenset[CID]
    now: int  # a clock reading just after the last record


@functools.cache
def corpus() -> Corpus:
    """Two authors, two conversations, a branch and a merge, every field type in use."""
    clock = ManualClock(T0)
    a = Replica.in_memory(AUTHOR_A, clock=clock)
    b = Replica.in_memory(AUTHOR_B, clock=clock)
    out: list[Record] = []

    def put(author: Replica, conv: str, drafts: list[Draft], *, share: bool = True) -> list[Record]:
        clock.advance(3)
        recs = author.write_many(conv, drafts)
        out.extend(recs)
        if share:
            other = b if author is a else a
            assert other.ingest([r.data for r in recs]).accepted == [r.cid for r in recs]
        return recs

    def one(author: Replica, conv: str, kind: str, payload: dict[str, Any], *, share: bool = True,
            **kw: Any) -> Record:
        return put(author, conv, [Draft(kind, payload, **kw)], share=share)[0]

    one(a, "c1", "user_message", {"content": "hello", "meta": {"n": -7, "f": 0.5, "t": [None, True]}})
    call = {"id": "t1", "name": "grep", "input": {"q": "x", "n": 2**40}}
    one(b, "c1", "agent_message", {"content": [{"type": "text", "text": "on it"}], "tool_calls": [call]})
    one(a, "c1", "tool_result", {"tool_use_id": "t1", "content": "found", "is_error": False})
    snap, patch = put(a, "c1", [
        Draft("code_snapshot", {"path": "a.py", "content": "print(1)\n"}),
        Draft("patch", {"base": RAW_CID, "diff": "@@ -1 +1 @@"}, refs=(RAW_CID,)),
    ])
    review = one(b, "c1", "review_comment", {"target": patch.cid, "body": "ok", "verdict": "approve", "line": 3})
    fork = one(b, "c1", "branch", {"name": "exp", "from": review.cid})
    tip = one(b, "c1", "agent_message", {"text": "trying"}, branch="exp")
    merge = one(a, "c1", "merge", {"branch": "exp", "heads": [tip.cid], "accepted": [tip.cid]})
    one(a, "c1", "checkpoint", {"heads": [merge.cid], "count": 9, "snapshot": snap.cid}, refs=(fork.cid,))
    ask = one(b, "c2", "decision_request", {"question": "ship?", "options": ["y", "n"]})
    one(a, "c2", "decision", {"request": ask.cid, "choice": "y"})
    one(b, "c2", "grant", {"grantee": AUTHOR_A.public, "rights": ["read", "write"], "expires_ms": 2**33})
    # two concurrent replies (neither sees the other), then a record that joins them
    x = one(a, "c2", "attestation", {"subject": ask.cid, "statement": "done", "claims": {"k": b"\0"}},
            share=False)
    y = one(b, "c2", "retraction", {"target": ask.cid, "reason": "stale"}, share=False)
    a.ingest([y.data])
    b.ingest([x.data])
    one(a, "c2", "pin", {"target": ask.cid})
    # a rooted conversation: A owns it, B is granted; mutants there also meet the authority rules
    rooted = conv_id(AUTHOR_A.public, bytes(16))
    one(a, rooted, "genesis", {"nonce": bytes(16), "title": "rooted"})
    one(a, rooted, "grant", {"grantee": AUTHOR_B.public, "rights": ["decide", "read", "review", "write"]})
    q = one(b, rooted, "decision_request", {"question": "ship?", "reviews": 1})
    one(b, rooted, "review_comment", {"target": q.cid, "body": "ok", "verdict": "approve"})
    one(a, rooted, "decision", {"request": q.cid, "choice": "y"})
    one(a, rooted, "revocation", {"grantee": AUTHOR_B.public, "rights": ["decide"]})
    one(b, rooted, "user_message", {"content": "still writing"})
    return Corpus(tuple(out), frozenset(r.cid for r in out), clock() + 10)


# ----------------------------------------------------------- a deliberately loose encoder

QUIRKS = ("wide_int", "unsorted", "indefinite", "float32", "bare_cid")


def loose_cbor(value: Any, quirks: frozenset[str] = frozenset()) -> bytes:
    """CBOR of a DAG-CBOR value; with no quirks it must equal `encode` byte for byte."""
    if value is None:
        return b"\xf6"
    if value is True or value is False:
        return b"\xf5" if value else b"\xf4"
    if type(value) is int:
        return _head(0, value, quirks) if value >= 0 else _head(1, -1 - value, quirks)
    if type(value) is float:
        if "float32" in quirks and struct.unpack(">f", struct.pack(">f", value))[0] == value:
            return b"\xfa" + struct.pack(">f", value)
        return b"\xfb" + struct.pack(">d", value)
    if type(value) is str:
        raw = value.encode("utf-8")
        if "indefinite" in quirks:
            return b"\x7f" + _head(3, len(raw), quirks) + raw + b"\xff"
        return _head(3, len(raw), quirks) + raw
    if type(value) is bytes:
        return _head(2, len(value), quirks) + value
    if type(value) is CID:
        raw = bytes(value) if "bare_cid" in quirks else b"\0" + bytes(value)
        return b"\xd8\x2a" + _head(2, len(raw), quirks) + raw
    if type(value) is list:
        body = b"".join(loose_cbor(v, quirks) for v in value)
        if "indefinite" in quirks:
            return b"\x9f" + body + b"\xff"
        return _head(4, len(value), quirks) + body
    if type(value) is dict:
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()), reverse="unsorted" in quirks)
        body = b"".join(loose_cbor(k, quirks) + loose_cbor(value[k], quirks) for k in keys)
        return _head(5, len(value), quirks) + body
    raise TypeError(f"not a DAG-CBOR value: {value!r}")


def _head(major: int, n: int, quirks: frozenset[str]) -> bytes:
    widths = [(24, 0), (1 << 8, 1), (1 << 16, 2), (1 << 32, 4), (1 << 64, 8)]
    index = next(i for i, (bound, _) in enumerate(widths) if n < bound)
    if "wide_int" in quirks:
        index = min(index + 1, len(widths) - 1)
    size = widths[index][1]
    if size == 0:
        return bytes([major << 5 | n])
    info = {1: 24, 2: 25, 4: 26, 8: 27}[size]
    return bytes([major << 5 | info]) + n.to_bytes(size, "big")


# ------------------------------------------------------------------------- strategies
# Every strategy is built once, at import: hypothesis re-validates a strategy made inside
# a draw each time, which would cost more than the ingest under test.

CORPUS_CIDS = tuple(sorted(corpus().cids))
cids = st.one_of(
    st.builds(lambda c, d: CID(bytes([1, c, 0x12, 0x20]) + d), st.sampled_from([0x71, 0x55]),
              st.binary(min_size=32, max_size=32)),
    st.sampled_from(CORPUS_CIDS),
)
SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "bool": st.booleans(),
    "int": st.one_of(st.integers(-(2**64), 2**64 - 1), st.sampled_from(
        [0, 1, -1, 23, 24, 255, 256, 2**16, 2**32 - 1, 2**32, 2**53 - 1, 2**53, 2**63, 2**64 - 1, -(2**64)])),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "str": st.one_of(st.text(max_size=12), st.sampled_from(["", " ", "c1", "c2", "exp", *KINDS])),
    "bytes": st.one_of(st.binary(max_size=70), st.binary(min_size=32, max_size=32), st.binary(min_size=64, max_size=64)),
    "cid": cids,
}
values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(*SCALARS.values()),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=5,
)
TYPES: dict[str, st.SearchStrategy[Any]] = {
    **SCALARS,
    "list": st.lists(values, max_size=3),
    "map": st.dictionaries(st.text(max_size=6), values, max_size=3),
}
OTHER_TYPE = {tag: st.sampled_from(sorted(set(TYPES) - {tag})).flatmap(TYPES.__getitem__) for tag in TYPES}
EDIT_ACTIONS = st.sampled_from(["retype", "same_type", "delete", "add"])
NEW_NAMES = st.sampled_from(["branch", "meta", "sig", "seq", "role", "x", ""]) | st.text(max_size=6)
TWEAKS = st.sampled_from(
    ["seq", "wall", "counter", "future", "parents", "conv", "kind", "content", "branch", "refs", "actor"])
PARENT_SETS = st.lists(st.sampled_from(CORPUS_CIDS) | cids, max_size=4).map(lambda c: sorted(set(c)))
REF_SETS = st.lists(cids, max_size=3).map(lambda c: sorted(set(c)))
RECORDS = st.sampled_from(corpus().records)
OPS = st.sampled_from(["bitflip", "insert", "delete", "truncate", "overwrite", "splice", "noncanonical",
                       "field", "field", "tweak", "tweak", "descendant", "original"])
QUIRK_SETS = st.sets(st.sampled_from(QUIRKS), min_size=1).map(frozenset)
CLAIMS = st.sampled_from(["none", "none", "none", "true", "wrong"])


def type_tag(value: Any) -> str:
    for tag, kind in (("null", type(None)), ("bool", bool), ("int", int), ("float", float), ("str", str),
                      ("bytes", bytes), ("cid", CID), ("list", list), ("map", dict)):
        if type(value) is kind:
            return tag
    raise TypeError(value)


def pick(draw: st.DrawFn, options: list[Any]) -> Any:
    """One of `options` (integers strategies are cached, sampled_from over a fresh list is not)."""
    return options[draw(st.integers(0, len(options) - 1))]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position in a decoded value: map keys and list indexes, depth first."""
    found = [prefix]
    if type(value) is dict:
        for k, v in value.items():
            found += paths(v, (*prefix, k))
    elif type(value) is list:
        for i, v in enumerate(value):
            found += paths(v, (*prefix, i))
    return found


def at(root: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        root = root[step]
    return root


def resign(m: Any) -> None:
    """Sign `m` (in place) with its author's key, or make author A its author and sign."""
    if type(m) is not dict:
        return
    key = KEYS.get(m["actor"]) if type(m.get("actor")) is bytes else None
    if key is None:
        key = AUTHOR_A
        m["actor"] = key.public
    m.pop("sig", None)
    m["sig"] = key.sign(signing_bytes(m))


def edit_field(draw: st.DrawFn, m: dict[str, Any]) -> Any:
    """Replace, delete or add one field somewhere in the record tree; returns the new root."""
    path = pick(draw, paths(m))
    target = at(m, path)
    action = draw(EDIT_ACTIONS)
    if action == "add" and type(target) in (dict, list):
        if type(target) is dict:
            target[draw(NEW_NAMES)] = draw(values)
        else:
            target.insert(draw(st.integers(0, len(target))), draw(values))
        return m
    if action == "delete" and path:
        del at(m, path[:-1])[path[-1]]
        return m
    tag = type_tag(target)
    new = draw(TYPES[tag] if action == "same_type" else OTHER_TYPE[tag])
    if not path:
        return new
    at(m, path[:-1])[path[-1]] = new
    return m


def tweak(draw: st.DrawFn, m: dict[str, Any]) -> None:
    """A change that keeps the record well-formed but may break its causal rules."""
    what = draw(TWEAKS)
    if what == "seq":
        m["seq"] = max(1, m["seq"] + draw(st.integers(-3, 3)))
    elif what == "wall":
        m["hlc"][0] = max(0, m["hlc"][0] + draw(st.integers(-10, 10)))
    elif what == "counter":
        m["hlc"][1] = max(0, m["hlc"][1] + draw(st.integers(-2, 2)))
    elif what == "future":  # beyond the allowed drift: held for our clock
        m["hlc"][0] = corpus().now + DEFAULT_MAX_DRIFT_MS + draw(st.integers(1, 10_000))
    elif what == "parents":
        m["parents"] = draw(PARENT_SETS)
    elif what == "conv":
        m["conv"] = pick(draw, ["c1", "c2", "c3"])
    elif what == "kind":  # another record's kind and payload: schema-valid, causally new
        donor = draw(RECORDS)
        m["kind"], m["payload"] = donor.kind, decode(encode(donor.payload))
    elif what == "content":  # same seq, same parents, new text: an equivocation if accepted
        m["kind"], m["payload"] = "user_message", {"content": draw(SCALARS["str"])}
    elif what == "branch":
        if "branch" in m and draw(st.booleans()):
            del m["branch"]
        else:
            m["branch"] = pick(draw, ["exp", "other"])
    elif what == "refs":
        m["refs"] = draw(REF_SETS)
    else:
        m["actor"] = AUTHOR_B.public if m["actor"] == AUTHOR_A.public else AUTHOR_A.public


@st.composite
def mutant_of(draw: st.DrawFn) -> bytes:
    """One mutation of a corpus record."""
    data = draw(RECORDS).data
    op = draw(OPS)
    n = len(data)
    if op == "bitflip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            out[draw(st.integers(0, n - 1))] ^= 1 << draw(st.integers(0, 7))
        return bytes(out)
    if op == "insert":
        i = draw(st.integers(0, n))
        return data[:i] + draw(st.binary(min_size=1, max_size=4)) + data[i:]
    if op == "delete":
        i = draw(st.integers(0, n - 1))
        return data[:i] + data[i + draw(st.integers(1, 8)):]
    if op == "truncate":
        return data[: draw(st.integers(0, n - 1))]
    if op == "overwrite":
        i = draw(st.integers(0, n - 1))
        chunk = draw(st.binary(min_size=1, max_size=8))
        return data[:i] + chunk + data[i + len(chunk):]
    if op == "splice":
        other = draw(RECORDS).data
        return data[: draw(st.integers(0, n))] + other[draw(st.integers(0, len(other))):]
    if op == "noncanonical":
        return loose_cbor(decode(data), draw(QUIRK_SETS))
    if op == "original":
        return data
    m = decode(data)
    if op in ("tweak", "descendant"):  # a lone `descendant` (from the decode-only fuzz) is a tweak
        for _ in range(draw(st.integers(1, 2))):
            tweak(draw, m)
        resign(m)
        return encode(m)
    root = edit_field(draw, m)
    if draw(st.booleans()):
        resign(root)
    return encode(root)


@st.composite
def family_of(draw: st.DrawFn) -> list[bytes]:
    """A mutant, or (op `descendant`) a re-signed tweak of a record plus a child of it, so
    a rejected, held or quarantined parent decides its child's fate."""
    if draw(OPS) != "descendant":
        return [draw(mutants)]
    parent = decode(draw(RECORDS).data)
    tweak(draw, parent)
    resign(parent)
    parent_bytes = encode(parent)
    child = {**parent, "seq": parent["seq"] + 1, "parents": [CID.of_record(parent_bytes)],
             "hlc": [parent["hlc"][0] + draw(st.integers(0, 2)), parent["hlc"][1] + 1],
             "kind": "user_message", "payload": {"content": "child"}}
    child.pop("branch", None)
    resign(child)
    family = [parent_bytes, encode(child)]
    return family[::-1] if draw(st.booleans()) else family


mutants = mutant_of()
families = family_of()


def claimed(draw: st.DrawFn, data: bytes) -> CID | None:
    """No claim, the true CID, or a wrong one."""
    choice = draw(CLAIMS)
    if choice == "none":
        return None
    return CID.of_record(data) if choice == "true" else draw(cids)


RECORD_FIELDS = ("conv", "actor", "seq", "hlc", "parents", "kind", "payload", "refs", "sig", "branch")
GOOD_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "conv": st.sampled_from(["c1", "c2", "x"]),
    "actor": st.sampled_from(sorted(KEYS)),
    "seq": st.integers(1, 5),
    "hlc": st.lists(st.integers(0, 2**53), min_size=2, max_size=2),
    "parents": PARENT_SETS,
    "kind": st.sampled_from(KINDS),
    "payload": st.dictionaries(st.sampled_from(["content", "text", "target", "meta", "x"]), values, max_size=3),
    "refs": REF_SETS,
    "sig": st.binary(min_size=64, max_size=64),
    "branch": st.sampled_from(["exp", ""]),
}
FIELD_SETS = st.lists(st.sampled_from(RECORD_FIELDS), unique=True, min_size=5)


@st.composite
def record_shaped_map(draw: st.DrawFn) -> bytes:
    """A DAG-CBOR map with (some of) the record's field names and random values."""
    m = {f: draw(GOOD_FIELDS[f] if draw(st.booleans()) else values) for f in draw(FIELD_SETS)}
    if draw(st.booleans()):
        resign(m)
    return encode(m)


random_blobs = st.one_of(
    st.binary(max_size=400),
    st.tuples(st.sampled_from([b"\xa8", b"\xa9", b"\xaa", b"\xb9\x00\x09"]), st.binary(max_size=300)).map(
        lambda t: t[0] + t[1]),
    record_shaped_map(),
    values.map(encode),
)


@st.composite
def batch_of(draw: st.DrawFn, groups: st.SearchStrategy[list[bytes]], max_size: int) -> list[Item]:
    blobs = [b for group in draw(st.lists(groups, min_size=1, max_size=max_size)) for b in group]
    return [(b, claimed(draw, b)) for b in blobs]


mutant_batches = batch_of(families, 10)
random_batches = batch_of(random_blobs.map(lambda b: [b]), 6)
quarantines = st.sampled_from([QuarantineBounds(), QuarantineBounds(max_count=2), QuarantineBounds(max_bytes=600)])
prefixes = st.integers(0, len(corpus().records))
originals = st.lists(RECORDS, max_size=4)


# ------------------------------------------------------------------------- the checks


def decode_or_error(data: bytes, claim: CID | None = None) -> Record | ConvgraphError:
    """`decode_record`, which may raise a ConvgraphError and nothing else (else the test fails)."""
    try:
        return decode_record(data, expected_cid=claim)
    except ConvgraphError as exc:
        return exc


def ingest_and_check(replica: Replica, items: list[Item]) -> None:
    """Ingest `items` and hold the replica to every property in the module docstring."""
    intrinsic: dict[CID, Record | ConvgraphError] = {}
    fed: set[CID] = set()  # CIDs of the items that pass every intrinsic rule, claim included
    for data, claim in items:
        cid = CID.of_record(data)
        intrinsic[cid] = decode_or_error(data)
        outcome = intrinsic[cid] if claim in (None, cid) else decode_or_error(data, claim)
        if claim not in (None, cid):
            assert isinstance(outcome, ConvgraphError)
        if isinstance(outcome, Record):
            fed.add(cid)
    before = {cid for cid, _ in replica.store.iter_all()}
    report = replica.ingest([d if c is None else (d, c) for d, c in items])
    assert all(isinstance(r.error, ConvgraphError) and isinstance(r.rule, str) for r in report.rejected)
    assert len(set(report.accepted)) == len(report.accepted)
    assert not set(report.accepted) & before
    stored = check_store(replica, before | set(report.accepted))
    check_fed(replica, stored, intrinsic)
    outcomes = {*report.accepted, *report.duplicates, *report.quarantined, *report.held, *report.evicted,
                *(r.cid for r in report.rejected)}
    assert fed <= outcomes, "a well-formed record was neither accepted, held, quarantined, evicted nor rejected"
    tally(report)

    again = replica.ingest([d if c is None else (d, c) for d, c in items])
    assert again.accepted == []
    assert dict(replica.store.iter_all()) == stored  # unchanged, so still verified
    check_fed(replica, stored, intrinsic)


def tally(report: IngestReport) -> None:
    """Label the example (shown by --hypothesis-show-statistics) so coverage can be audited."""
    for rule in sorted({r.rule for r in report.rejected}):
        event(f"rejected: {rule}")
    for name in ("quarantined", "held", "released", "evicted", "equivocations", "duplicates"):
        if getattr(report, name):
            event(name)
    if set(report.accepted) - corpus().cids:
        event("accepted a mutant")


def check_store(replica: Replica, expected: set[CID]) -> dict[CID, bytes]:
    """The store holds exactly `expected`, all valid, with consistent heads and equivocations."""
    stored = dict(replica.store.iter_all())
    assert stored.keys() == expected
    assert replica.store.count() == len(stored)
    verified = replica.verify()
    assert verified.ok, verified.failures
    assert verified.checked == len(stored)
    originals = corpus().cids
    records = {cid: load_trusted(data, cid) for cid, data in stored.items()}
    for cid, rec in records.items():
        if cid not in originals:
            assert isinstance(decode_or_error(rec.data, cid), Record)
            independently_valid(rec, records)
    check_heads(replica, list(records.values()))
    check_equivocations(replica, list(records.values()))
    return stored


def independently_valid(rec: Record, stored: dict[CID, Record]) -> None:
    """Re-check a stored mutant without convgraph's own validation code: sha-256, a second
    DAG-CBOR implementation, libsodium directly, and the causal rules written out again."""
    assert bytes(rec.cid) == b"\x01\x71\x12\x20" + hashlib.sha256(rec.data).digest()
    m: Any = dag_cbor.decode(rec.data)
    assert dag_cbor.encode(m) == rec.data, "stored bytes are not canonical DAG-CBOR"
    assert {"conv", "actor", "seq", "hlc", "parents", "kind", "payload", "refs", "sig"} <= m.keys()
    sig = m.pop("sig")
    nacl.signing.VerifyKey(m["actor"]).verify(SIGNING_DOMAIN + dag_cbor.encode(m), sig)
    parents = [stored[p] for p in rec.parents]  # KeyError: a parent is not stored
    assert all(p.conv == rec.conv and p.hlc < rec.hlc for p in parents)
    own = [p.seq for p in parents if p.actor == rec.actor]
    assert (not own) if rec.seq == 1 else (rec.seq - 1 in own and max(own) < rec.seq)


def check_fed(replica: Replica, stored: dict[CID, bytes], outcomes: dict[CID, Record | ConvgraphError]) -> None:
    """Bytes that `decode_record` refuses are neither stored nor quarantined."""
    for cid, outcome in outcomes.items():
        if isinstance(outcome, ConvgraphError):
            assert cid not in stored, f"stored bytes that decode_record refuses: {outcome!r}"
            assert not replica.store.pending_get([cid]), f"quarantined bad bytes: {outcome!r}"


def check_heads(replica: Replica, records: list[Record]) -> None:
    by_conv: defaultdict[str, set[CID]] = defaultdict(set)
    named: set[CID] = set()
    for rec in records:
        by_conv[rec.conv].add(rec.cid)
        named.update(rec.parents)
    assert replica.conversations() == sorted(by_conv)
    for conv, members in by_conv.items():
        assert replica.heads(conv) == sorted(members - named), conv


def check_equivocations(replica: Replica, records: list[Record]) -> None:
    """Every two stored records at one (actor, conv, seq) form a kept pair, and only those."""
    at_seq: defaultdict[tuple[bytes, str, int], list[CID]] = defaultdict(list)
    for rec in records:
        at_seq[(rec.actor, rec.conv, rec.seq)].append(rec.cid)
    expected = {pair for group in at_seq.values() for pair in combinations(sorted(group), 2)}
    assert set(replica.store.equivocations()) == expected


def seeded(replica: Replica, k: int) -> Replica:
    """Give `replica` the first `k` corpus records (a causally closed prefix), unverified."""
    replica.store.commit(WriteSet(records=list(corpus().records[:k])))
    return replica


def memory_replica(k: int, bounds: QuarantineBounds) -> tuple[Replica, ManualClock]:
    clock = ManualClock(corpus().now)
    replica = Replica.in_memory(REPLICA_KEY, clock=clock, config=Config(quarantine=bounds))
    return seeded(replica, k), clock


def release_and_check(replica: Replica, clock: ManualClock) -> None:
    """Move the clock past the drift window: held records are placed, the rules still hold."""
    before = {cid for cid, _ in replica.store.iter_all()}
    clock.advance(DEFAULT_MAX_DRIFT_MS + 20_000)
    report = replica.release_held()
    assert not set(report.accepted) & before
    if report.accepted:
        event("released after the clock moved")
        check_store(replica, before | set(report.accepted))
    else:
        assert {cid for cid, _ in replica.store.iter_all()} == before


# ---------------------------------------------------------------------------- the fuzz


@fuzz(RANDOM_EXAMPLES)
@given(batch=random_batches, k=prefixes, bounds=quarantines)
def test_ingest_random_bytes(batch: list[Item], k: int, bounds: QuarantineBounds) -> None:
    replica, clock = memory_replica(k, bounds)
    ingest_and_check(replica, batch)
    release_and_check(replica, clock)


@fuzz(MEMORY_EXAMPLES)
@given(batch=mutant_batches, k=prefixes, bounds=quarantines, extra=originals)
def test_ingest_mutations_memory(batch: list[Item], k: int, bounds: QuarantineBounds, extra: list[Record]) -> None:
    replica, clock = memory_replica(k, bounds)
    ingest_and_check(replica, batch)
    ingest_and_check(replica, [(r.data, None) for r in extra])  # may release waiting mutants
    release_and_check(replica, clock)


@fuzz(SQLITE_EXAMPLES)
@given(batch=mutant_batches, k=prefixes, extra=originals)
def test_ingest_mutations_sqlite(batch: list[Item], k: int, extra: list[Record]) -> None:
    clock = ManualClock(corpus().now)
    with (
        tempfile.TemporaryDirectory() as home,
        Replica.open(Path(home), clock=clock, synchronous="NORMAL") as replica,
    ):
        seeded(replica, k)
        ingest_and_check(replica, batch)
        ingest_and_check(replica, [(r.data, None) for r in extra])
        release_and_check(replica, clock)


@fuzz(DECODE_EXAMPLES)
@given(data=random_blobs | mutants, claim=st.none() | cids)
def test_decode_record_raises_only_convgraph_errors(data: bytes, claim: CID | None) -> None:
    outcome = decode_or_error(data, claim)
    if isinstance(outcome, Record):
        assert outcome.data == data and outcome.cid == CID.of_record(data)
        assert encode(outcome.to_map()) == data


# -------------------------------------------------------------- pinned hostile inputs


def test_loose_encoder_without_quirks_is_the_codec() -> None:
    """The fuzz's non-canonical encoder is only meaningful if its quirk-free form is exact."""
    for rec in corpus().records:
        assert loose_cbor(decode(rec.data)) == rec.data


@pytest.mark.parametrize("quirk", QUIRKS)
def test_noncanonical_reencodings_are_refused(quirk: str) -> None:
    replica, _ = memory_replica(0, QuarantineBounds())
    changed = 0
    for rec in corpus().records:
        data = loose_cbor(decode(rec.data), frozenset([quirk]))
        if data == rec.data:
            continue
        changed += 1
        with pytest.raises(DecodeError):
            decode_record(data)
        report = replica.ingest([data])
        assert len(report.rejected) == 1
        assert report.rejected[0].rule in {"canonical", "decode"}
    assert changed, f"quirk {quirk} changed no corpus record"
    assert replica.store.count() == 0


def test_oversized_and_deeply_nested_inputs_fail_cleanly() -> None:
    replica, _ = memory_replica(0, QuarantineBounds())
    base = corpus().records[0]
    nested = decode(base.data)
    nested["payload"]["meta"] = {"deep": "PLACEHOLDER"}
    resign(nested)
    template = encode(nested)
    hostile = [
        b"\x81" * 1_000_000 + b"\x00",  # a million nested arrays
        template.replace(encode("PLACEHOLDER"), b"\x81" * 200_000 + b"\x00"),  # deep, inside a payload
        b"\x5a\x00\x10\x00\x00" + b"\0" * (1 << 20),  # a byte string: over the record size limit
        b"\x5b\xff\xff\xff\xff\xff\xff\xff\xff",  # claims an 18 EB byte string
        b"\x9b\xff\xff\xff\xff\xff\xff\xff\xff",  # claims 2**64-1 array items
    ]
    report = replica.ingest(hostile)
    assert len(report.rejected) == len(hostile)
    for data in hostile:
        assert isinstance(decode_or_error(data), ConvgraphError)
    assert replica.store.count() == 0


def test_resigned_mutant_with_valid_signature_but_bad_schema_is_rejected() -> None:
    """The re-signing helper really yields authentic records: the schema, not the signature, fails."""
    replica, _ = memory_replica(0, QuarantineBounds())
    m = decode(corpus().records[0].data)
    m["payload"]["content"] = 42
    resign(m)
    report = replica.ingest([encode(m)])
    assert [r.rule for r in report.rejected] == ["schema"]
    m["payload"]["content"] = "fine"
    resign(m)
    assert replica.ingest([encode(m)]).accepted == [CID.of_record(encode(m))]


def _at_counter(counter: int, wall_ms: int) -> bytes:
    return sign_record(AUTHOR_B, conv="c9", seq=1, hlc=Hlc(wall_ms, counter), parents=(),
                       kind="user_message", payload={"content": "late"}).data


def test_ingest_survives_hlc_counter_at_max() -> None:
    clock = ManualClock(corpus().now)
    replica = Replica.in_memory(REPLICA_KEY, clock=clock)
    report = replica.ingest([_at_counter(MAX_COUNTER, clock() + DEFAULT_MAX_DRIFT_MS)])
    assert len(report.accepted) + len(report.rejected) == 1
    replica.write("c9", "user_message", {"content": "after"})
    assert replica.verify().ok
