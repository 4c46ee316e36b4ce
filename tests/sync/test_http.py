"""`HttpRemote` against hostile servers on 127.0.0.1: it neither hangs nor believes them.

A server that dribbles its answer a byte at a time (`hostile.py`, raw sockets) is cut off
by the sync's overall deadline or by the minimum rate, and the test checks that the client
hung up while bytes were still due. A server that lies (a Starlette app on uvicorn, as in
`tests/server/live.py`) about a record, the heads or an event gets a `PeerMisbehavedError`:
no unverified record reaches the caller.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from convgraph import Record, Replica, SigningKey
from convgraph.core.cid import CID
from convgraph.errors import (
    CidMismatchError,
    PeerMisbehavedError,
    SignatureError,
    SlowTransferError,
    SyncTimeoutError,
    TransportError,
)
from convgraph.sync.http import MIN_RATE, SYNC_TYPE, HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from server.live import LiveServer
from sync.hostile import Dribbler

KEY = SigningKey(bytes([7]) * 32)


def test_a_sync_against_a_dribbling_server_ends_at_its_deadline() -> None:
    replica = Replica.in_memory(KEY)
    replica.say("c", "user", "hello")
    with Dribbler(content_type=SYNC_TYPE, interval=0.5, total=30) as server, \
            HttpRemote(server.url, KEY, timeout_s=10) as remote:
        start = time.monotonic()
        with pytest.raises(SyncTimeoutError) as caught:
            synchronize(ReplicaPeer(replica), remote, ["c"], salts=lambda: os.urandom(8), timeout_s=2)
        elapsed = time.monotonic() - start
        assert server.hung_up.wait(5)  # the client gave up: the server still had bytes to send
        assert server.requests == 1  # a deadline that passed is not retried
    assert caught.value.timeout_s == 2
    assert elapsed < 15  # 2 s and one slow read at most; the server would have taken 15 s a try


def test_an_answer_below_the_minimum_rate_is_cut_off() -> None:
    with Dribbler(content_type="application/vnd.ipld.dag-cbor", interval=0.25, total=60) as server, \
            HttpRemote(server.url, KEY, timeout_s=1) as remote:
        start = time.monotonic()
        with pytest.raises(SlowTransferError) as caught:
            remote.record(CID.of_record(b"anything"))
        elapsed = time.monotonic() - start
        assert server.hung_up.wait(5)
    assert isinstance(caught.value, TransportError) and caught.value.min_rate == MIN_RATE
    assert caught.value.got < 60 and caught.value.elapsed_s > 1  # allowed: 1 s, and 1 s per MIN_RATE bytes
    assert elapsed < 10


@pytest.fixture(scope="module")
def chain() -> tuple[Replica, list[Record]]:
    """`first` <- `second` <- `third` in conversation c, and one record of conversation d."""
    writer = Replica.in_memory(KEY)
    records = [writer.say("c", "user", text) for text in ("first", "second", "third")]
    return writer, [*records, writer.say("d", "user", "elsewhere")]


class Liar:
    """A server whose answers the test sets: records by CID text, the heads body, the event stream."""

    def __init__(self) -> None:
        self.records: dict[str, bytes] = {}
        self.heads: dict[str, Any] = {}
        self.events = ""

        async def record(request: Request) -> Response:
            return Response(self.records[request.path_params["cid"]], media_type="application/vnd.ipld.dag-cbor")

        async def heads(_: Request) -> Response:
            return JSONResponse(self.heads)

        async def events(_: Request) -> Response:
            return Response(self.events, media_type="text/event-stream")

        self.app = Starlette(routes=[
            Route("/v1/records/{cid}", record),
            Route("/v1/conversations/{conv}/heads", heads),
            Route("/v1/conversations/{conv}/events", events),
        ])


@pytest.fixture
def liar(chain: tuple[Replica, list[Record]]) -> Iterator[tuple[Liar, HttpRemote]]:
    """The liar, serving every record of `chain` under its own CID until a test says otherwise."""
    server = Liar()
    server.records.update((str(r.cid), r.data) for r in chain[1])
    with LiveServer(server.app) as live, HttpRemote(live.url, KEY) as remote:
        yield server, remote


def test_a_record_must_be_the_valid_record_its_cid_names(
    liar: tuple[Liar, HttpRemote], chain: tuple[Replica, list[Record]]
) -> None:
    server, remote = liar
    first, second, *_ = chain[1]
    assert remote.record(first.cid) == first.data
    server.records[str(second.cid)] = first.data  # another record's bytes
    with pytest.raises(PeerMisbehavedError) as caught:
        remote.record(second.cid)
    assert caught.value.cid == str(second.cid) and isinstance(caught.value.error, CidMismatchError)
    forged = bytearray(first.data)
    forged[first.data.index(first.sig)] ^= 1  # the bytes are their own CID's, but no valid record
    server.records[str(CID.of_record(bytes(forged)))] = bytes(forged)
    with pytest.raises(PeerMisbehavedError) as caught:
        remote.record(CID.of_record(bytes(forged)))
    assert isinstance(caught.value.error, SignatureError)


def heads(conv: str, *records: Record) -> dict[str, Any]:
    return {"conversation": conv, "heads": [str(r.cid) for r in records], "count": 3}


def test_a_head_that_is_an_ancestor_of_another_head_is_refused(
    liar: tuple[Liar, HttpRemote], chain: tuple[Replica, list[Record]]
) -> None:
    server, remote = liar
    _, second, third, _ = chain[1]
    server.heads = heads("c", third)
    assert remote.heads("c") == server.heads
    server.heads = heads("c", second, third)  # `second` is `third`'s parent
    with pytest.raises(PeerMisbehavedError, match="ancestor") as caught:
        remote.heads("c")
    assert caught.value.cid == str(second.cid)


def test_a_head_buried_deeper_is_refused_through_the_records_the_caller_holds(
    liar: tuple[Liar, HttpRemote], chain: tuple[Replica, list[Record]]
) -> None:
    server, remote = liar
    writer, (first, _, third, _) = chain
    server.heads = heads("c", first, third)  # `first` is `third`'s grandparent, through `second`

    def held(cid: CID) -> Any:
        return writer.store.metas([cid]).get(cid)

    assert remote.heads("c") == server.heads  # the heads alone do not show it (docs/sync.md)
    with pytest.raises(PeerMisbehavedError) as caught:
        remote.heads("c", held=held)
    assert caught.value.cid == str(first.cid)
    server.heads = heads("c", third)
    assert remote.heads("c", held=held) == server.heads


def test_heads_of_another_conversation_are_refused(
    liar: tuple[Liar, HttpRemote], chain: tuple[Replica, list[Record]]
) -> None:
    server, remote = liar
    *_, elsewhere = chain[1]
    server.heads = heads("c", elsewhere)
    with pytest.raises(PeerMisbehavedError, match="conversation 'd'") as caught:
        remote.heads("c")
    assert caught.value.cid == str(elsewhere.cid)
    server.heads = heads("d", elsewhere)
    with pytest.raises(PeerMisbehavedError, match="got those of 'd'"):
        remote.heads("c")
    server.heads = {"conversation": "c", "heads": ["not a cid"], "count": 1}
    with pytest.raises(TransportError, match="not a heads answer"):
        remote.heads("c")


def event(cid: CID, data: bytes, ident: int) -> str:
    body = json.dumps({"cid": str(cid), "record": base64.b64encode(data).decode()})
    return f"event: record\nid: {ident}\ndata: {body}\n\n"


def test_an_event_whose_bytes_are_not_its_cid_is_refused(
    liar: tuple[Liar, HttpRemote], chain: tuple[Replica, list[Record]]
) -> None:
    server, remote = liar
    first, second, _, elsewhere = chain[1]
    ready = 'event: ready\ndata: {"cursor": 0}\n\n'
    server.events = ready + event(first.cid, first.data, 1) + event(second.cid, first.data, 2)
    stream = remote.events("c")
    assert next(stream) == (0, None, b"")
    assert next(stream) == (1, first.cid, first.data)
    with pytest.raises(PeerMisbehavedError) as caught:
        next(stream)
    assert caught.value.cid == str(second.cid) and isinstance(caught.value.error, CidMismatchError)
    server.events = ready + event(elsewhere.cid, elsewhere.data, 1)
    with pytest.raises(PeerMisbehavedError, match="conversation 'd'"):
        list(remote.events("c"))
    server.events = ready + 'event: record\ndata: {"cid": 5}\n\n'
    with pytest.raises(TransportError, match="malformed 'record' event"):
        list(remote.events("c"))
