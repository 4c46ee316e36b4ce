"""A sync initiator written from docs/sync.md alone, against a real `convgraph serve`.

Everything on the wire here comes from the spec: the grammar (version 3, so it is also the
older peer of docs/sync.md's compatibility promise: a server answers it in version 3), the
fingerprints, the item hashes, the request signature, the signed statement of every reply
section (docs/integrity.md §2, checked with dag_cbor and PyNaCl), and the wire vectors
(tests/vectors/sync.json) it is checked against first. It uses no convgraph sync code:
only httpx, hashlib, PyNaCl and dag_cbor, and convgraph's `sign_record` and `Replica` to
make records. It lists every differing range as IDS instead of splitting it, which the spec
allows (the peer resolves an id list completely), so its sessions take a few round trips.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dag_cbor
import httpx
import nacl.signing
import pytest

from convgraph import Replica, SigningKey
from convgraph.core.hlc import Hlc
from convgraph.core.record import sign_record
from servers import ServeProcess

SEED = bytes(range(32))
INF = None  # the bound above every key
VECTORS = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "sync.json").read_text("utf-8"))
Bound = tuple[int, bytes] | None
Key = tuple[int, bytes]


# ---- the grammar ------------------------------------------------------------------------

def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        assert self.pos + n <= len(self.data), "truncated"
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def byte(self) -> int:
        return self.take(1)[0]

    def varint(self) -> int:
        value = shift = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def bound(self, chain: list[int]) -> tuple[Bound, int]:
        delta, tag = self.varint(), self.byte()
        if delta == 0:
            return INF, tag >> 6
        chain[0] += delta - 1
        return (chain[0], self.take(tag & 0x3F)), tag >> 6


def write_bound(b: Bound, chain: list[int], mode: int = 0) -> bytes:
    if b is None:
        return bytes((0, mode << 6))
    delta = b[0] - chain[0] + 1
    chain[0] = b[0]
    return varint(delta) + bytes((mode << 6 | len(b[1]),)) + b[1]


def message(kind: int, salt: bytes, sections: list[tuple[str, int, bytes]], version: int = 3) -> bytes:
    """sections: (conv, flags, the parts' bytes already in order)."""
    out = bytes((version, kind)) + salt + varint(len(sections))
    for conv, flags, body in sorted(sections):
        out += varint(len(conv.encode())) + conv.encode() + varint(flags) + body
    return out


def parse_reply(data: bytes, version: int = 3) -> tuple[bytes, dict[str, dict[str, Any]]]:
    r = Reader(data)
    assert r.take(2) == bytes((version, 2)), f"a version-{version} REPLY"
    salt, found = r.take(8), {}
    for _ in range(r.varint()):
        conv, flags, s = r.take(r.varint()).decode(), r.varint(), dict[str, Any]()
        if flags & 1:
            s["summary"] = (r.varint(), r.take(16))
        if flags & 2:
            s["tip"] = (r.varint(), r.take(32))
        assert not flags & 4, "no probes in a reply"
        if flags & 8:
            chain, lo, s["ranges"] = [0], (0, b""), []
            for _ in range(r.varint()):
                upper, mode = r.bound(chain)
                payload: Any = None
                if mode == 1:
                    payload = r.take(4)
                elif mode == 2:
                    payload = [r.take(3) for _ in range(r.varint())]
                s["ranges"].append((lo, upper, mode, payload))
                lo = upper
        if flags & 16:
            chain, s["wants"] = [0], []
            for _ in range(r.varint()):
                lower, _ = r.bound(chain)
                upper, _ = r.bound(chain)  # one chain through the whole part
                s["wants"].append((lower, upper, [r.take(3) for _ in range(r.varint())]))
        if flags & 32:
            s["records"] = [r.take(r.varint()) for _ in range(r.varint())]
        if flags & 64:
            s["gone"] = [r.take(32) for _ in range(r.varint())]
        if flags & 128:
            s["report"] = [entry(r) for _ in range(r.varint())]
        if flags & 256:
            s["base"] = [r.take(r.varint()) for _ in range(3)]  # checkpoint, snapshot, cover
        assert flags & 512, "every reply section carries a statement"
        s["statement"] = r.take(r.varint())
        if flags & 1024:
            s["gossip"] = [r.take(r.varint()) for _ in range(r.varint())]
        assert version == 4 or not flags & (2048 | 4096), "no artifact parts in version 3"
        if flags & 2048:
            s["needs"] = [r.take(33) for _ in range(r.varint())]  # codec byte and digest
        if flags & 4096:
            s["blocks"] = [(r.take(33), r.take(r.varint())) for _ in range(r.varint())]
        found[conv] = s
    assert r.pos == len(data)
    return salt, found


def entry(r: Reader) -> tuple[int, Any, Any]:
    fate = r.byte()
    name = r.varint() if fate == 7 else r.take(32)
    extra: Any = None
    if fate in (6, 7):
        extra = r.take(r.varint()).decode()
    elif fate == 4:
        extra = [r.take(32) for _ in range(r.varint())]
    elif fate == 5:
        extra = r.varint()
    return fate, name, extra


def statement(data: bytes, conv: str) -> dict[str, Any]:
    """docs/integrity.md §2: canonical DAG-CBOR, exactly its keys, signed under its domain."""
    value = dag_cbor.decode(data)
    assert isinstance(value, dict) and dag_cbor.encode(value) == data
    assert set(value) - {"stored"} == {"v", "conv", "count", "heads", "key", "time", "sig"}
    unsigned = {k: v for k, v in value.items() if k != "sig"}
    nacl.signing.VerifyKey(value["key"]).verify(b"convgraph/statement/v1\n" + dag_cbor.encode(unsigned),
                                                value["sig"])
    assert value["v"] == 1 and value["conv"] == conv
    return value


# ---- the set -----------------------------------------------------------------------------

def fp(digests: list[bytes], length: int) -> bytes:
    total = sum(int.from_bytes(d, "little") for d in digests) % (1 << 256)
    return hashlib.sha256(total.to_bytes(32, "little") + varint(len(digests))).digest()[:length]


def item(salt: bytes, digest: bytes) -> bytes:
    return hashlib.blake2b(digest, key=salt, digest_size=3).digest()


def below(key: Key, b: Bound) -> bool:
    return b is None or key < b


@dataclass
class Side:
    records: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)  # digest -> (wall, bytes)

    def add(self, data: bytes) -> None:
        self.records[hashlib.sha256(data).digest()] = (dag_cbor.decode(data)["hlc"][0], data)  # type: ignore[index, call-overload]

    def keys(self, lo: Bound = (0, b""), hi: Bound = INF) -> list[Key]:
        every = sorted((w, d) for d, (w, _) in self.records.items())
        return [k for k in every if not below(k, lo) and below(k, hi)]

    def strong(self) -> bytes:
        return fp([d for _, d in self.keys()], 16)

    def adopt(self, base: list[bytes]) -> None:
        """docs/sync.md, *Compacted history*: the snapshot is the one the checkpoint names, and
        the cover's headers join the set as keys without bytes (docs/format.md §11.5)."""
        checkpoint, snapshot, cover = base
        payload = dag_cbor.decode(checkpoint)["payload"]  # type: ignore[index, call-overload]
        assert bytes(payload["snapshot"])[-32:] == hashlib.sha256(snapshot).digest()
        headers = dag_cbor.decode(cover)["headers"]  # type: ignore[index, call-overload]
        assert len(headers) == payload["count"] == len(dag_cbor.decode(snapshot)["entries"])  # type: ignore[index, call-overload]
        for h in headers:
            self.records[bytes(h["cid"])[-32:]] = (h["hlc"][0], b"")
        self.add(checkpoint)


