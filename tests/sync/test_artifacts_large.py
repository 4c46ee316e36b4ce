"""A 100 MB artifact through sync and a CAR file, each step in constant memory (issue 14)."""

from __future__ import annotations

import hashlib
import itertools
import os
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from convgraph import Replica
from convgraph.artifacts.blocks import CHUNK_SIZE
from convgraph.sync.carfile import export_car, import_car
from convgraph.sync.local import sync_replicas

SIZE = 100 * 2**20 + 12_345
PEAK = 32 * 2**20  # a message budget (4 MiB) held a few times over, far below the 100 MB moved
_salt = itertools.count()
T = TypeVar("T")


def chunks(size: int) -> Iterator[bytes]:
    """`size` bytes whose every 256 KiB chunk differs (no block is stored twice), cheaply."""
    base = os.urandom(CHUNK_SIZE)
    for i, lo in enumerate(range(0, size, CHUNK_SIZE)):
        yield (i.to_bytes(8, "big") + base[8:])[: size - lo]


def peak(step: Callable[[], T]) -> tuple[T, int]:
    tracemalloc.start()
    try:
        result = step()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def digest(r: Replica, cid: object) -> str:
    h = hashlib.sha256()
    for block in r.open_artifact(cid):  # type: ignore[arg-type]
        h.update(block)
    return h.hexdigest()


def test_a_hundred_megabytes_sync_and_travel_by_car_in_constant_memory(tmp_path: Path) -> None:
    source, want = tmp_path / "big.bin", hashlib.sha256()
    with source.open("wb") as f:
        for piece in chunks(SIZE):
            f.write(piece)
            want.update(piece)
    a, b, c = (Replica.open(tmp_path / n) for n in "abc")
    conv = a.create("big file")
    cid, put_peak = peak(lambda: a.put(source))
    a.write(conv, "user_message", {"content": "the dump"}, refs=[cid])

    report, sync_peak = peak(lambda: sync_replicas(b, a, salts=lambda: next(_salt).to_bytes(8, "big")))
    assert report.converged and b.missing_artifacts(conv) == []
    assert digest(b, cid) == want.hexdigest()

    car = tmp_path / "big.car"
    _, export_peak = peak(lambda: export_car(b, car, [conv]))
    assert car.stat().st_size > SIZE
    summary, import_peak = peak(lambda: import_car(c, car))
    assert summary.error is None and c.missing_artifacts(conv) == []
    assert digest(c, cid) == want.hexdigest()
    for r in (a, b, c):
        r.close()
    peaks = {"put": put_peak, "sync": sync_peak, "export": export_peak, "import": import_peak}
    assert all(p < PEAK for p in peaks.values()), peaks
