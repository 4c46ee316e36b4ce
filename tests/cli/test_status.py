"""`convgraph status` on real replicas: conversations, held records, unseen findings, witnesses
with their last cosignature, and the last sync with each peer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_cli import init, run
from test_findings_cli import _rec

from convgraph import Config, ManualClock, Replica, SigningKey
from convgraph.cli import journal
from convgraph.integrity.cosignature import cosign_checkpoint

WITNESS = SigningKey(bytes(range(1, 33)))
COSIGNED_S = 1_800_000_000  # 2027-01-15 08:00:00 UTC


def _status(home: Path) -> dict[str, Any]:
    return json.loads(run(home, "status", "--json").stdout)  # type: ignore[no-any-return]


def test_an_empty_replica(tmp_path: Path) -> None:
    home = tmp_path / "a"
    init(home)
    s = _status(home)
    assert s["conversations"] == [] and s["syncs"] == {}
    assert s["quarantine"] == {"waiting_for_parents": 0, "held_for_clock": 0}
    assert s["findings"] == {"held": 0, "not_seen": []} and s["witnesses"] == {"k": 0, "witnesses": []}
    text = run(home, "status").stdout
    assert "conversations: 0" in text and "never synced" in text and "none configured" in text


def test_conversations_and_the_last_sync_with_each_peer(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    init(a, b)
    conv = run(a, "new", "plans", "--alias", "plans").stdout.strip()
    run(a, "say", "--conv", "plans", "first")
    run(a, "say", "--conv", "plans", "second")
    run(b, "sync", str(a))
    s = _status(b)
    (held,) = s["conversations"]
    assert held["conv"] == conv and held["records"] == 3 and held["heads"] == 1 and held["aliases"] == []
    assert isinstance(held["last_ms"], int)
    (peer,) = s["syncs"]
    assert peer == str(a.resolve()) and s["syncs"][peer]["ok"] is True and s["syncs"][peer]["received"] == 3
    first_sync = s["syncs"][peer]["at_ms"]
    run(b, "sync", str(tmp_path / "b" / ".." / "a"))  # the same peer by another path: one entry
    again = _status(b)["syncs"]
    assert list(again) == [peer] and again[peer]["at_ms"] >= first_sync and again[peer]["received"] == 0
    text = run(b, "status").stdout
    assert conv in text and "peers: 1" in text and str(a.resolve()) in text and "ok" in text
    ours = _status(a)["conversations"]
    assert ours[0]["aliases"] == ["plans"] and _status(a)["syncs"] == {}  # a was synced with, not syncing


def test_records_held_back_for_parents_and_for_the_clock(tmp_path: Path) -> None:
    home = tmp_path / "h"
    init(home)
    orphan_parent = _rec(1, text="never sent")
    orphan = _rec(2, orphan_parent, text="its parent is missing")
    ahead = Replica.in_memory(clock=ManualClock(now_ms=10**13))  # far beyond the allowed drift
    ahead_conv = ahead.create("from the future")
    with Replica.open(home, config=Config(legacy_writes=True)) as r:
        r.ingest([orphan.data])
        r.ingest([x.data for x in ahead.records(ahead_conv)])
    s = _status(home)
    assert s["quarantine"] == {"waiting_for_parents": 1, "held_for_clock": 1}
    assert "1 record(s) waiting for their parents, 1 held until the clock" in run(home, "status").stdout


def test_findings_are_unseen_until_findings_shows_them(tmp_path: Path) -> None:
    home = tmp_path / "r"
    init(home)
    first = _rec(1, text="one")
    yes, no = _rec(2, first, text="I said yes"), _rec(2, first, text="I said no")
    with Replica.open(home, config=Config(legacy_writes=True)) as replica:
        replica.ingest([first.data, yes.data, no.data])
    s = _status(home)
    assert s["findings"]["held"] == 1 and [f["kind"] for f in s["findings"]["not_seen"]] == ["record_equivocation"]
    assert "1 not yet seen, of 1 held" in run(home, "status").stdout
    assert _status(home)["findings"]["held"] == 1 and len(_status(home)["findings"]["not_seen"]) == 1  # no mark
    run(home, "findings")
    assert _status(home)["findings"] == {"held": 1, "not_seen": []}
    assert json.loads((home / journal.SEEN_FILE).read_text())["seen"] == [s["findings"]["not_seen"][0]["id"]]


def test_witnesses_and_their_last_cosignature(tmp_path: Path) -> None:
    home = tmp_path / "w"
    init(home)
    run(home, "witness", "add", "w1", WITNESS.public.hex(), "http://127.0.0.1:9")
    run(home, "witness", "add", "w2", SigningKey(bytes(range(2, 34))).public.hex(), "http://127.0.0.1:9")
    with Replica.open(home) as r:
        conv = r.create("witnessed")
        r.say(conv, "user", "hello")
        older = r.checkpoint(conv)
        r.write(conv, "attestation", cosign_checkpoint(WITNESS, older, COSIGNED_S - 60, name="w1").payload())
        r.say(conv, "user", "again")
        newer = r.checkpoint(conv)
        r.write(conv, "attestation", cosign_checkpoint(WITNESS, newer, COSIGNED_S, name="w1").payload())
    w = _status(home)["witnesses"]
    assert w["k"] == 0 and [x["name"] for x in w["witnesses"]] == ["w1", "w2"]
    last = w["witnesses"][0]["last_cosignature"]
    assert last["time"] == COSIGNED_S and last["checkpoint"] == str(newer.cid) and last["conv"] == conv
    assert w["witnesses"][1]["last_cosignature"] is None
    text = run(home, "status").stdout
    assert "last cosigned 2027-01-15 08:00:00Z" in text and "no cosignature held" in text


def test_a_damaged_journal_is_one_clear_error(tmp_path: Path) -> None:
    home = tmp_path / "d"
    init(home)
    (home / journal.SYNCS_FILE).write_text("{not json")
    proc = run(home, "status", ok=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert journal.SYNCS_FILE in proc.stderr and "delete it" in proc.stderr