# ---- HTTP --------------------------------------------------------------------------------

def signed(key: nacl.signing.SigningKey, method: str, target: str, body: bytes) -> dict[str, str]:
    stamp, nonce = str(int(time.time() * 1000)), os.urandom(12).hex()
    text = f"convgraph/http/v1\n{method}\n{target}\n{hashlib.sha256(body).hexdigest()}\n{stamp}\n{nonce}\n"
    actor = base64.b32encode(bytes(key.verify_key)).decode().lower().rstrip("=")
    return {"X-Convgraph-Actor": actor, "X-Convgraph-Timestamp": stamp, "X-Convgraph-Nonce": nonce,
            "X-Convgraph-Signature": key.sign(text.encode()).signature.hex(),
            "Content-Type": "application/vnd.convgraph.sync"}


def post(url: str, body: bytes) -> httpx.Response:
    key = nacl.signing.SigningKey(SEED)
    return httpx.post(url + "/v1/sync", content=body, headers=signed(key, "POST", "/v1/sync", body), timeout=30)


# ---- a session ---------------------------------------------------------------------------

@dataclass
class Outcome:
    round_trips: int = 0
    reported: list[tuple[int, Any, Any]] = field(default_factory=list)
    modes: set[int] = field(default_factory=set)  # range modes the server sent
    bases: int = 0
    converged: bool = False
    statements: list[dict[str, Any]] = field(default_factory=list)


