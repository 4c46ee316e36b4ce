"""A `ConvgraphSession` view kept as a signed file in the replica's home, so that a session
opened afresh (an app restarted) reads its items as `SQLiteSession` does, decoding their JSON,
instead of rebuilding them from the transcript.

It is a cache of a fold of the records, never a second truth. The file of `(conv, branch)` is
`agents-sessions/<digest>.items` in the home: a head line (magic, version, this replica's
Ed25519 signature over a SHA-256 digest of the body) and the body: one JSON line of what the
view needs to be moved on (the conversation, branch, `since` cursor, hidden set, last key, cut,
the number of items), the turn of each item (its CID's bytes, back to back), then each item's
JSON, one a line (JSON text holds no raw newline), so the latest n are found from the end. A
file that is unsigned by this replica, of another version, conversation or branch, cut short,
or whose cursor or first and last turns the store does not hold is ignored; the caller then
reads the items afresh and writes the file again. A loaded view is moved on by the records
that arrived after its cursor, or rebuilt, by the same rules as a kept one
(`_session_view.move`). Invariant: a loaded view is one a read of the store's records made,
as of its cursor.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
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
    complete: bool = True  # every item, or only the latest (`load(last=…)`)


def path_of(home: Path, conv: str, branch: str | None) -> Path:
    """Where the file of `(conv, branch)` lives under `home`."""
    name = hashlib.sha256(json.dumps([conv, branch]).encode()).hexdigest()[:40]
    return home / DIRECTORY / f"{name}.items"


def save(replica: Replica, conv: str, branch: str | None, view: Loaded) -> bool:
    """Write `view` (complete) as the file of `(conv, branch)`; False when there is no home or
    key, or an item is not JSON text (then there is no file: the items are read afresh)."""
    home, key = replica.home, replica._key
    frags, ops = view.frags, view.ops
    if home is None or key is None or not all(type(f) is str for f in frags) \
            or not all(len(o) == _CID_LEN for o in ops):
        return False
    head = {"conv": conv, "branch": branch, "cursor": view.cursor, "n": len(frags),
            "hidden": None if view.hidden is None else sorted(c.hex() for c in view.hidden),
            "top": _key_out(view.top), "cut": _key_out(view.cut)}
    body = b"".join([json.dumps(head, separators=(",", ":")).encode(), b"\n", *ops,
                     "\n".join(cast(Sequence[str], frags)).encode()])
    signature = key.sign(_DOMAIN + hashlib.sha256(body).digest())
    path = path_of(home, conv, branch)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        tmp.write_bytes(f"{_MAGIC} {VERSION} {signature.hex()}\n".encode() + body)
        os.replace(tmp, path)
    except OSError:  # a full disk or a read-only home: the read goes on without a file
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def load(replica: Replica, conv: str, branch: str | None, last: int | None = None) -> Loaded | None:
    """The view the file of `(conv, branch)` holds, when it is sound (see the module): its
    latest `last` items only (all when None), so a first `get_items(limit=n)` decodes n items."""
    home = replica.home
    if home is None or replica._key is None:  # opened to be read, its key lost: no file to trust
        return None
    try:
        with open(path_of(home, conv, branch), "rb") as f, \
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return _loaded(replica, conv, branch, last, m)  # mapped: the file is not copied to be hashed
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def _loaded(replica: Replica, conv: str, branch: str | None, last: int | None, m: mmap.mmap) -> Loaded | None:
    start = m.find(b"\n") + 1
    magic, version, signature = m[:start].decode().split(" ")
    with memoryview(m) as whole, whole[start:] as body:
        digest = hashlib.sha256(body).digest()
    if magic != _MAGIC or version != str(VERSION) or not verify(
            replica.actor, _DOMAIN + digest, bytes.fromhex(signature)):
        return None
    end = m.find(b"\n", start)
    head: dict[str, Any] = json.loads(m[start:end])
    n = head["n"]
    if head["conv"] != conv or head["branch"] != branch or type(n) is not int:
        return None
    ops_at, text_at = end + 1, end + 1 + n * _CID_LEN
    k = n if last is None else min(last, n)
    at = len(m)
    for _ in range(k if k < n else 0):  # the start of the latest k lines
        at = m.rfind(b"\n", text_at, at)
        if at < 0:
            return None
    frags = m[at + 1 if k < n else text_at:].decode().split("\n") if k else []
    if text_at > len(m) or len(frags) != k or (n == 0 and text_at != len(m)):
        return None
    raw = m[ops_at + (n - k) * _CID_LEN:text_at]
    ops = [CID._trusted(raw[i:i + _CID_LEN]) for i in range(0, len(raw), _CID_LEN)]  # signed by us
    if not _held(replica, conv, int(head["cursor"]), m[ops_at:ops_at + _CID_LEN] + raw[-_CID_LEN:]):
        return None
    hidden = head["hidden"]
    return Loaded(int(head["cursor"]), None if hidden is None else frozenset(
        CID._trusted(bytes.fromhex(c)) for c in hidden), _key_in(head["top"]), _key_in(head["cut"]),
        ops, frags, k == n)


def _held(replica: Replica, conv: str, cursor: int, raw: bytes) -> bool:
    """Whether the store holds what the file was read from: its cursor, and its first and last
    turns (`raw`: theirs, back to back) as this conversation's. A store restored from an older
    copy fails one or the other; looking every turn up would cost more than reading the file."""
    store = replica.store
    if cursor > store.cursor(conv):
        return False
    probe = {CID._trusted(raw[:_CID_LEN]), CID._trusted(raw[-_CID_LEN:])} if raw else set()
    found = store.metas(probe) if probe else {}
    return len(found) == len(probe) and all(m.conv == conv for m in found.values())


def _key_out(key: OrderKey | None) -> list[Any] | None:
    return None if key is None else [key[0], key[1], key[2].hex(), key[3].hex()]


def _key_in(found: list[Any] | None) -> OrderKey | None:
    if found is None:
        return None
    wall, counter, actor, cid = found
    return int(wall), int(counter), bytes.fromhex(actor), bytes.fromhex(cid)
