"""`Replica.put` / `get_artifact` / `open_artifact` (docs/format.md §17.5-17.6): every source
kind gives the one CID of its bytes, a failed put stores nothing, and a large file streams
through SQLite in constant memory both ways."""

from __future__ import annotations

import hashlib
import io
import os
import tracemalloc
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

import pg
from convgraph import Config, Replica, SigningKey
from convgraph.artifacts import CHUNK_SIZE, split
from convgraph.core.cid import CID
from convgraph.errors import ArtifactError, ArtifactTooLargeError, StoreError
from convgraph.replica import artifacts as replica_artifacts
from convgraph.store.memory import MemoryStore
from convgraph.store.postgres import PostgresStore

SIZES = [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 7]


def pattern(n: int) -> bytes:
    return bytes(i % 251 for i in range(n))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def replica(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replica]:
    if request.param == "memory":
        r = Replica.in_memory()
    elif request.param == "sqlite":
        r = Replica.open(tmp_path / "r")
    else:
        r = Replica(PostgresStore(pg.dsn(), schema=pg.fresh_schema(pg.dsn())), SigningKey.generate())
    yield r
    r.close()


@pytest.mark.parametrize("size", SIZES)
def test_every_source_kind_gives_the_one_cid(replica: Replica, tmp_path: Path, size: int) -> None:
    data = pattern(size)
    want = split(data)[0]
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    with path.open("rb") as f:
        cids = {replica.put(data), replica.put(bytearray(data)), replica.put(memoryview(data)),
                replica.put(path), replica.put(str(path)), replica.put(io.BytesIO(data)), replica.put(f)}
    assert cids == {want}
    assert replica.get_artifact(want) == data and b"".join(replica.open_artifact(want)) == data


class Trickle(io.RawIOBase):
    """A stream that hands out its bytes a few at a time, in uneven pieces."""

    def __init__(self, data: bytes) -> None:
        self._data, self._at, self._step = data, 0, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        self._step = self._step % 7 + 1
        piece = self._data[self._at : self._at + min(n if n >= 0 else len(self._data), 1_000 * self._step)]
        self._at += len(piece)
        return piece


def test_a_stream_of_short_reads_gives_the_same_cid() -> None:
    data = os.urandom(3 * CHUNK_SIZE + 5)
    r = Replica.in_memory()
    assert r.put(Trickle(data)) == split(data)[0]  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [CHUNK_SIZE, 2 * CHUNK_SIZE + 3])
def test_at_the_limit_stores_and_past_it_stores_nothing(tmp_path: Path, limit: int) -> None:
    r = Replica.open(tmp_path / "r", config=Config(max_artifact_bytes=limit))
    with r:
        assert r.get_artifact(r.put(pattern(limit))) == pattern(limit)
        over = os.urandom(limit + 1)
        blocks = [c for c, _ in split(over)[1]]
        for source in (over, io.BytesIO(over)):
            with pytest.raises(ArtifactTooLargeError, match=f"limit of {limit} bytes") as caught:
                r.put(source)
            assert caught.value.size == limit + 1
            assert r.store.has_blocks(blocks) == set()  # not even the chunks cut before the limit


class Breaking(io.RawIOBase):
    """A file that fails after `good` bytes, as a disk or a network mount may."""

    def __init__(self, good: int) -> None:
        self._left = good

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            raise OSError(5, "Input/output error")
        piece = b"\x07" * min(n, self._left)
        self._left -= len(piece)
        return piece


def test_a_source_failing_half_way_stores_nothing(tmp_path: Path) -> None:
    r = Replica.open(tmp_path / "r")
    with r:
        with pytest.raises(ArtifactError, match="Input/output error"):
            r.put(Breaking(3 * CHUNK_SIZE))  # type: ignore[arg-type]
        assert r.store.has_blocks([split(b"\x07" * CHUNK_SIZE)[0]]) == set()
        with pytest.raises(ArtifactError, match="cannot read"):
            r.put(tmp_path / "absent")


def test_a_hundred_megabytes_stream_through_sqlite_in_constant_memory(tmp_path: Path) -> None:
    size, base = 100 * 2**20 + 12_345, os.urandom(CHUNK_SIZE)
    source, out = tmp_path / "big.bin", tmp_path / "out.bin"
    want = hashlib.sha256()
    with source.open("wb") as f:
        for i, lo in enumerate(range(0, size, CHUNK_SIZE)):  # every chunk differs: 400 blocks stored
            part = (i.to_bytes(8, "big") + base[8:])[: size - lo]
            f.write(part)
            want.update(part)
    r = Replica.open(tmp_path / "r")
    with r:
        tracemalloc.start()
        try:
            cid = r.put(source)
            _, put_peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            got = hashlib.sha256()
            with out.open("wb") as f:
                for block in r.open_artifact(cid):
                    f.write(block)
                    got.update(block)
            _, get_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert out.stat().st_size == size and got.digest() == want.digest()
    assert put_peak < 4 * 2**20, f"put peaked at {put_peak} bytes"
    assert get_peak < 4 * 2**20, f"open_artifact peaked at {get_peak} bytes"


class FailingStore(MemoryStore):
    """A real store whose second `put_blocks` fails, as a full disk would."""

    calls = 0

    def put_blocks(self, blocks: Iterable[tuple[CID, bytes]]) -> None:
        self.calls += 1
        if self.calls == 2:
            raise StoreError("disk full")
        super().put_blocks(blocks)


def test_a_store_failing_half_way_stores_nothing() -> None:
    store = FailingStore()
    data = os.urandom(8 * CHUNK_SIZE)
    with pytest.raises(StoreError, match="disk full"):
        replica_artifacts.put(store, io.BytesIO(data), limit=len(data))
    assert store.has_blocks(c for c, _ in split(data)[1]) == set()


def test_put_refuses_a_cid_instead_of_storing_its_bytes() -> None:
    # a CID is bytes too; storing its 36 bytes as content is never what the caller meant
    replica = Replica.in_memory()
    cid = replica.put(b"content")
    with pytest.raises(TypeError, match="already an artifact's name"):
        replica.put(cid)
    assert list(replica.store.block_cids()) == [cid]
