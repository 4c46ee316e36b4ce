"""Cosignatures as attestation records (docs/integrity.md §7.4) and as C2SP lines (§8)."""

from __future__ import annotations

import dataclasses

import pytest

from convgraph import ManualClock, Replica, SigningKey
from convgraph.core.cid import CID
from convgraph.errors import NoteError
from convgraph.integrity import cosignature as cosig
from convgraph.integrity import note

CONV = "c"


@pytest.fixture
def alice() -> Replica:
    r = Replica.in_memory(SigningKey(b"\x01" * 32), clock=ManualClock())
    for i in range(2):
        r.write(CONV, "user_message", {"content": str(i)})
    return r


def test_cosignature_travels_as_an_attestation_and_verifies(alice: Replica) -> None:
    cp = alice.checkpoint(CONV)
    wkey = SigningKey(b"\x09" * 32)
    c = cosig.cosign_checkpoint(wkey, cp, 1_700_000_000)
    assert c.name == note.witness_key_name(wkey.public)
    record = alice.write(CONV, "attestation", c.payload())
    got = cosig.cosignature_of_record(record)
    assert got == c and cosig.verify(got, cp)
    assert cosig.cosignature_of_map(c.to_map()) == c
    assert not cosig.verify(dataclasses.replace(c, time=c.time + 1), cp)
    assert not cosig.verify(dataclasses.replace(c, sig=bytes(64)), cp)
    assert not cosig.verify(dataclasses.replace(c, key=alice.actor), cp)
    later = alice.checkpoint(CONV)
    assert not cosig.verify(c, later)  # names another checkpoint
    assert not cosig.verify(dataclasses.replace(c, checkpoint=later.cid), later)  # signed another body
    # the same cosignature as a C2SP line in the checkpoint's signed note
    body = note.checkpoint_body(cp).text
    signed = note.export_note(body, note.sign(alice.key, note.actor_key_name(alice.actor), body), [c.line()])
    keys = [note.NoteKey(c.name, wkey.public, note.COSIGNATURE_V1)]
    assert [v.time for v in note.verify_note(signed, keys)] == [1_700_000_000]
    assert cosig.cosignature_of_line(cp.cid, wkey.public, signed.signatures[1]) == c
    with pytest.raises(NoteError):
        cosig.cosignature_of_line(cp.cid, wkey.public, signed.signatures[0])


@pytest.mark.parametrize(
    "change",
    [
        {"statement": "cosignature/v2"},
        {"claims": {"name": "w", "key": bytes(32), "time": 1}},
        {"claims": {"name": "w", "key": bytes(31), "time": 1, "sig": bytes(64)}},
        {"claims": {"name": "w", "key": bytes(32), "time": -1, "sig": bytes(64)}},
        {"claims": {"name": "w", "key": bytes(32), "time": 1 << 63, "sig": bytes(64)}},
        {"claims": {"name": "w", "key": bytes(32), "time": True, "sig": bytes(64)}},
        {"claims": {"name": "w w", "key": bytes(32), "time": 1, "sig": bytes(64)}},
        {"claims": {"name": "w", "key": bytes(32), "time": 1, "sig": bytes(63)}},
        {"claims": {"name": "w", "key": bytes(32), "time": 1, "sig": bytes(64), "x": 1}},
    ],
)
def test_malformed_cosignature_payloads_are_refused(change: dict[str, object]) -> None:
    good = cosig.Cosignature(CID.of_record(b"x"), "w", bytes(32), 1, bytes(64))
    assert cosig.cosignature_of_payload(good.payload()) == good
    with pytest.raises(NoteError) as err:
        cosig.cosignature_of_payload({**good.payload(), **change})
    assert err.value.reason == "format"