def session(url: str, me: Side, conv: str) -> Outcome:
    salt, out = os.urandom(8), Outcome()
    keys = me.keys()
    body = varint(len(keys)) + me.strong()
    flags = 1
    if keys:
        flags |= 2
        body += varint(keys[-1][0]) + keys[-1][1]
    data = message(1, salt, [(conv, flags, body)])
    theirs = b""
    while data is not None:
        answer = post(url, data)
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/vnd.convgraph.sync"
        out.round_trips += 1
        got_salt, sections = parse_reply(answer.content)
        assert got_salt == salt  # the salt repeats in every message
        s = sections[conv]
        theirs = s["summary"][1]
        out.statements.append(statement(s["statement"], conv))
        assert out.statements[-1]["count"] == s["summary"][0]
        out.reported += s.get("report", [])
        out.modes |= {mode for _, _, mode, _ in s.get("ranges", [])}
        if "base" in s:
            me.adopt(s["base"])
            out.bases += 1
        for rec in s.get("records", []):
            me.add(rec)
        data = _next(salt, me, conv, s)
    out.converged = theirs == me.strong()
    return out


def _next(salt: bytes, me: Side, conv: str, s: dict[str, Any]) -> bytes | None:
    """Resolve the reply's ranges and wants: IDS for a differing range, records for wants."""
    arrived = {item(salt, hashlib.sha256(r).digest()) for r in s.get("records", [])}
    ranges, wants, push = bytearray(), bytearray(), list[bytes]()
    rchain, wchain, nranges, nwants, differs = [0], [0], 0, 0, False
    for lo, hi, mode, payload in s.get("ranges", []):
        mine = [d for _, d in me.keys(lo, hi)]
        if mode == 1 and payload != fp(mine, 4):  # differs: list every key we hold there
            hashes = [item(salt, d) for d in mine]
            ranges += write_bound(hi, rchain, 2) + varint(len(hashes)) + b"".join(hashes)
            differs = True
        else:
            ranges += write_bound(hi, rchain, 0)
        nranges += 1
        if mode == 2:  # resolve per key, never through a map from hash to key
            theirs = set(payload)
            push += [d for d in mine if item(salt, d) not in theirs]
            held = {item(salt, d) for d in mine}
            lacking = [h for h in payload if h not in held and h not in arrived]
            if lacking:
                wants += write_bound(lo, wchain) + write_bound(hi, wchain) + varint(len(lacking)) + b"".join(lacking)
                nwants += 1
    for lo, hi, hashes in s.get("wants", []):
        push += [d for _, d in me.keys(lo, hi) if item(salt, d) in set(hashes)]
    flags, body = 0, b""
    if differs:
        flags, body = flags | 8, body + varint(nranges) + ranges
    if nwants:
        flags, body = flags | 16, body + varint(nwants) + wants
    if push:
        # a minimal initiator holds no base of its own: it never pushes a header-only key
        records = [me.records[d][1] for d in sorted(set(push), key=lambda d: me.records[d][0]) if me.records[d][1]]
        flags, body = flags | 32, body + varint(len(records)) + b"".join(varint(len(r)) + r for r in records)
    return message(3, salt, [(conv, flags, body)]) if flags else None


# ---- the tests ---------------------------------------------------------------------------

def test_this_initiator_reads_and_writes_the_wire_vectors() -> None:
    for v in VECTORS["messages"]:
        data = bytes.fromhex(v["hex"])
        if v["message"]["kind"] == "REPLY":
            _, sections = parse_reply(data, v["message"].get("version", 4))
            assert sorted(sections) == [s["conv"] for s in v["message"]["sections"]]
    [chained] = [v for v in VECTORS["messages"] if v["name"] == "continue_chained_wants"]
    chain, wants = [0], b""
    for w in chained["message"]["sections"][0]["wants"]:
        hashes = [bytes.fromhex(h) for h in w["hashes"]]
        bounds = [(b["wall"], bytes.fromhex(b["prefix"])) for b in (w["lower"], w["upper"])]
        wants += b"".join(write_bound(b, chain) for b in bounds) + varint(len(hashes)) + b"".join(hashes)
    salt = bytes.fromhex(chained["message"]["salt"])
    assert message(3, salt, [("c", 16, varint(2) + wants)], version=4).hex() == chained["hex"]
    for v in VECTORS["item_hashes"]:
        assert item(bytes.fromhex(v["salt"]), bytes.fromhex(v["digest"])).hex() == v["hash"]
    for v in VECTORS["fingerprints"]:
        assert fp([bytes.fromhex(d) for d in v["digests"]], 16).hex() == v["fp16"]


