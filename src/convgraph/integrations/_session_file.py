"""A `ConvgraphSession` view kept as a signed file in the replica's home, so that a session
opened afresh (an app restarted) reads its items as `SQLiteSession` does, decoding their JSON,
instead of rebuilding them from the transcript.

It is a cache of a fold of the records, never a second truth. The file of `(conv, branch)` is
`agents-sessions/<digest>.items` in the home: a head line (magic, version, this replica's
Ed25519 signature over a SHA-256 digest of the body) and the body: one JSON line of what the
view needs to be moved on (the conversation, branch, `since` cursor, hidden set, last key, cut,
the turn of each item) and then each item's JSON, one a line. A file that is unsigned by this
replica, of another version, conversation or branch, cut short, or whose cursor or turns the
store does not hold is ignored; the caller then reads the items afresh and writes the file
again. A loaded view is moved on by the records that arrived after its cursor, or rebuilt by
the same rules as a kept one (`_session_view.move`). Invariant: a loaded view is one a read
of the store's records made, as of its cursor.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from convgraph.core.cid import CID
from convgraph.core.keys import verify
from convgraph.projections.index_rows import OrderKey
from convgraph.replica import Replica

DIRECTORY: Final = "agents-sessions"
VERSION: Final = 1
_MAGIC: Final = "convgraph-session-items"
_DOMAIN: Final = b"convgraph agents session items v1\x00"
_CID_LEN: Final = 36  # a DAG-CBOR record's CID (v1, sha2-256): every turn's


@dataclass(frozen=True, slots=True)
class Loaded:
    """What a file holds: the fields of a complete view but its token (`_session_view.View`)."""

    cursor: int
    hidden: frozenset[CID] | None
    top: OrderKey | None
    cut: OrderKey | None
    ops: list[CID]
    frags: Sequence[object]  # each item's JSON text (a view with any other is not written)


def path_of(home: Path, conv: str, branch: str | None) -> Path:
    """Where the file of `(conv, branch)` lives under `home`."""
    name = hashlib.sha256(json.dumps([conv, branch]).encode()).hexdigest()[:40]
    return home / DIRECTORY / f"{name}.items"


def save(replica: Replica, conv: str, branch: str | None, view: Loaded) -> bool:
    """Write `view` as the file of `(conv, branch)`; False when there is no home or key, or an
    item is not JSON text (then there is no file: the items are read afresh when opened)."""
    home, key = replica.home, replica._key
    frags, ops = view.frags, view.ops
    if home is None or key is None or not all(type(f) is str for f in frags) \
            or not all(len(o) == _CID_LEN for o in ops):
        return False
    head = {"conv": conv, "branch": branch, "cursor": view.cursor, "n": len(frags),
            "hidden": None if view.hidden is None else sorted(c.hex() for c in view.hidden),
            "top": _key_out(view.top), "cut": _key_out(view.cut),
            "ops": base64.b64encode(b"".join(ops)).decode()}
    body = "\n".join([json.dumps(head, separators=(",", ":")), *cast(Sequence[str], frags)]).encode()
    signature = key.sign(_DOMAIN + hashlib.sha256(body).digest())
    path = path_of(home, conv, branch)
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(f"{_MAGIC} {VERSION} {signature.hex()}\n".encode() + body)
    os.replace(tmp, path)
    return True


def load(replica: Replica, conv: str, branch: str | None) -> Loaded | None:
    """The view the file of `(conv, branch)` holds, when it is sound (see the module)."""
    home = replica.home
    if home is None:
        return None
    try:
        head_line, body = path_of(home, conv, branch).read_bytes().split(b"\n", 1)
        magic, version, signature = head_line.decode().split(" ")
        if magic != _MAGIC or version != str(VERSION) or not verify(
                replica.actor, _DOMAIN + hashlib.sha256(body).digest(), bytes.fromhex(signature)):
            return None
        lines = body.decode().split("\n")
        head: dict[str, Any] = json.loads(lines[0])
        frags = lines[1:]
        if head["conv"] != conv or head["branch"] != branch or head["n"] != len(frags):
            return None
        raw = base64.b64decode(head["ops"])
        ops = [CID._trusted(raw[i:i + _CID_LEN]) for i in range(0, len(raw), _CID_LEN)]  # signed by us
        hidden = head["hidden"]
        loaded = Loaded(int(head["cursor"]), None if hidden is None else frozenset(
            CID._trusted(bytes.fromhex(c)) for c in hidden), _key_in(head["top"]), _key_in(head["cut"]),
            ops, frags)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    return loaded if len(ops) == len(frags) and _held(replica, conv, loaded) else None


def _held(replica: Replica, conv: str, loaded: Loaded) -> bool:
    """Whether the store holds what the file was read from: its cursor, and its first and last
    turns as this conversation's (a store restored from an older copy fails one or the other;
    every turn is not looked up, which would cost more than reading the file)."""
    store = replica.store
    if loaded.cursor > store.cursor():
        return False
    probe = {loaded.ops[0], loaded.ops[-1]} if loaded.ops else set()
    found = store.metas(probe) if probe else {}
    return len(found) == len(probe) and all(m.conv == conv for m in found.values())


def _key_out(key: OrderKey | None) -> list[Any] | None:
    return None if key is None else [key[0], key[1], key[2].hex(), key[3].hex()]


def _key_in(found: list[Any] | None) -> OrderKey | None:
    if found is None:
        return None
    wall, counter, actor, cid = found
    return int(wall), int(counter), bytes.fromhex(actor), bytes.fromhex(cid)
