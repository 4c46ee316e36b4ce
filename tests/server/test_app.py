"""The sync server over real HTTP on 127.0.0.1: sync, records, heads, live events, refusals.

Every test runs a uvicorn server in a thread (`live.py`) in front of a SQLite replica and
talks to it with the real client or with raw httpx requests.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from convgraph import Draft, ManualClock, Replica, SigningKey, transcript_bytes
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import actor_text
from convgraph.core.record import sign_record
from convgraph.errors import ForbiddenError, ProtocolError, UnauthenticatedError
from convgraph.server import sync_endpoint as app_module
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.sync import auth, wire
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from server.live import LiveServer

WRITER, READER, STRANGER = (SigningKey(bytes([i]) * 32) for i in (1, 2, 3))


def salts() -> bytes:
    return os.urandom(8)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Replica, str]]:
    replica = Replica.open(tmp_path / "server")
    access = Access.from_rules([f"{actor_text(WRITER.public)}=c", f"{actor_text(WRITER.public)}=d",
                                f"{actor_text(READER.public)}=c:read"])
    config = ServerConfig(access=access, max_body=1 << 20, body_timeout_s=1.0, heartbeat_s=0.2, poll_s=0.1)
    with LiveServer(create_app(replica, config)) as live:
        yield replica, live.url
    replica.close()


def client(key: SigningKey = WRITER) -> Replica:
    return Replica.in_memory(key)


def sync(replica: Replica, url: str, convs: list[str], key: SigningKey | None = None) -> object:
    with HttpRemote(url, key or replica.key) as remote:
        return synchronize(ReplicaPeer(replica), remote.exchange, convs, salts=salts)


def test_two_clients_converge_through_the_server(served: tuple[Replica, str]) -> None:
    server, url = served
    a, b = client(), client()
    for i in range(40):
        a.say("c", "user", f"a {i}")
        b.say("c", "assistant", f"b {i}")
    assert sync(a, url, ["c"]).converged  # type: ignore[attr-defined]
    assert sync(b, url, ["c"]).converged  # type: ignore[attr-defined]
    report = sync(a, url, ["c"])
    assert report.converged and report.convs["c"].accepted_here == 40  # type: ignore[attr-defined]
    assert transcript_bytes(a.transcript("c")) == transcript_bytes(b.transcript("c")) \
        == transcript_bytes(server.transcript("c"))
    assert server.verify().ok


def test_unsigned_stale_or_replayed_requests_get_401_with_a_reason(served: tuple[Replica, str]) -> None:
    _, url = served
    message = wire.encode(wire.Message(wire.Kind.INITIATE, b"s" * 8, ()))
    bare = httpx.post(url + "/v1/sync", content=message)
    assert bare.status_code == 401 and "missing header" in bare.json()["reason"]
    assert bare.headers["www-authenticate"].startswith("Convgraph-Signature")
    stale = auth.sign(WRITER, "POST", "/v1/sync", message, now_ms=int(time.time() * 1000) - 600_000, nonce="n" * 16)
    answer = httpx.post(url + "/v1/sync", content=message, headers=stale)
    assert answer.status_code == 401 and "window" in answer.json()["reason"]
    fresh = auth.sign(WRITER, "POST", "/v1/sync", message, now_ms=int(time.time() * 1000), nonce="r" * 16)
    assert httpx.post(url + "/v1/sync", content=message, headers=fresh).status_code == 200
    again = httpx.post(url + "/v1/sync", content=message, headers=fresh)
    assert again.status_code == 401 and "already used" in again.json()["reason"]
    tampered = httpx.post(url + "/v1/sync", content=message + b"x", headers={**fresh, auth.NONCE: "t" * 16})
    assert tampered.status_code == 401 and "does not verify" in tampered.json()["reason"]


def test_a_key_without_access_gets_403_never_an_empty_answer(served: tuple[Replica, str]) -> None:
    server, url = served
    server.say("c", "user", "secret")
    stranger = client(STRANGER)
    with pytest.raises(ForbiddenError) as caught:
        sync(stranger, url, ["c"])
    assert "admitted to no conversation" in caught.value.reason
    with pytest.raises(ForbiddenError), HttpRemote(url, STRANGER) as remote:
        remote.heads("c")
    with pytest.raises(ForbiddenError), HttpRemote(url, READER) as remote:
        remote.heads("d")
    with pytest.raises(ForbiddenError) as caught:
        sync(client(READER), url, ["c", "d"])
    assert "may not read conversation(s) d" in caught.value.reason
    assert stranger.records("c") == []


def test_a_read_only_key_reads_but_its_records_are_refused(served: tuple[Replica, str]) -> None:
    server, url = served
    server.say("c", "user", "from the server")
    reader = client(READER)
    reader.say("c", "user", "pushed by a reader")
    report = sync(reader, url, ["c"])
    conv = report.convs["c"]  # type: ignore[attr-defined]
    assert conv.accepted_here == 1 and {r.rule for r in conv.rejected_there} == {"forbidden"}
    assert [t.text for t in server.transcript("c")] == ["from the server"]


def test_records_and_heads(served: tuple[Replica, str]) -> None:
    server, url = served
    written = server.write_many("c", [Draft("user_message", {"content": f"m{i}"}) for i in range(3)])
    with HttpRemote(url, READER) as remote:
        assert remote.record(written[0].cid) == written[0].data
        assert remote.heads("c") == {"conversation": "c", "heads": [str(written[-1].cid)], "count": 3}
        server.checkpoint("c", compact=True)
        with pytest.raises(Exception, match="410"):
            remote.record(written[0].cid)
        with pytest.raises(Exception, match="404"):
            remote.record(sign_record(STRANGER, conv="c", seq=1, hlc=Hlc(1, 0), parents=[],
                                      kind="user_message", payload={"content": "x"}).cid)
        with pytest.raises(ProtocolError, match="400"):
            remote._request("GET", "/v1/records/not-a-cid")


def _signed_get(url: str, key: SigningKey, path: str) -> httpx.Response:
    headers = auth.sign(key, "GET", path, b"", now_ms=int(time.time() * 1000), nonce=os.urandom(8).hex())
    return httpx.get(url + path, headers=headers)


def test_a_record_the_key_may_not_read_looks_exactly_like_an_unknown_one(served: tuple[Replica, str]) -> None:
    server, url = served
    hidden = server.write("d", "user_message", {"content": "only writers of d may see this"}).cid
    unknown = sign_record(STRANGER, conv="d", seq=1, hlc=Hlc(1, 0), parents=[], kind="user_message",
                          payload={"content": "never stored"}).cid
    answers = [_signed_get(url, READER, f"/v1/records/{cid}") for cid in (hidden, unknown)]
    assert [a.status_code for a in answers] == [404, 404]
    assert answers[0].json() == {k: v.replace(str(unknown), str(hidden)) for k, v in answers[1].json().items()}
    assert _signed_get(url, WRITER, f"/v1/records/{hidden}").status_code == 200


def test_live_events_push_new_records_as_they_land(served: tuple[Replica, str]) -> None:
    server, url = served
    before = server.say("c", "user", "before")
    seen: list[str] = []
    ready = threading.Event()

    def listen() -> None:
        with HttpRemote(url, READER) as remote:
            for cursor, cid, data in remote.events("c"):
                if cid is None:
                    assert cursor is not None
                    ready.set()
                    continue
                assert CID.of_record(data) == cid
                seen.append(str(cid))
                if len(seen) == 2:
                    return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert ready.wait(5)
    writer = client()
    first = writer.say("c", "user", "pushed through sync")
    sync(writer, url, ["c"])
    second = server.say("c", "assistant", "written on the server")
    thread.join(10)
    assert seen == [str(first.cid), str(second.cid)]
    with HttpRemote(url, READER) as remote:  # a cursor replays from where it was
        replay = [cid for _, cid, _ in _take(remote.events("c", after=0), 4)]
    assert replay == [None, before.cid, first.cid, second.cid]  # `ready`, then every arrival in order


def _take(events: Iterator[tuple[int | None, object, bytes]], n: int) -> list[tuple[int | None, object, bytes]]:
    found = []
    for item in events:
        found.append(item)
        if len(found) == n:
            break
    return found


def test_hostile_bytes_get_typed_refusals_and_the_server_keeps_serving(served: tuple[Replica, str]) -> None:
    server, url = served
    server.say("c", "user", "still here")
    with HttpRemote(url, WRITER) as remote:
        for garbage in (b"", b"\x00" * 50, os.urandom(300), b"\x01\x01" + b"s" * 8 + b"\x05"):
            with pytest.raises(ProtocolError, match="400"):
                remote.exchange(garbage)
        with pytest.raises(ProtocolError, match="413"):
            remote.exchange(b"\x01" * ((1 << 20) + 1))
    honest = client()
    assert sync(honest, url, ["c"]).converged  # type: ignore[attr-defined]
    assert [t.text for t in honest.transcript("c")] == ["still here"]


def test_a_body_that_never_finishes_times_out(served: tuple[Replica, str]) -> None:
    _, url = served

    def trickle() -> Iterator[bytes]:
        yield b"\x01"
        time.sleep(3)
        yield b"\x01"

    headers = auth.sign(WRITER, "POST", "/v1/sync", b"\x01\x01", now_ms=int(time.time() * 1000), nonce="z" * 16)
    answer = httpx.post(url + "/v1/sync", content=trickle(), headers=headers, timeout=10)
    assert answer.status_code == 408


def test_a_flood_of_orphans_is_bounded_by_the_quarantine(tmp_path: Path) -> None:
    from convgraph.replica import Config
    from convgraph.store.rows import QuarantineBounds

    replica = Replica.open(tmp_path / "s", config=Config(quarantine=QuarantineBounds(max_count=50)))
    config = ServerConfig(access=Access.from_rules([f"{actor_text(WRITER.public)}=c"]))
    clock = ManualClock()
    hostile = SigningKey.generate()
    ghost = sign_record(hostile, conv="c", seq=1, hlc=Hlc(clock(), 0), parents=[], kind="user_message",
                        payload={"content": "never sent"})
    orphans = [sign_record(hostile, conv="c", seq=2 + i, hlc=Hlc(clock() + 1 + i, 0), parents=[ghost.cid],
                           kind="user_message", payload={"content": f"orphan {i}"}) for i in range(300)]
    with LiveServer(create_app(replica, config)) as live, HttpRemote(live.url, WRITER) as remote:
        message = wire.Message(wire.Kind.CONTINUE, b"s" * 8, (wire.Section("c", records=tuple(o.data for o in orphans)),))
        reply = wire.decode(remote.exchange(wire.encode(message)))
        report = reply.sections[0].report or ()
        assert len(report) == 300 and {e.fate for e in report} <= {wire.Fate.QUARANTINED, wire.Fate.EVICTED}
        assert [e.digest for e in report] == [o.cid.digest for o in orphans]
        assert all(e.parents == (ghost.cid.digest,) for e in report if e.fate is wire.Fate.QUARANTINED)
        assert replica.store.pending_stats()[0] <= 50 and replica.store.count() == 0
        honest = client()
        honest.say("c", "user", "fine")
        assert sync(honest, live.url, ["c"]).converged  # type: ignore[attr-defined]
    replica.close()


def test_client_errors_for_an_unreachable_server() -> None:
    from convgraph.errors import TransportError

    with pytest.raises(TransportError), HttpRemote("http://127.0.0.1:9", WRITER, timeout_s=2) as remote:
        remote.exchange(b"")


def test_unauthenticated_error_is_raised_by_the_client(served: tuple[Replica, str]) -> None:
    _, url = served
    with HttpRemote(url, WRITER, nonce=lambda: "same-nonce-every-time") as remote:
        remote.heads("c")
        with pytest.raises(UnauthenticatedError, match="401"):
            remote.heads("c")


def test_records_with_bad_signatures_or_cids_are_rejected_one_by_one_over_http(served: tuple[Replica, str]) -> None:
    server, url = served
    good = client()
    records = [good.say("c", "user", f"honest {i}") for i in range(3)]
    forged = bytearray(records[0].data)
    forged[-5] ^= 0x01  # inside the signature: decodes, but no longer verifies
    noise = os.urandom(200)
    message = wire.Message(wire.Kind.CONTINUE, b"s" * 8, (wire.Section("c", records=(
        bytes(forged), noise, records[0].data, records[1].data, records[2].data)),))
    with HttpRemote(url, WRITER) as remote:
        reply = wire.decode(remote.exchange(wire.encode(message)))
    section = reply.sections[0]
    report = section.report or ()
    assert [(e.fate, e.digest) for e in report] == [
        (wire.Fate.REJECTED, hashlib.sha256(bytes(forged)).digest()), (wire.Fate.REJECTED, hashlib.sha256(noise).digest()),
        *[(wire.Fate.ACCEPTED, r.cid.digest) for r in records]]
    assert {report[0].rule, report[1].rule} <= {"signature", "cid", "decode", "canonical", "schema"}
    assert [r.cid for r in server.records("c")] == [r.cid for r in records] and server.verify().ok


def test_a_server_that_never_stops_answering_is_cut_off_by_the_client() -> None:
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def endless(_: object) -> StreamingResponse:
        async def forever() -> object:
            while True:
                yield b"\x01" * 65536
                await asyncio.sleep(0)

        return StreamingResponse(forever(), media_type="application/vnd.convgraph.sync")

    async def chatty_error(_: object) -> StreamingResponse:
        async def forever() -> object:
            while True:
                yield b"x" * 65536
                await asyncio.sleep(0)

        return StreamingResponse(forever(), status_code=500, media_type="text/plain")

    app = Starlette(routes=[Route("/v1/sync", endless, methods=["POST"]),
                            Route("/v1/records/{cid}", chatty_error, methods=["GET"])])
    with LiveServer(app) as live, HttpRemote(live.url, WRITER, max_reply=1 << 20) as remote:
        with pytest.raises(ProtocolError, match="over 1048576 bytes"):
            remote.exchange(b"\x01")
        from convgraph.errors import TransportError

        with pytest.raises(TransportError, match="HTTP 500"):
            remote.record(CID.of_record(b"x"))


def test_an_event_stream_line_without_end_is_cut_off() -> None:
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def endless_line(_: object) -> StreamingResponse:
        async def forever() -> object:
            yield b"event: ready\ndata: {\"cursor\": 0}\n\ndata: "
            while True:
                yield b"A" * 65536
                await asyncio.sleep(0)

        return StreamingResponse(forever(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/conversations/{conv}/events", endless_line, methods=["GET"])])
    with LiveServer(app) as live, HttpRemote(live.url, WRITER) as remote:
        events = remote.events("c")
        assert next(events)[0] == 0
        with pytest.raises(ProtocolError, match="event stream line over"):
            next(events)


def _signed_post(url: str, key: SigningKey, body: bytes) -> httpx.Response:
    headers = auth.sign(key, "POST", "/v1/sync", body, now_ms=int(time.time() * 1000), nonce=os.urandom(8).hex())
    return httpx.post(url + "/v1/sync", content=body, headers={**headers, "Content-Type": "application/vnd.convgraph.sync"})


@pytest.mark.parametrize(("message", "reason"), [
    (b"\x01\x01" + b"s" * 8 + b"\x00", "version"),  # a version-1 message
    (wire.encode(wire.Message(wire.Kind.REPLY, b"s" * 8)), "kind"),  # the initiator sent a reply
    (wire.encode(wire.Message(wire.Kind.INITIATE, b"s" * 8, (wire.Section("c"),))), "part"),  # no summary
    (wire.encode(wire.Message(wire.Kind.CONTINUE, b"s" * 8)), "part"),  # continues nothing
    (wire.encode(wire.Message(wire.Kind.CONTINUE, b"s" * 8, (wire.Section(
        "c", records=(b"x",), report=(wire.Reported(wire.Fate.ACCEPTED, b"d" * 32),)),))), "part"),
    (wire.encode(wire.Message(wire.Kind.INITIATE, b"s" * 8)) + b"\x00", "malformed"),
    (b"\x04\x03" + b"s" * 8 + b"\x01\x00\x20\x01\x01\xa0", "malformed"),  # a section about conv ""
])
def test_a_message_the_spec_does_not_allow_gets_400_with_a_named_reason(
    served: tuple[Replica, str], message: bytes, reason: str,
) -> None:
    server, url = served
    answer = _signed_post(url, WRITER, message)
    assert answer.status_code == 400 and answer.json()["error"] == "protocol"
    assert answer.json()["reason"] == reason
    assert server.store.count() == 0 and _signed_get(url, WRITER, "/v1/conversations/c/heads").status_code == 200


def test_the_client_surfaces_the_servers_refusal_reason(served: tuple[Replica, str]) -> None:
    _, url = served
    with HttpRemote(url, WRITER) as remote, pytest.raises(ProtocolError, match="400") as caught:
        remote.exchange(b"\x01\x01" + b"s" * 8 + b"\x00")
    assert caught.value.reason == "version"


def test_a_sync_post_skips_starlette_s_stack_and_keeps_the_route_s_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`POST /v1/sync` is answered before Starlette's middleware and router (server/app.py,
    `_App`), with every answer the route gave: the reply's type, typed refusals as JSON, a
    plain 500 for an unexpected error; anything else about `/v1/sync` still meets the stack."""
    replica = Replica.open(tmp_path / "server")
    config = ServerConfig(access=Access.from_rules([f"{actor_text(WRITER.public)}=c"]), max_body=1 << 16)
    app = create_app(replica, config)
    stacked: list[tuple[str, str]] = []
    stack = app.build_middleware_stack()

    async def spied(scope: dict[str, object], receive: object, send: object) -> None:
        if scope["type"] == "http":
            stacked.append((str(scope["method"]), str(scope["path"])))
        await stack(scope, receive, send)  # type: ignore[arg-type]

    app.middleware_stack = spied  # type: ignore[assignment]
    message = wire.encode(wire.Message(wire.Kind.INITIATE, b"s" * 8, ()))
    with LiveServer(app) as live:
        answer = _signed_post(live.url, WRITER, message)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/vnd.convgraph.sync"
        assert wire.decode(answer.content).kind is wire.Kind.REPLY
        typed = httpx.post(live.url + "/v1/sync", content=message, headers={"Content-Type": "text/plain"})
        assert typed.status_code == 401 and typed.json()["error"] == "unauthenticated"
        assert typed.headers["www-authenticate"].startswith("Convgraph-Signature")
        headers = auth.sign(WRITER, "POST", "/v1/sync", b"", now_ms=int(time.time() * 1000), nonce="o" * 16)
        big = httpx.post(live.url + "/v1/sync", content=b"\x01" * ((1 << 16) + 1), headers=headers)
        assert big.status_code == 413 and big.json() == {
            "error": "size", "detail": f"request body over {1 << 16} bytes", "reason": f"request body over {1 << 16} bytes"}
        assert _signed_post(live.url, STRANGER, message).status_code == 403
        assert stacked == []  # none of those went through the stack
        wrong = httpx.get(live.url + "/v1/sync")
        assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
        assert httpx.post(live.url + "/v1/sync/", content=message).status_code == 307  # Starlette's redirect
        assert httpx.get(live.url + "/v1/health").json()["ok"] is True
        assert stacked == [("GET", "/v1/sync"), ("POST", "/v1/sync/"), ("GET", "/v1/health")]

        def broken(*_: object) -> bytes:
            raise RuntimeError("a bug")

        monkeypatch.setattr(app_module.SyncEndpoint, "_answer_whole", broken)
        failed = _signed_post(live.url, WRITER, message)
        assert (failed.status_code, failed.text) == (500, "Internal Server Error")
        assert failed.headers["content-type"].startswith("text/plain")
    replica.close()
