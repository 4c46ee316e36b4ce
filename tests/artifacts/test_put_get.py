"""Put and get round trips at the chunk edges on memory and SQLite, the size limit, and the artifacts records name but the replica lacks (the full store contract: tests/store/test_block_tables.py)."""

from __future__ import annotations

import hashlib
import os

import pytest

from convgraph import Replica
from convgraph.artifacts import CHUNK_SIZE, decode_manifest
from convgraph.core.cid import CID
from convgraph.errors import ArtifactMissingError, ArtifactTooLargeError


@pytest.mark.parametrize("size", [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 7])
def test_round_trip_memory_and_sqlite(tmp_path: object, size: int) -> None:
    data = os.urandom(size)
    for replica in (Replica.in_memory(), Replica.open(f"{tmp_path}/r{size}")):
        cid = replica.put(data)
        assert replica.get_artifact(cid) == data
        if size <= CHUNK_SIZE:
            assert bytes(cid) == b"\x01\x55\x12\x20" + hashlib.sha256(data).digest()
        else:
            m = decode_manifest(replica.store.get_block(cid) or b"")
            assert m.size == size and len(m.chunks) == -(-size // CHUNK_SIZE)


def test_limit_and_missing() -> None:
    from convgraph.replica import Config

    r = Replica.in_memory(config=Config(max_artifact_bytes=10))
    with pytest.raises(ArtifactTooLargeError):
        r.put(b"x" * 11)
    with pytest.raises(ArtifactMissingError):
        r.get_artifact(CID.of_raw(b"nothing"))


def test_missing_artifacts_named_by_records() -> None:
    r = Replica.in_memory()
    conv = r.create("t")
    absent = CID.of_raw(b"absent")
    held = r.put(b"held")
    r.write(conv, "user_message", {"role": "user", "content": "see"}, refs=[absent, held])
    assert r.missing_artifacts(conv) == [absent]
