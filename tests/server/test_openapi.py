"""The sync server against its OpenAPI description: the document itself, then schemathesis.

The served `/openapi.json` is `SPEC`, a valid OpenAPI 3.1 document naming exactly the app's
routes. Schemathesis then generates requests for every operation and sends them to a live
server (uvicorn on 127.0.0.1, SQLite replica), each signed with a test key after the
request is built, so they pass authentication and reach the real handlers; every answer
must be a documented status with a documented content type and, for JSON, match its
schema. Unsigned, every signed route must answer 401 with the documented `Error`. Fixed
requests then reach the answers a generator rarely does (200 records and heads, 404, 410,
413, event streams) and the ones it never makes (a `/` in a conversation name, cursors
outside the documented pattern, a body on a GET): each must still be documented.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import jsonschema_rs
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.definitions import OPENAPI_31
from starlette.routing import Route

from conftest import IN_CI
from convgraph import Replica, SigningKey
from convgraph.core.hlc import Hlc
from convgraph.core.keys import actor_text
from convgraph.core.record import sign_record
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.server.openapi import SPEC
from convgraph.sync import auth, wire
from convgraph.sync.initiator import Initiator
from convgraph.sync.peer import ReplicaPeer
from projections.authority_world import T0, A, B
from projections.authority_world import World as AuthorityWorld
from server.live import LiveServer

CLIENT, STRANGER = SigningKey(bytes([7]) * 32), SigningKey(bytes([8]) * 32)
SYNC_TYPE = "application/vnd.convgraph.sync"
MAX_BODY = 64 << 10
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = 200 if IN_CI else 30


def _sync_bodies() -> list[bytes]:
    """Well-formed sync messages: first messages over readable, read-only and foreign conversations
    and later ones carrying records, so the fuzzer reaches the responder and not only the parser."""
    client = Replica.in_memory(CLIENT)
    for conv in ("c", "r", "elsewhere"):
        for i in range(3):
            client.say(conv, "user", f"{conv} from the client {i}")
    peer = ReplicaPeer(client)
    bodies = [Initiator(peer, convs, salt=bytes([n]) * 8).initiate()
              for n, convs in enumerate([["c"], ["r"], ["c", "r"], ["elsewhere"], ["c", "elsewhere"], []])]
    for conv in ("c", "r"):
        records = tuple(r.data for r in client.records(conv))
        bodies.append(wire.encode(wire.Message(wire.Kind.CONTINUE, b"k" * 8, (wire.Section(conv, records=records),))))
    client.close()
    return bodies


VALID_BODIES = _sync_bodies()


@st.composite
def _mangled(draw: st.DrawFn) -> bytes:
    body = bytearray(draw(st.sampled_from(VALID_BODIES)))
    at = draw(st.integers(0, len(body) - 1))
    body[at] = draw(st.integers(0, 255))
    return bytes(body[: draw(st.integers(at, len(body)))])


schemathesis.openapi.media_type(
    SYNC_TYPE, st.one_of(st.sampled_from(VALID_BODIES), _mangled(), st.binary(max_size=512))
)

CONFIG = schemathesis.Config.from_dict({"max-stream-events": 1, "request-timeout": 10})
SCHEMA = schemathesis.openapi.from_dict(SPEC, config=CONFIG)


class Signed(requests.auth.AuthBase):
    """Signs the request requests is about to send: its final method, path with query and body."""

    def __init__(self, key: SigningKey) -> None:
        self.key = key

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode()
        assert isinstance(body, bytes), f"cannot sign a body of type {type(body)}"
        headers = auth.sign(self.key, request.method or "GET", request.path_url, body,
                            now_ms=int(time.time() * 1000), nonce=secrets.token_hex(16))
        request.headers.update(headers)
        return request


class World:
    """The live server and what its replica holds."""

    def __init__(self, url: str, replica: Replica, compacted: str, foreign: str) -> None:
        self.url, self.replica, self.compacted, self.foreign = url, replica, compacted, foreign


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    replica = Replica.open(tmp_path_factory.mktemp("openapi") / "server")
    for conv in ("c", "r", "secret", "k", "c/sub"):
        for i in range(3):
            replica.say(conv, "user", f"{conv} on the server {i}")
    compacted = str(replica.records("k")[0].cid)
    replica.checkpoint("k", compact=True)
    me = actor_text(CLIENT.public)
    access = Access.from_rules([f"{me}=c", f"{me}=r:read", f"{me}=k:read", f"{me}=c/sub:read"])
    config = ServerConfig(access=access, max_body=MAX_BODY, body_timeout_s=2.0, heartbeat_s=0.2, poll_s=0.1)
    with LiveServer(create_app(replica, config)) as live:
        yield World(live.url, replica, compacted, str(replica.records("secret")[0].cid))
    replica.close()


@pytest.fixture(scope="module")
def signed(world: World) -> Iterator[requests.Session]:
    session = requests.Session()
    session.auth = Signed(CLIENT)
    yield session
    session.close()


@pytest.fixture(scope="module")
def unsigned(world: World) -> Iterator[requests.Session]:
    session = requests.Session()
    yield session
    session.close()


# -- the document ---------------------------------------------------------------------------


def test_served_description_is_the_spec(world: World) -> None:
    answer = httpx.get(world.url + "/openapi.json")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == SPEC


def test_spec_is_a_valid_openapi_31_document(world: World) -> None:
    loaded = schemathesis.openapi.from_url(world.url + "/openapi.json")
    loaded.validate()  # the OpenAPI 3.1 meta-schema (schemathesis' copy of the official one)
    jsonschema.Draft202012Validator(OPENAPI_31).validate(SPEC)  # and once more with another validator
    assert SPEC["openapi"].startswith("3.1.")
    with pytest.raises(jsonschema_rs.ValidationError, match="version"):  # the validation is not a no-op
        schemathesis.openapi.from_dict({**SPEC, "info": {"title": "no version"}}).validate()
    for schema in _schemas(SPEC):  # every Schema Object is itself valid JSON Schema 2020-12
        jsonschema.Draft202012Validator.check_schema(schema)
    # (loaded from the URL, schemathesis leaves out the operation that serves the description itself)
    operations = [op.ok() for op in schemathesis.openapi.from_dict(SPEC).get_all_operations()]
    assert {(o.method.upper(), o.path) for o in operations} == _documented()
    ids = [op["operationId"] for item in SPEC["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))
    for item in SPEC["paths"].values():
        for op in item.values():
            for sec in op.get("security", []):
                assert set(sec) <= set(SPEC["components"]["securitySchemes"])


def _schemas(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if isinstance(node.get("schema"), dict):
            yield node["schema"]
        if node is SPEC.get("components"):
            yield from node["schemas"].values()
        for value in node.values():
            yield from _schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schemas(value)


def _documented() -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in SPEC["paths"].items() for method in item}


def _routes() -> set[tuple[str, str]]:
    with Replica.in_memory(CLIENT) as replica:
        routes = create_app(replica).routes
    # Starlette answers HEAD wherever it answers GET; OpenAPI leaves that implicit too
    plain = [(r, re.sub(r"\{(\w+):\w+\}", r"{\1}", r.path)) for r in routes if isinstance(r, Route)]
    return {(m, path) for r, path in plain for m in r.methods or () if m != "HEAD"}


def test_spec_documents_every_route_and_nothing_else() -> None:
    """Including GET /openapi.json itself (security: [])."""
    assert _documented() == _routes()


# -- generated requests against the live server ---------------------------------------------


def _header(response: schemathesis.Response, name: str) -> str:
    values = {k.lower(): v for k, v in response.headers.items()}[name]
    assert len(values) == 1, values
    return values[0]


def _validate(case: schemathesis.Case, response: schemathesis.Response) -> None:
    """Status, content type and (JSON) body against the spec; an event stream's events by hand.

    Schemathesis reads an OpenAPI 3.1 `schema` under `text/event-stream` as the schema of each
    parsed event (3.2's `itemSchema`); SPEC's `{"type": "string"}` describes the whole body,
    so for streams the body check is ours: a `ready` event with the cursor comes first.
    """
    kind = _header(response, "content-type").split(";")[0] if "content-type" in _lower(response) else ""
    if kind == "text/event-stream":
        case.validate_response(response, checks=[c for c in CHECKS if c is not response_schema_conformance])
        first = response.text.split("\n\n")[0].splitlines()
        assert first[0] == "event: ready" and first[1].startswith("id: "), response.text
        assert json.loads(first[2].removeprefix("data: ")) == {"cursor": int(first[1].removeprefix("id: "))}
    else:
        case.validate_response(response, checks=CHECKS)


def _lower(response: schemathesis.Response) -> set[str]:
    return {k.lower() for k in response.headers}



@SCHEMA.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_signed_requests_get_documented_answers(case: schemathesis.Case, world: World,
                                                signed: requests.Session) -> None:
    response = case.call(base_url=world.url, session=signed)
    _validate(case, response)
    assert response.status_code != 401, f"the signature did not verify: {response.text}"


@SCHEMA.parametrize()
@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None, suppress_health_check=list(HealthCheck))
def test_unsigned_requests_get_401_with_the_documented_error(case: schemathesis.Case, world: World,
                                                             unsigned: requests.Session) -> None:
    for name in auth.HEADERS:
        case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != name}
    response = case.call(base_url=world.url, session=unsigned)
    _validate(case, response)
    if case.method.upper() != case.operation.method.upper():
        return  # schemathesis probing an undocumented method: Starlette's 405, before any handler
    if case.operation.definition.raw.get("security") == []:
        assert response.status_code == 200
    else:
        assert response.status_code == 401, response.text
        assert _header(response, "www-authenticate").startswith("Convgraph-Signature")
        body = response.json()
        jsonschema.validate(body, SPEC["components"]["schemas"]["Error"])
        assert "missing header" in body["reason"]


# -- fixed requests for the answers a fuzzer rarely reaches ---------------------------------


def _call(world: World, session: requests.Session, path: str, method: str = "GET", **kw: Any) -> Any:
    case = SCHEMA[path][method].Case(**kw)
    response = case.call(base_url=world.url, session=session)
    _validate(case, response)
    return response


def test_every_documented_answer_of_the_record_route(world: World, signed: requests.Session) -> None:
    path = "/v1/records/{cid}"
    mine = world.replica.records("c")[0]
    ok = _call(world, signed, path, path_parameters={"cid": str(mine.cid)})
    assert ok.status_code == 200 and ok.content == mine.data
    assert _header(ok, "content-type") == "application/vnd.ipld.dag-cbor"
    read_only = world.replica.records("r")[-1]
    assert _call(world, signed, path, path_parameters={"cid": str(read_only.cid)}).content == read_only.data
    nowhere = sign_record(STRANGER, conv="c", seq=1, hlc=Hlc(1, 0), parents=[], kind="user_message",
                          payload={"content": "never stored"})
    for cid, status in [(nowhere.cid, 404), ("not-a-cid", 400), (world.foreign, 404), (world.compacted, 410)]:
        answer = _call(world, signed, path, path_parameters={"cid": str(cid)})
        assert answer.status_code == status, (cid, answer.text)
        assert _header(answer, "content-type") == "application/json"


def test_every_documented_answer_of_the_heads_route(world: World, signed: requests.Session) -> None:
    path = "/v1/conversations/{conv}/heads"
    ok = _call(world, signed, path, path_parameters={"conv": "c"})
    assert ok.status_code == 200 and ok.json()["conversation"] == "c"
    assert ok.json()["heads"] == [str(c) for c in world.replica.store.heads("c")]
    assert _call(world, signed, path, path_parameters={"conv": "r"}).status_code == 200
    assert _call(world, signed, path, path_parameters={"conv": "secret"}).status_code == 403


def test_every_documented_answer_of_the_sync_route(world: World, signed: requests.Session) -> None:
    path = "/v1/sync"

    def post(body: bytes) -> Any:
        return _call(world, signed, path, "POST", body=body, media_type=SYNC_TYPE)

    reply = post(VALID_BODIES[0])
    assert reply.status_code == 200 and _header(reply, "content-type") == SYNC_TYPE
    assert wire.decode(reply.content).kind == wire.Kind.REPLY
    assert post(b"\x00garbage").status_code == 400
    assert post(VALID_BODIES[3]).status_code == 403  # a conversation the key may not read
    assert post(b"\x01" * (MAX_BODY + 1)).status_code == 413


def test_events_answers_and_stream(world: World, signed: requests.Session) -> None:
    path = "/v1/conversations/{conv}/events"
    assert _call(world, signed, path, path_parameters={"conv": "secret"}).status_code == 403
    assert _call(world, signed, path, path_parameters={"conv": "c"}, query={"after": "x"}).status_code == 400
    streamed = _call(world, signed, path, path_parameters={"conv": "c"}, query={"after": "0"})
    assert streamed.status_code == 200 and streamed.text.startswith("event: ready\n")
    # the stream by hand: a signed GET, the documented type, a first `ready` event, then close
    target = "/v1/conversations/c/events"
    headers = auth.sign(CLIENT, "GET", target, b"", now_ms=int(time.time() * 1000), nonce=secrets.token_hex(16))
    with httpx.Client(timeout=5) as client, client.stream("GET", world.url + target, headers=headers) as answer:
        assert answer.status_code == 200
        kind = answer.headers["content-type"].split(";")[0]
        assert kind in SPEC["paths"]["/v1/conversations/{conv}/events"]["get"]["responses"]["200"]["content"]
        lines = answer.iter_lines()
        assert next(lines) == "event: ready"
        assert next(lines) == f"id: {world.replica.store.cursor('c')}"
        data = next(lines)
        assert data.startswith("data: ")
        assert json.loads(data.removeprefix("data: ")) == {"cursor": world.replica.store.cursor("c")}


def test_every_documented_answer_of_the_authority_route(world: World, signed: requests.Session) -> None:
    path = "/v1/conversations/{conv}/authority"
    w = AuthorityWorld(CLIENT)  # a rooted conversation the client owns, with something in every list
    w.grant(CLIENT, A, "read", "write", "review", expires_ms=T0 + 10**12)
    w.grant(CLIENT, B, "read", "write")
    before = w.heads()
    w.revoke(CLIENT, B, "read")
    w.say(B, "concurrent with its revocation", parents=before)
    turn = w.say(A, "the patch")
    w.write(CLIENT, "pin", {"target": turn.cid})
    w.write(A, "audit", {"target": turn.cid, "result": "fail", "notes": "no tests"})
    ask = w.write(CLIENT, "decision_request", {"question": "ship?", "reviews": 1})
    w.write(CLIENT, "decision", {"request": ask.cid, "choice": "ship"})
    assert not world.replica.ingest([r.data for r in w.records]).rejected
    ok = _call(world, signed, path, path_parameters={"conv": w.conv})
    assert ok.status_code == 200, ok.text
    body = ok.json()
    assert all(body[part] for part in ("members", "pins", "audits", "excluded", "findings"))
    assert _call(world, signed, path, path_parameters={"conv": "c"}).json()["error"] == "legacy"
    assert _call(world, signed, path, path_parameters={"conv": "secret"}).status_code == 403
    stranger = AuthorityWorld(STRANGER)  # held here, but the client has no grant in it
    assert not world.replica.ingest([r.data for r in stranger.records]).rejected
    refused = _call(world, signed, path, path_parameters={"conv": stranger.conv})
    assert refused.status_code == 403 and refused.json()["capability"] == "read"


# -- requests the generator does not make, each of which must still get a documented answer --


def _signed_get(world: World, target: str, body: bytes = b"") -> httpx.Response:
    """A signed GET sent as is (the client's own percent-encoding kept); a stream's first chunk only."""
    headers = auth.sign(CLIENT, "GET", target, body, now_ms=int(time.time() * 1000), nonce=secrets.token_hex(16))
    with httpx.Client(timeout=5) as client:
        request = client.build_request("GET", world.url + target, headers=headers, content=body or None)
        streamed = client.send(request, stream=True)
        try:
            chunks = streamed.iter_bytes()
            content = next(chunks, b"") if streamed.status_code == 200 else b"".join(chunks)
        finally:
            streamed.close()
    answer = httpx.Response(streamed.status_code, headers=streamed.headers, content=content, request=request)
    answer.elapsed = streamed.elapsed
    return answer


def _documented_answer(operation: str, path_parameters: dict[str, str], response: httpx.Response) -> None:
    method, path = operation.split(" ")
    case = SCHEMA[path][method].Case(path_parameters=path_parameters)
    documented = SPEC["paths"][path][method.lower()]["responses"]
    kind = response.headers.get("content-type", "").split(";")[0]
    where = f"{method} {response.request.url.raw_path.decode()} -> {response.status_code} {kind}: {response.text[:200]!r}"
    assert str(response.status_code) in documented, f"undocumented status: {where}"
    assert kind in documented[str(response.status_code)]["content"], f"undocumented content type: {where}"
    if kind == "application/json":
        case.validate_response(response, checks=CHECKS)


@pytest.mark.parametrize("route", ["heads", "events"])
def test_a_conversation_named_with_a_slash_is_served(world: World, route: str) -> None:
    """Conversation names may hold `/`; the client sends it as %2F (`sync/http.py`'s `_quote`)."""
    answer = _signed_get(world, f"/v1/conversations/c%2Fsub/{route}")
    _documented_answer(f"GET /v1/conversations/{{conv}}/{route}", {"conv": "c/sub"}, answer)
    assert answer.status_code == 200
    if route == "heads":
        assert answer.json()["heads"] == [str(c) for c in world.replica.store.heads("c/sub")]


@pytest.mark.parametrize("after", ["\u00b2", "\uff11", "", "-1", "1.5", "0x10"],
                         ids=["superscript-two", "fullwidth-one", "empty", "negative", "fraction", "hex"])
def test_a_cursor_outside_the_documented_pattern_is_a_400(world: World, after: str) -> None:
    """`after` is documented as `^[0-9]+$`: anything else is the documented 400, never a 500."""
    answer = _signed_get(world, "/v1/conversations/c/events?" + httpx.QueryParams({"after": after}).__str__())
    _documented_answer("GET /v1/conversations/{conv}/events", {"conv": "c"}, answer)
    assert answer.status_code == 400


@pytest.mark.parametrize("target", ["/v1/conversations/c/heads", "/v1/conversations/c/events",
                                    "/v1/records/{cid}"])
def test_an_oversized_body_gets_a_documented_refusal_on_every_route(world: World, target: str) -> None:
    """Every guarded route reads (and bounds) the body, so each can answer 413."""
    cid = str(world.replica.records("c")[0].cid)
    answer = _signed_get(world, target.replace("{cid}", cid), b"\x00" * (MAX_BODY + 1))
    operation = "GET " + target.replace("/c/", "/{conv}/")
    _documented_answer(operation, {"cid": cid} if "{cid}" in target else {"conv": "c"}, answer)
