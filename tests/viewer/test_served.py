"""The viewer behind `convgraph serve`: a signed request buys a session, which sees what its key
may read and nothing else; its event stream is the server's, and ends when read is revoked; its
record pages link what names what, as `convgraph view`'s do."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import cli_process
from convgraph import Replica, SigningKey
from convgraph.artifacts.diff import make_unified_diff
from convgraph.core.keys import actor_text
from convgraph.errors import ForbiddenError
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.sync.http import HttpRemote
from convgraph.viewer.app import CSP, artifact_url, conv_url, record_url
from server.live import LiveServer

READER, OUTSIDER, STRANGER = (SigningKey(bytes([i + 70]) * 32) for i in range(3))


@dataclass
class Served:
    url: str
    replica: Replica
    conv: str
    lobby_record: str


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    replica = Replica.open(tmp_path / "server")
    conv = replica.create("shared")
    replica.write(conv, "grant", {"grantee": READER.public, "rights": ["read"]})
    replica.say(conv, "user", "hello reader")
    lobby = replica.write("lobby", "user_message", {"role": "user", "content": "legacy words"})
    access = Access.from_rules([f"{actor_text(OUTSIDER.public)}=lobby:read"])
    with replica, LiveServer(create_app(replica, ServerConfig(access=access, poll_s=0.05))) as server:
        yield Served(server.url, replica, conv, str(lobby.cid))


@contextmanager
def _session(served: Served, key: SigningKey) -> Iterator[httpx.Client]:
    with HttpRemote(served.url, key, timeout_s=10) as remote:
        link = remote.viewer_link()
    with httpx.Client(base_url=served.url, timeout=10) as client:
        opened = client.get(link)
        assert opened.status_code == 303 and "token" not in opened.headers["location"]
        yield client


def test_a_session_sees_what_its_key_may_read(served: Served) -> None:
    with _session(served, READER) as reader, _session(served, OUTSIDER) as outsider:
        listed = reader.get("/view/")
        assert listed.status_code == 200 and listed.headers["content-security-policy"] == CSP
        assert served.conv in listed.text and "lobby" not in listed.text
        page = reader.get(conv_url(served.conv))
        assert page.status_code == 200 and "hello reader" in page.text
        assert reader.get(conv_url("lobby")).status_code == 404
        assert reader.get(record_url(served.lobby_record)).status_code == 404  # as if it did not exist

        listed = outsider.get("/view/")
        assert "lobby" in listed.text and served.conv not in listed.text
        assert outsider.get(conv_url(served.conv)).status_code == 404
        assert outsider.get(record_url(served.lobby_record)).status_code == 200
    with httpx.Client(base_url=served.url) as anonymous:
        assert anonymous.get("/view/").status_code == 403
        assert anonymous.get("/view/?token=" + "A" * 43).status_code == 403
    with HttpRemote(served.url, STRANGER, timeout_s=10) as remote, pytest.raises(ForbiddenError):
        remote.viewer_link()  # a key admitted nowhere gets no session


def test_a_session_follows_the_links_of_a_patch_and_no_further_than_it_may_read(served: Served) -> None:
    r = served.replica
    base = r.put(b"n = 1\n")
    patch = r.patch(served.conv, base, make_unified_diff(b"n = 1\n", b"n = 2\n", "n.py"))
    review = r.review(served.conv, patch.cid, "fine", verdict="approve")
    request = r.ask(served.conv, "merge?", subject=patch.cid, options=["merge"])
    decision = r.decide(served.conv, request.cid, "merge")
    with _session(served, READER) as reader, _session(served, OUTSIDER) as outsider:
        page = reader.get(record_url(patch.cid))
        assert page.status_code == 200 and page.headers["content-security-policy"] == CSP
        for href in (artifact_url(patch.cid, base), artifact_url(patch.cid, patch.payload["result"]),
                     record_url(review.cid), record_url(request.cid), record_url(decision.cid)):
            assert f'href="{href}"' in page.text, href
        file = reader.get(artifact_url(patch.cid, base))
        assert file.status_code == 200 and "n = 1" in file.text and f'href="{record_url(patch.cid)}"' in file.text
        assert f'href="{record_url(patch.cid)}"' in reader.get(record_url(review.cid)).text
        assert f'href="{record_url(patch.cid)}"' in reader.get(record_url(decision.cid)).text  # via its request
        assert outsider.get(artifact_url(patch.cid, base)).status_code == 404  # as if it did not exist
        assert outsider.get(record_url(patch.cid)).status_code == 404


def test_the_event_stream_carries_new_records_and_ends_at_a_revocation(served: Served) -> None:
    with _session(served, READER) as reader, reader.stream(
            "GET", conv_url(served.conv, page="c/events")) as events:
        assert events.status_code == 200
        lines = events.iter_lines()
        assert next(lines) == "event: ready"
        written = served.replica.say(served.conv, "assistant", "a new record")
        seen: list[str] = []
        while not any(str(written.cid) in line for line in seen):
            seen.append(next(lines))
            assert len(seen) < 50, seen
        assert seen[-2] == "event: record" or seen[-3] == "event: record"
        served.replica.write(served.conv, "revocation", {"grantee": READER.public, "rights": ["read"]})
        assert "event: forbidden" in list(lines)  # and then the stream ends
        assert reader.get(conv_url(served.conv)).status_code == 404


def test_convgraph_view_server_prints_a_link_for_its_key(served: Served, tmp_path: Path) -> None:
    home = tmp_path / "laptop"
    with Replica.open(home) as laptop:
        served.replica.write(served.conv, "grant", {"grantee": laptop.actor, "rights": ["read"]})
    done = cli_process.run(["--home", str(home), "view", "--server", served.url], text=True, timeout=60, check=True)
    link = done.stdout.strip().removeprefix("viewer: ")
    assert link.startswith(served.url + "/view/?token="), done.stdout
    with httpx.Client(follow_redirects=True, timeout=10) as browser:
        assert browser.get(served.url + conv_url(served.conv)).status_code == 403
        assert browser.get(link).status_code == 200
        assert "hello reader" in browser.get(served.url + conv_url(served.conv)).text
