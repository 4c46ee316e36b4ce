"""CAR files carry the artifacts their records name (docs/sync.md, *CAR files*), and an import
stores only those, checked: tampered ones are rejected, unnamed ones skipped, missing ones listed."""

from __future__ import annotations

import random
from pathlib import Path

from convgraph import ManualClock, Replica
from convgraph.artifacts.blocks import CHUNK_SIZE, split
from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.sync.car import read_car, write_car
from convgraph.sync.carfile import export_car, import_car
from convgraph.sync.local import sync_replicas

SIZES = [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 9]


def _attach(r: Replica, data: list[bytes], conv: str = "c") -> list[CID]:
    cids = [r.put(d) for d in data]
    r.write(conv, "user_message", {"content": "files"}, refs=cids)
    return cids


def test_put_sync_export_import_get_is_byte_identical(tmp_path: Path) -> None:
    clock = ManualClock()
    rng = random.Random(3)
    data = [rng.randbytes(n) for n in SIZES]
    a, b, c = (Replica.in_memory(clock=clock) for _ in range(3))
    cids = _attach(a, data)
    a.write("other", "user_message", {"content": "no files"})
    assert sync_replicas(b, a, salts=lambda: rng.randbytes(8)).converged
    file = tmp_path / "c.car"
    exported = export_car(b, file, ["c"])
    blocks = sum(len(split(d)[1]) for d in data)
    assert exported["artifact_blocks"] == blocks
    summary = import_car(c, file)
    assert summary.problems == [] and summary.artifacts == blocks and summary.missing_artifacts == []
    assert [c.get_artifact(cid) for cid in cids] == data
    assert import_car(c, file).artifacts == blocks  # again: every one already held, nothing new


def test_export_lists_each_artifact_after_the_records_that_name_it(tmp_path: Path) -> None:
    r = Replica.in_memory(clock=ManualClock())
    [big] = _attach(r, [b"x" * (CHUNK_SIZE + 1)])
    _attach(r, [b"x" * (CHUNK_SIZE + 1)], conv="d")  # the same artifact in a second conversation
    file = tmp_path / "all.car"
    assert export_car(r, file)["artifact_blocks"] == 3  # once in the file, though two name it
    with file.open("rb") as fh:
        order = [cid for cid, _ in read_car(fh, on_other=lambda _: None)[1]]
    assert order.index(big) > 0  # the manifest follows its record (the chunks are raw: on_other)


def _rewrite(file: Path, change: dict[CID, bytes], add: list[tuple[CID, bytes]] = ()) -> Path:
    """The file's blocks again, some bytes replaced (keeping their CIDs) and some added."""
    roots, blocks = [], []
    with file.open("rb") as fh:
        roots, found = read_car(fh, on_other=lambda o: blocks.append((o.link, o.data)) if o.link else None)
        blocks += list(found)
    out = file.with_suffix(".changed.car")
    with out.open("wb") as fh:
        write_car(fh, roots, [(cid, change.get(cid, data)) for cid, data in blocks if cid] + list(add))
    return out


def test_a_tampered_artifact_block_is_rejected_and_listed_missing(tmp_path: Path) -> None:
    a, b = Replica.in_memory(clock=ManualClock()), Replica.in_memory(clock=ManualClock())
    [small, big] = _attach(a, [b"small", b"y" * CHUNK_SIZE + b"w" * CHUNK_SIZE])
    file = tmp_path / "a.car"
    export_car(a, file)
    manifest = codec.decode(a.store.get_block(big) or b"")
    chunk = manifest["chunks"][1]
    bad = _rewrite(file, {small: b"SMALL", chunk: b"z" * CHUNK_SIZE})
    summary = import_car(b, bad)
    assert summary.rejected_total == 2 and {r["rule"] for r in summary.rejected} == {"cid"}
    assert b.store.has_blocks([small, chunk]) == set() and summary.artifacts == 2  # manifest, chunk 0
    assert summary.missing_artifacts == sorted([small, chunk]) and summary.problems == ["2 block(s) rejected"]


def test_blocks_no_record_names_are_not_stored(tmp_path: Path) -> None:
    a, b = Replica.in_memory(clock=ManualClock()), Replica.in_memory(clock=ManualClock())
    _attach(a, [b"named"])
    file = tmp_path / "a.car"
    export_car(a, file)
    stray = b"nobody names me"
    sneaky = _rewrite(file, {}, [(CID.of_raw(stray), stray)])
    summary = import_car(b, sneaky)
    assert not b.store.has_blocks([CID.of_raw(stray)]) and summary.artifacts == 1
    assert summary.skipped_total == 1 and summary.skipped[0]["cid"] == str(CID.of_raw(stray))


def test_a_named_block_that_is_no_manifest_is_refused(tmp_path: Path) -> None:
    a, b = Replica.in_memory(clock=ManualClock()), Replica.in_memory(clock=ManualClock())
    fake = codec.encode({"chunks": [], "size": 0, "type": "convgraph/chunks", "v": 1})  # too few chunks
    a.write("c", "user_message", {"content": "see"}, refs=[CID.of_record(fake)])
    file = tmp_path / "a.car"
    export_car(a, file)
    summary = import_car(b, _rewrite(file, {}, [(CID.of_record(fake), fake)]))
    assert [r["rule"] for r in summary.artifacts_refused] == ["manifest"]
    assert b.store.get_block(CID.of_record(fake)) is None
    assert summary.problems == ["1 artifact block(s) refused"]


def test_an_artifact_the_exporter_lacked_is_listed_missing_and_the_records_import(tmp_path: Path) -> None:
    a, b = Replica.in_memory(clock=ManualClock()), Replica.in_memory(clock=ManualClock())
    ghost = CID.of_raw(b"never put")
    a.write("c", "user_message", {"content": "see"}, refs=[ghost])
    file = tmp_path / "a.car"
    export_car(a, file)
    summary = import_car(b, file)
    assert summary.problems == [] and summary.accepted == 1 and summary.missing_artifacts == [ghost]
    assert summary.to_json()["missing_artifacts"] == [str(ghost)]
