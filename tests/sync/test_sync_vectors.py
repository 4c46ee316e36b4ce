"""The sync wire vectors (tests/vectors/sync.json) against the encoder, the decoder and the responder.

Each message vector is checked both ways: its JSON form, read here into wire values, must
encode to its hex; its hex must decode to that JSON form. Each refusal must be refused with
its reason, by the decoder or (for `by: responder`) by a responder. The item-hash and
fingerprint vectors are recomputed with hashlib alone and with `keyset`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from convgraph.core.cid import CID
from convgraph.errors import ProtocolError
from convgraph.sync import wire
from convgraph.sync.keyset import INFINITY, Bound, fingerprint, item_hash
from convgraph.sync.wire import Base, Fate, Kind, Message, Mode, Range, Reported, Section, Want
from sync.fakes import FakePeer, responder
from vectors.loader import generator

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
DATA = json.loads((VECTORS / "sync.json").read_text("utf-8"))


def _bound(b: Any) -> Bound:
    return INFINITY if b == "inf" else Bound(b["wall"], bytes.fromhex(b["prefix"]))


def _hex(items: list[str]) -> tuple[bytes, ...]:
    return tuple(bytes.fromhex(x) for x in items)


def _entry(e: dict[str, Any]) -> Reported:
    return Reported(Fate[e["fate"]], bytes.fromhex(e.get("digest", "")), e.get("index", 0), e.get("rule", ""),
                    _hex(e.get("parents", [])), e.get("retry_ms", 0))


def _section(s: dict[str, Any]) -> Section:
    summary, tip = s.get("summary"), s.get("tip")
    return Section(
        s["conv"],
        count=summary["count"] if summary else None, strong=bytes.fromhex(summary["strong"]) if summary else b"",
        tip=(tip["wall"], bytes.fromhex(tip["digest"])) if tip else None,
        probes=tuple((_bound(p["bound"]), bytes.fromhex(p["fp"])) for p in s.get("probes", [])),
        ranges=tuple(Range(_bound(r["upper"]), Mode[r["mode"]], bytes.fromhex(r.get("fp", "")), _hex(r.get("hashes", [])))
                     for r in s["ranges"]) if "ranges" in s else None,
        wants=tuple(Want(_bound(w["lower"]), _bound(w["upper"]), _hex(w["hashes"])) for w in s.get("wants", [])),
        records=_hex(s.get("records", [])), gone=_hex(s.get("gone", [])),
        report=tuple(_entry(e) for e in s["report"]) if "report" in s else None,
        base=Base(*(bytes.fromhex(s["base"][k]) for k in ("checkpoint", "snapshot", "cover"))) if "base" in s else None,
        statement=bytes.fromhex(s["statement"]) if "statement" in s else None, gossip=_hex(s.get("gossip", [])),
        needs=tuple(CID.parse(c) for c in s.get("needs", [])),
        blocks=tuple((CID.parse(b["cid"]), bytes.fromhex(b["data"])) for b in s.get("blocks", [])),
    )


def _message(m: dict[str, Any]) -> Message:
    return Message(Kind[m["kind"]], bytes.fromhex(m["salt"]), tuple(_section(s) for s in m["sections"]),
                   m.get("version", 4))


@pytest.mark.parametrize("vector", DATA["messages"], ids=lambda v: v["name"])
def test_each_message_encodes_to_its_hex_and_decodes_to_its_values(vector: dict[str, Any]) -> None:
    message = _message(vector["message"])
    assert wire.encode(message).hex() == vector["hex"]
    assert wire.decode(bytes.fromhex(vector["hex"])) == message


@pytest.mark.parametrize("vector", DATA["refusals"], ids=lambda v: v["name"])
def test_each_refusal_is_refused_with_its_reason(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["hex"])
    refuse = wire.decode if vector["by"] == "decoder" else responder(FakePeer()).receive
    with pytest.raises(ProtocolError) as caught:
        refuse(data)
    assert caught.value.reason == vector["reason"]


def test_the_vectors_cover_each_kind_edge_and_reason() -> None:
    names = {v["name"] for v in DATA["messages"]}
    assert {"initiate_empty_set", "initiate_one_key", "reply_one_infinite_range", "continue_chained_wants",
            "continue_want_below_every_key", "reply_report_each_fate", "continue_base",
            "reply_base_and_report"} <= names
    assert {v["message"]["kind"] for v in DATA["messages"]} == {k.name for k in Kind}
    fates = {e["fate"] for v in DATA["messages"] for s in v["message"]["sections"] for e in s.get("report", [])}
    assert fates == {f.name for f in Fate}
    assert {v["reason"] for v in DATA["refusals"]} == {"version", "kind", "part", "malformed", "limit"}


def test_chained_want_bounds_are_deltas_along_the_whole_part() -> None:
    """Per-want chains would read 100, 200, 500, 600 from these bytes: the chain runs through."""
    [vector] = [v for v in DATA["messages"] if v["name"] == "continue_chained_wants"]
    data = bytes.fromhex(vector["hex"])
    # after version, kind, salt, one section named "c", flags 0x10 and one count byte: 2 wants
    assert data[12:15] == b"c\x10\x02"
    assert data[15:19] == bytes([0x65, 0x00, 0x65, 0x00])  # lower 100 = 0 + 101 - 1, upper 200 = 100 + 101 - 1


def test_item_hashes_and_fingerprints_match_hashlib() -> None:
    for v in DATA["item_hashes"]:
        salt, digest = bytes.fromhex(v["salt"]), bytes.fromhex(v["digest"])
        assert hashlib.blake2b(digest, key=salt, digest_size=3).hexdigest() == v["hash"] == item_hash(salt, digest).hex()
    for v in DATA["fingerprints"]:
        total = sum(int.from_bytes(bytes.fromhex(d), "little") for d in v["digests"]) % (1 << 256)
        n = len(v["digests"])
        assert n < 128  # one varint byte
        body = hashlib.sha256(total.to_bytes(32, "little") + bytes([n])).hexdigest()
        assert body[:8] == v["fp4"] == fingerprint(total, n, 4).hex()
        assert body[:32] == v["fp16"] == fingerprint(total, n, 16).hex()


def test_generator_reproduces_the_committed_file_exactly() -> None:
    gen = generator("generate_sync.py")
    assert gen.render(gen.build()) == (VECTORS / "sync.json").read_text("utf-8")
