"""What `GET /v1/artifacts/{cid}` pays to decide who may read a CID (`server.artifacts.readable`):
one look-up of the conversations it was admitted for, the same calls however many other
conversations and manifests the server holds; it reads no block and asks `can_read` only
about conversations it came for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from convgraph import ManualClock, Replica, SigningKey, SqliteStore
from convgraph.artifacts.blocks import CHUNK_SIZE, Manifest, encode_manifest
from convgraph.core.cid import CID
from convgraph.server.artifacts import readable
from counting_store import CountingStore

MAKERS: dict[str, Callable[[Path], Replica]] = {
    "memory": lambda _home: Replica.in_memory(SigningKey(bytes([3]) * 32), clock=ManualClock(1_700_000_000_000)),
    "sqlite": lambda home: Replica(SqliteStore(home / "r.sqlite"), SigningKey(bytes([3]) * 32),
                                   clock=ManualClock(1_700_000_000_000)),
}


def manifest(replica: Replica, tag: bytes) -> tuple[CID, CID]:
    """A held manifest of two chunks (not held: scope does not need them), and its second chunk."""
    chunks = (CID.of_raw(tag + b" 0"), CID.of_raw(tag + b" 1"))
    block = encode_manifest(Manifest(chunks, CHUNK_SIZE + 1))
    cid = CID.of_record(block)  # dag-cbor, as a manifest's CID is
    replica.store.put_blocks([(cid, block)])
    return cid, chunks[1]


def world(replica: Replica, unrelated: int) -> tuple[str, CID, CID]:
    """A conversation naming one manifest, beside `unrelated` others naming three each."""
    target = replica.create("target")
    root, chunk = manifest(replica, b"target")
    replica.write(target, "user_message", {"content": "see"}, refs=[root])
    for i in range(unrelated):
        conv = replica.create(f"other {i}")
        for j in range(3):
            replica.write(conv, "user_message", {"content": "x"}, refs=[manifest(replica, b"o%d.%d" % (i, j))[0]])
    return target, root, chunk


def measure(replica: Replica, unrelated: int) -> tuple[dict[str, int], list[str]]:
    """The store calls and `can_read` questions of one `readable` on a chunk, checking its answers."""
    target, root, chunk = world(replica, unrelated)
    counting = CountingStore(replica.store)
    asked: list[str] = []

    def only_target(conv: str) -> bool:
        asked.append(conv)
        return conv == target

    assert readable(counting.store, root, only_target)
    cost = (dict(counting.calls), list(asked))
    assert not readable(counting.store, root, lambda _conv: False)
    assert not readable(counting.store, chunk, only_target)  # named through the manifest, never came here
    assert not readable(counting.store, CID.of_raw(b"named nowhere"), only_target)
    assert "conversations" not in counting.calls and "get_block" not in counting.calls
    return cost


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_readable_asks_about_the_cid_not_every_conversation(kind: str, tmp_path: Path) -> None:
    costs = []
    for unrelated in (1, 12):
        home = tmp_path / str(unrelated)
        home.mkdir()
        replica = MAKERS[kind](home)
        try:
            costs.append(measure(replica, unrelated))
        finally:
            replica.close()
    (few, asked_few), (many, asked_many) = costs
    assert few == many and few.get("admitting") == 1
    assert len(asked_few) == len(asked_many) == 1  # only the conversation naming it is asked about
