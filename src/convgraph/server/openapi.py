"""The OpenAPI 3.1 description of the sync server's HTTP API, served at `/openapi.json`.

Kept by hand beside `app.py`: `tests/server/test_openapi.py` checks every route against it
and runs schemathesis against a live server, so the two cannot drift apart silently.
"""

from __future__ import annotations

from typing import Any, Final

_SIGNED: Final[list[dict[str, list[str]]]] = [{"convgraphSignature": []}]
_ERROR: Final = {"$ref": "#/components/schemas/Error"}


_BINARY: Final = {"type": "string", "format": "binary"}
_ANY_SIGNED: Final = (408, 413, 503)  # what the body reader and the store can answer on any signed route


def _errors(*codes: int) -> dict[str, Any]:
    why = {
        400: ("Malformed request: the sync grammar (`reason`: version, kind, part, limit or malformed), "
              "a CID, a cursor"),
        401: "No valid signature, a stale timestamp or a replayed nonce",
        403: "The key is admitted to no conversation, or may not read the one named; in a rooted "
             "conversation the body cites its authority projection (`capability`, `blocked_by`)",
        404: "No such record, or none this key may read (the two are answered alike)",
        408: "The body did not arrive in time",
        410: "The record was compacted away; its header is kept",
        413: "Body over the server's limit",
        503: "Busy: the store, the replay log, or this key's requests in flight; retry",
    }
    return {
        str(c): {"description": why[c], "content": {"application/json": {"schema": _ERROR}}} for c in codes
    }


_SIGNATURE_HEADERS: Final = [
    {"name": n, "in": "header", "required": True, "schema": {"type": "string"}, "description": d}
    for n, d in [
        ("X-Convgraph-Actor", "the signing actor id (base32, 52 characters)"),
        ("X-Convgraph-Timestamp", "milliseconds since the epoch; within the server's window"),
        ("X-Convgraph-Nonce", "16 to 64 random ASCII characters, never reused"),
        ("X-Convgraph-Signature", "hex Ed25519 signature of docs/sync.md's signing input"),
    ]
]

_AUTHORITY_REF: Final = {"$ref": "#/components/schemas/Authority"}
_TEXTS: Final = {"type": "array", "items": {"type": "string"}}
_TEXT_OR_NULL: Final = {"type": ["string", "null"]}


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(properties), "properties": properties}


_AUTHORITY: Final = _object(
    conversation={"type": "string"},
    owner={"type": "string", "description": "the owner's actor id"},
    genesis={"type": "string"},
    heads=_TEXTS,
    at_ms={"type": "integer", "description": "the server's clock, against which expiries were judged"},
    members={
        "type": "object",
        "description": "actor id -> capability -> {chain, until}",
        "additionalProperties": {
            "type": "object",
            "additionalProperties": _object(chain=_TEXTS, until={"type": ["integer", "null"]}),
        },
    },
    pins={"type": "array", "items": _object(cid={"type": "string"}, author={"type": "string"},
                                            target={"type": "string"}, note=_TEXT_OR_NULL)},
    audits={"type": "array", "items": _object(
        cid={"type": "string"}, author={"type": "string"}, target={"type": "string"},
        result={"enum": ["pass", "fail", "inconclusive"]}, notes=_TEXT_OR_NULL)},
    excluded={"type": "array", "items": _object(
        cid={"type": "string"},
        reason={"enum": ["revoked_concurrently", "grant_excluded", "revoker_revoked"]}, causes=_TEXTS)},
    findings={"type": "array", "items": _object(
        kind={"type": "string"}, cid={"type": "string"}, evidence=_TEXTS, missing=_TEXTS,
        detail={"type": "string"})},
)
# `stale` findings only (docs/authority.md §8.7): the newer, unreviewed patches
_AUTHORITY["properties"]["findings"]["items"]["properties"]["newer"] = _TEXTS

_FINDING: Final = _object(
    id={"type": "string", "description": "the bundle's CID: the same evidence found twice is one finding"},
    kind={"enum": ["rollback", "deletion", "withholding", "server_equivocation", "record_equivocation",
                   "divergent_fork", "unverifiable_checkpoint", "false_patch", "false_snapshot"]},
    conv={"type": "string"},
    summary={"type": "string", "description": "one line for people"},
    found_ms={"type": "integer"},
    cites={**_TEXTS, "description": "the records the finding cites (never compacted away)"},
    statements={**_TEXTS, "description": "the CIDs of the statements in the bundle"},
    bundle={"type": "string", "contentEncoding": "base64",
            "description": "the evidence bundle (docs/integrity.md §6.2), for `convgraph verify-evidence`"},
)

