"""`Replica.verify` and `convgraph verify` over artifact blocks (docs/format.md §17.6): a block
rotted on disk, or a manifest that is not one, is an integrity failure (exit 1); artifacts a
conversation names and this replica lacks are listed and are not."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from click.testing import CliRunner

from convgraph import Replica
from convgraph.artifacts import CHUNK_SIZE, decode_manifest
from convgraph.cli.main import cli
from convgraph.core.cid import CID
from convgraph.errors import ArtifactCorruptError, ManifestError
from convgraph.store.sqlite import SqliteStore


def pattern(n: int) -> bytes:
    return bytes(i % 251 for i in range(n))


def _replica(home: Path) -> tuple[CID, CID, str]:
    """A replica holding a small and a chunked artifact, and a conversation naming a third."""
    with Replica.open(home) as r:
        small, big = r.put(b"small"), r.put(pattern(2 * CHUNK_SIZE + 1))
        conv = r.create("t")
        r.write(conv, "user_message", {"role": "user", "content": "see"}, refs=[small, big, CID.of_raw(b"absent")])
        return small, big, conv


def _rot(home: Path, cid: CID, data: bytes) -> None:
    with Replica.open(home) as r:
        path = r.store.path if isinstance(r.store, SqliteStore) else None
    assert path is not None
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE blocks SET data = ? WHERE cid = ?", (data, bytes(cid)))
    db.close()


def test_a_sound_replica_verifies_and_lists_what_it_lacks(tmp_path: Path) -> None:
    _, _, conv = _replica(tmp_path / "r")
    with Replica.open(tmp_path / "r") as r:
        report = r.verify()
    assert report.ok and report.blocks_checked == 1 + 3 + 1  # small; 3 chunks and a manifest
    assert report.missing_artifacts == {conv: [CID.of_raw(b"absent")]}
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "r"), "verify"])
    assert result.exit_code == 0, result.output


def test_a_rotten_leaf_and_a_rotten_chunk_fail_verify(tmp_path: Path) -> None:
    small, big, conv = _replica(tmp_path / "r")
    with Replica.open(tmp_path / "r") as r:
        chunk = decode_manifest(r.store.get_block(big) or b"").chunks[1]
    _rot(tmp_path / "r", small, b"SMALL")
    _rot(tmp_path / "r", chunk, b"\x00" * CHUNK_SIZE)
    with Replica.open(tmp_path / "r") as r:
        report = r.verify()
    assert not report.ok
    assert {c for c, _ in report.failures} == {small, chunk}
    assert all(isinstance(e, ArtifactCorruptError) and e.rule == "artifact_hash" for _, e in report.failures)
    assert report.missing_artifacts == {conv: [CID.of_raw(b"absent")]}  # rotten is not missing
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "r"), "verify"])
    assert result.exit_code == 1 and str(chunk) in result.output and "artifact_hash" in result.output


def test_a_block_under_a_manifest_cid_that_is_no_manifest_fails_verify(tmp_path: Path) -> None:
    """Bytes that hash to their dag-cbor CID but are a record-like map, not a manifest."""
    not_a_manifest = bytes.fromhex("a1617601")  # {"v": 1}
    cid = CID.of_record(not_a_manifest)
    with Replica.open(tmp_path / "r") as r:
        r.store.put_blocks([(cid, not_a_manifest)])
        report = r.verify()
    assert [(c, type(e)) for c, e in report.failures] == [(cid, ManifestError)]


def test_missing_chunks_of_a_held_manifest_are_listed(tmp_path: Path) -> None:
    _, big, conv = _replica(tmp_path / "r")
    with Replica.open(tmp_path / "r") as r:
        chunks = decode_manifest(r.store.get_block(big) or b"").chunks
    with Replica.open(tmp_path / "r") as r:
        path = r.store.path if isinstance(r.store, SqliteStore) else None
    assert path is not None
    db = sqlite3.connect(path)
    with db:
        db.execute("DELETE FROM blocks WHERE cid = ?", (bytes(chunks[0]),))
    db.close()
    with Replica.open(tmp_path / "r") as r:
        report = r.verify()
    assert report.ok and report.missing_artifacts == {conv: sorted([chunks[0], CID.of_raw(b"absent")])}
