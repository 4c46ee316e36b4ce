"""The badges: who may write and the records the authority projection excludes, from that
projection; the findings held, from the replica's witnessed history. Pages through the app
in process (no browser is needed to read HTML)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from convgraph.core.keys import fingerprint
from convgraph.core.record import sign_record
from convgraph.replica import Replica
from convgraph.sync.live import Hub
from convgraph.sync.local import sync_replicas
from convgraph.viewer.app import Everything, Viewer, conv_url, record_url, standalone
from convgraph.viewer.sessions import Sessions


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[Replica]:
    with Replica.open(tmp_path / "owner") as owner, Replica.open(tmp_path / "phone") as phone:
        conv = owner.create("badges")
        owner.write(conv, "grant", {"grantee": phone.actor, "rights": ["read", "write"]})
        sync_replicas(owner, phone, [conv])
        owner.write(conv, "revocation", {"grantee": phone.actor, "rights": ["read"], "reason": "lost"})
        phone.say(conv, "user", "written by whoever found the phone")  # it has not seen the revocation
        sync_replicas(owner, phone, [conv])
        said = owner.say(conv, "user", "the real words")
        twin = sign_record(owner.key, conv=conv, seq=said.seq, hlc=(said.hlc.wall_ms + 1, 0), parents=said.parents,
                           kind="user_message", payload={"role": "user", "content": "other words, same seq"})
        assert owner.ingest([twin.data]).equivocations
        yield owner


def _client(replica: Replica) -> TestClient:
    sessions = Sessions(lambda: int(time.time() * 1000))
    token = sessions.issue(None, expires=False)
    client = TestClient(standalone(Viewer(replica, sessions, lambda _: Everything(), Hub(), threading.RLock())))
    assert client.get(f"/view/?token={token}", follow_redirects=False).status_code == 303
    return client


def test_excluded_records_writers_and_findings_are_shown(owner: Replica) -> None:
    (conv,) = owner.conversations()
    (excluded,) = owner.authority(conv).excluded()
    with _client(owner) as client:
        listed = client.get("/view/").text
        assert re.search(r'class="badge bad findings">1 finding<', listed)
        page = client.get(conv_url(conv)).text
        assert "1 excluded" in page and "1 finding" in page and "record_equivocation" in page
        writers = re.search(r"may write: (.*?)</span>", page)
        assert writers is not None and fingerprint(owner.actor)[:8] in writers.group(1)
        assert writers.group(1).count("<code>") == 1  # the phone lost its grant
        node = re.search(rf'<a class="node excluded[^"]*" href="{record_url(excluded.cid)}"', page)
        assert node is not None
        assert "written by whoever found the phone" not in page.split('class="transcript"')[1]
        detail = client.get(record_url(excluded.cid)).text
        assert "excluded by the authority projection: revoked_concurrently" in detail


def test_a_conversation_held_nowhere_is_not_found(owner: Replica) -> None:
    with _client(owner) as client:
        assert client.get(conv_url("no such conversation")).status_code == 404
        assert client.get(conv_url("no such conversation", page="c/live")).status_code == 404
        assert client.get("/view/r/bafyreinotacid").status_code == 404


def test_a_compacted_record_shows_its_header_and_where_its_content_went(tmp_path: Path) -> None:
    with Replica.open(tmp_path / "alone") as alone:
        conv = alone.create("compacted")
        old = alone.say(conv, "user", "soon only in a snapshot")
        alone.checkpoint(conv, compact=True)
        assert alone.store.get(old.cid) is None
        with _client(alone) as client:
            detail = client.get(record_url(old.cid)).text
    assert "compacted: only the header is held" in detail and str(old.cid) in detail
    assert 'id="payload"' not in detail


def test_a_stale_decision_page_says_which_newer_patch_no_review_saw(tmp_path: Path) -> None:
    from convgraph.artifacts.diff import make_unified_diff

    with Replica.open(tmp_path / "r") as r:
        conv = r.create("stale")
        first = r.patch(conv, r.put(b"n = 1\n"), make_unified_diff(b"n = 1\n", b"n = 2\n", "n.py"))
        r.review(conv, first.cid, "fine", verdict="approve")
        ask = r.ask(conv, "merge?", subject=first.cid, options=["merge"], reviews=1)
        second = r.patch(conv, first.payload["result"], make_unified_diff(b"n = 2\n", b"n = 3\n", "n.py"))
        decision = r.decide(conv, ask.cid, "merge")
        client = _client(r)
        page = client.get(record_url(decision.cid)).text
        notes = re.findall(r'<p class="badge warn authority-note">([^<]*)</p>', page)
        assert len(notes) == 1 and notes[0].startswith("stale:") and str(second.cid) in notes[0]
        assert "authority-note" not in client.get(record_url(ask.cid)).text