SPEC: Final[dict[str, Any]] = {
    "openapi": "3.1.0",
    "info": {
        "title": "convgraph sync server",
        "version": "1",
        "description": "Range-based set reconciliation of signed conversation records (docs/sync.md).",
    },
    "paths": {
        "/v1/health": {
            "get": {
                "operationId": "health",
                "summary": "Liveness, the server's actor id and protocol version",
                "security": [],
                "responses": {
                    "200": {
                        "description": "up",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["ok", "actor", "protocol"],
                                    "properties": {
                                        "ok": {"type": "boolean"},
                                        "actor": {"type": "string"},
                                        "protocol": {"type": "integer"},
                                    },
                                }
                            }
                        },
                    }
                },
            }
        },
        "/.well-known/convgraph": {
            "get": {
                "operationId": "identity",
                "summary": "The key the server signs its statements with (docs/integrity.md §2)",
                "description": "`convgraph sync URL` pins it on first use and refuses another later.",
                "security": [],
                "responses": {
                    "200": {
                        "description": "the server's key",
                        "content": {"application/json": {"schema": _object(
                            key={"type": "string", "pattern": "^[0-9a-f]{64}$",
                                 "description": "the Ed25519 public key, hex"},
                            fingerprint={"type": "string", "description": "12 base32 characters of "
                                         "sha256(key), for people to compare (`convgraph serve` prints it)"},
                            actor={"type": "string", "description": "the same key as an actor id"},
                        )}},
                    }
                },
            }
        },
        "/v1/findings": {
            "get": {
                "operationId": "findings",
                "summary": "The server's findings: evidence that some key lied (docs/integrity.md §6)",
                "description": "In the conversations this key may read; `conv` names one.",
                "security": _SIGNED,
                "parameters": [
                    {"name": "conv", "in": "query", "required": False, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {
                        "description": "the findings",
                        "content": {"application/json": {"schema": _object(
                            findings={"type": "array", "items": {"$ref": "#/components/schemas/Finding"}})}},
                    },
                    **_errors(401, 403, *_ANY_SIGNED),
                },
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This description",
                "security": [],
                "responses": {"200": {"description": "the OpenAPI document",
                                      "content": {"application/json": {"schema": {"type": "object"}}}}},
            }
        },
        "/v1/sync": {
            "post": {
                "operationId": "sync",
                "summary": "One sync message in, the reply out",
                "security": _SIGNED,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/vnd.convgraph.sync": {"schema": {"type": "string", "format": "binary"}}
                    },
                },
                "responses": {
                    "200": {
                        "description": "the reply message",
                        "content": {
                            "application/vnd.convgraph.sync": {
                                "schema": {"type": "string", "format": "binary"}
                            }
                        },
                    },
                    **_errors(400, 401, 403, *_ANY_SIGNED),
                },
            }
        },
        "/v1/records/{cid}": {
            "get": {
                "operationId": "record",
                "summary": "One record's DAG-CBOR bytes by CID",
                "security": _SIGNED,
                "parameters": [{"name": "cid", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {
                    "200": {
                        "description": "the record",
                        "content": {
                            "application/vnd.ipld.dag-cbor": {
                                "schema": {"type": "string", "format": "binary"}
                            }
                        },
                    },
                    **_errors(400, 401, 403, 404, 410, *_ANY_SIGNED),
                },
            }
        },
        "/v1/artifacts/{cid}": {
            "get": {
                "operationId": "artifact",
                "summary": "An artifact's bytes by CID (or one block of it), to a key that may read a "
                           "conversation whose records name it; 404 alike for unknown and forbidden",
                "security": _SIGNED,
                "parameters": [
                    {"name": "cid", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "block", "in": "query", "required": False,
                     "schema": {"type": "string", "enum": ["0", "1"]}},
                ],
                "responses": {
                    "200": {
                        "description": "the artifact's bytes, or with block=1 the one block",
                        "content": {
                            "application/octet-stream": {"schema": _BINARY},
                            "application/vnd.ipld.raw": {"schema": _BINARY},
                            "application/vnd.ipld.dag-cbor": {"schema": _BINARY},
                        },
                    },
                    **_errors(400, 401, 403, 404, *_ANY_SIGNED),
                },
            }
        },
        "/v1/conversations/{conv}/heads": {
            "get": {
                "operationId": "heads",
                "summary": "The conversation's current heads and record count",
                "security": _SIGNED,
                "parameters": [
                    {"name": "conv", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {
                        "description": "heads",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["conversation", "heads", "count"],
                                    "properties": {
                                        "conversation": {"type": "string"},
                                        "heads": {"type": "array", "items": {"type": "string"}},
                                        "count": {"type": "integer", "minimum": 0},
                                    },
                                }
                            }
                        },
                    },
                    **_errors(401, 403, *_ANY_SIGNED),
                },
            }
        },
        "/v1/conversations/{conv}/events": {
            "get": {
                "operationId": "events",
                "summary": "Server-sent events: every new record of the conversation",
                "description": "Events `ready` (data {cursor}) then `record` (data {cid, record: base64}); "
                "each batch's last record carries the cursor as its id. Resume with `after` "
                "or Last-Event-ID. In a rooted conversation, a key that loses `read` gets a last "
                "`forbidden` event (data: the 403 body) before any record that follows.",
                "security": _SIGNED,
                "parameters": [
                    {"name": "conv", "in": "path", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "after",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "pattern": "^[0-9]+$"},
                    },
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string", "pattern": "^[0-9]+$"},
                        "description": "the cursor to resume from, when `after` is absent",
                    },
                ],
                "responses": {
                    "200": {
                        "description": "the event stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    **_errors(400, 401, 403, *_ANY_SIGNED),
                },
            }
        },
        "/v1/conversations/{conv}/authority": {
            "get": {
                "operationId": "authority",
                "summary": "The authority projection of a rooted conversation (docs/authority.md §7)",
                "description": "Who holds which capability, each with the chain of CIDs from the genesis "
                "to the grant that gives it, and what the projection pins, audits, excludes and finds. "
                "For keys that may read the conversation.",
                "security": _SIGNED,
                "parameters": [
                    {"name": "conv", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {
                        "description": "the projection, every CID and actor id as text",
                        "content": {"application/json": {"schema": _AUTHORITY_REF}},
                    },
                    "404": {
                        "description": "A legacy conversation (`error`: legacy), which has no projection, or "
                        "a rooted one whose genesis is not held here yet (`error`: not_found)",
                        "content": {"application/json": {"schema": _ERROR}},
                    },
                    **_errors(401, 403, *_ANY_SIGNED),
                },
            }
        },
        "/v1/witness/{conv}/cosign": {
            "post": {
                "operationId": "cosign",
                "summary": "A witness's cosignature of a checkpoint it holds (docs/integrity.md §7.4)",
                "description": "Only from `convgraph serve --witness`, for keys that may read the "
                "conversation. It cosigns a checkpoint it holds, that checks out (§7.2) and that extends "
                "the one it last cosigned for the conversation; it records that one durably before it "
                "answers. A refusal is a 409 whose `reason` says which rule failed.",
                "security": _SIGNED,
                "parameters": [
                    {"name": "conv", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {
                        **_object(checkpoint={"type": "string", "description": "the checkpoint's CID"}),
                        "additionalProperties": False}}},
                },
                "responses": {
                    "200": {
                        "description": "the cosignature",
                        "content": {"application/json": {"schema": _object(
                            cosignature={"type": "string", "description": "the C2SP cosignature/v1 line"},
                            name={"type": "string", "description": "the witness's key name"},
                            key={"type": "string", "description": "the witness's public key, hex"},
                            time={"type": "integer", "minimum": 0, "description": "POSIX seconds"},
                        )}},
                    },
                    "404": {
                        "description": "This server is not a witness",
                        "content": {"application/json": {"schema": _ERROR}},
                    },
                    "409": {
                        "description": "The witness refuses to cosign; `reason` is unknown_checkpoint, "
                        "unverified, false_checkpoint or not_extending",
                        "content": {"application/json": {"schema": _object(
                            error={"const": "witness"}, detail={"type": "string"},
                            reason={"enum": ["unknown_checkpoint", "unverified", "false_checkpoint",
                                             "not_extending"]})}},
                    },
                    **_errors(400, 401, 403, *_ANY_SIGNED),
                },
            }
        },
        "/v1/viewer/sessions": {
            "post": {
                "operationId": "viewerSession",
                "summary": "A link into the web viewer (`/view/`) for the signing key",
                "description": "The viewer shows the conversations this key may read. Open `path` on this "
                "server within `expires_ms`; the token in it is a secret: it sets a cookie and is dropped "
                "from the address. The body is ignored.",
                "security": _SIGNED,
                "responses": {
                    "200": {
                        "description": "the link",
                        "content": {"application/json": {"schema": _object(
                            path={"type": "string", "description": "/view/?token=…"},
                            expires_ms={"type": "integer", "minimum": 0},
                        )}},
                    },
                    **_errors(401, 403, *_ANY_SIGNED),
                },
            }
        },
    },
    "components": {
        "securitySchemes": {
            "convgraphSignature": {
                "type": "apiKey",
                "in": "header",
                "name": "X-Convgraph-Signature",
                "description": "With X-Convgraph-Actor, -Timestamp and -Nonce; see docs/sync.md",
            }
        },
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["error", "detail", "reason"],
                "properties": {
                    "error": {"type": "string"},
                    "detail": {"type": "string"},
                    "reason": {"type": "string"},
                    "conversation": {"type": "string", "description": "403 in a rooted conversation"},
                    "capability": {"type": "string", "description": "403: the capability the key lacks"},
                    "blocked_by": {
                        "type": "array", "items": {"type": "string"},
                        "description": "403: the revocations that cut the key's grants; empty: no grant",
                    },
                    "hint": {"type": "string",
                             "description": "403: the `--allow` rule that would admit the key"},
                },
            },
            "Authority": _AUTHORITY,
            "Finding": _FINDING,
        },
    },
}

SIGNATURE_HEADERS: Final = _SIGNATURE_HEADERS