@pytest.fixture
def served(tmp_path: Path) -> tuple[Replica, str, Path]:
    """The server's replica (the test closes it before serving), the client's actor, its home."""
    home = tmp_path / "server"
    server = Replica.open(home)
    actor = base64.b32encode(bytes(nacl.signing.SigningKey(SEED).verify_key)).decode().lower().rstrip("=")
    return server, actor, home


def _mine(n: int, start: int = 1_700_000_000_000) -> list[bytes]:
    key, out, parents = SigningKey(SEED), [], list[Any]()
    for i in range(n):
        rec = sign_record(key, conv="c", seq=i + 1, hlc=Hlc(start + i, 0), parents=parents, kind="user_message",
                          payload={"content": f"interop {i}"})
        out.append(rec.data)
        parents = [rec.cid]
    return out


def test_pull(served: tuple[Replica, str, Path]) -> None:
    server, actor, home = served
    for i in range(5):
        server.say("c", "user", f"server {i}")
    server.close()
    me = Side()
    with ServeProcess(home, "--allow", f"{actor}=c") as proc:
        out = session(proc.url, me, "c")
    assert out.converged and len(me.records) == 5 and out.round_trips == 1  # the missing tail in the first answer


def test_push_reports_each_record_by_its_digest(served: tuple[Replica, str, Path]) -> None:
    server, actor, home = served
    server.close()
    me, pushed = Side(), _mine(3)
    for data in pushed:
        me.add(data)
    with ServeProcess(home, "--allow", f"{actor}=c") as proc:
        out = session(proc.url, me, "c")
        key = nacl.signing.SigningKey(SEED)
        cid = "b" + base64.b32encode(b"\x01\x71\x12\x20" + hashlib.sha256(pushed[0]).digest()).decode().lower().rstrip("=")
        got = httpx.get(proc.url + f"/v1/records/{cid}", headers=signed(key, "GET", f"/v1/records/{cid}", b""))
    assert out.converged
    assert out.reported == [(1, hashlib.sha256(d).digest(), None) for d in pushed]  # 1: ACCEPTED
    receipt = out.statements[-1]  # the reply to the push: a receipt naming every record stored
    assert sorted(bytes(c)[-32:] for c in receipt["stored"]) == sorted(hashlib.sha256(d).digest() for d in pushed)
    assert [bytes(c)[-32:] for c in receipt["heads"]] == [hashlib.sha256(pushed[-1]).digest()]
    assert receipt["count"] == 3
    assert got.status_code == 200 and got.content == pushed[0]
    assert got.headers["content-type"] == "application/vnd.ipld.dag-cbor"


def test_both_ways_through_fingerprints_and_id_lists(served: tuple[Replica, str, Path]) -> None:
    server, actor, home = served
    for i in range(300):  # over the first answer's 256: the server splits into fingerprints
        server.say("c", "user", f"server {i}")
    server.close()
    me = Side()
    for data in _mine(20):
        me.add(data)
    with ServeProcess(home, "--allow", f"{actor}=c") as proc:
        first = session(proc.url, me, "c")
        again = session(proc.url, me, "c")
    assert first.converged and len(me.records) == 320 and 1 in first.modes  # FINGERPRINT ranges came
    assert sorted(e[0] for e in first.reported) == [1] * 20
    assert again.converged and again.round_trips == 1 and again.reported == []


def test_a_version_1_message_is_refused_with_its_reason(served: tuple[Replica, str, Path]) -> None:
    server, actor, home = served
    server.close()
    [v1] = [v for v in VECTORS["refusals"] if v["name"] == "version_1"]
    with ServeProcess(home, "--allow", f"{actor}=c") as proc:
        answer = post(proc.url, bytes.fromhex(v1["hex"]))
    assert answer.status_code == 400 and answer.json()["error"] == "protocol" and answer.json()["reason"] == "version"


def test_pull_a_compacted_conversation_comes_with_its_base(served: tuple[Replica, str, Path]) -> None:
    server, actor, home = served
    for i in range(6):
        server.say("c", "user", f"server {i}")
    server.checkpoint("c", compact=True)
    server.say("c", "user", "after the checkpoint")
    server.close()
    me = Side()
    with ServeProcess(home, "--allow", f"{actor}=c") as proc:
        first = session(proc.url, me, "c")
        again = session(proc.url, me, "c")
    assert first.converged and first.bases == 1 and len(me.records) == 8  # 6 headers, checkpoint, 1 after
    assert sum(1 for _, data in me.records.values() if data) == 2
    assert again.converged and again.round_trips == 1 and again.bases == 0
