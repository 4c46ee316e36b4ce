"""`convgraph sync DIR` moves the artifacts a conversation's records name, and says so."""

from __future__ import annotations

import json
from pathlib import Path

from test_sync_cli import run

from convgraph import Config, Replica
from convgraph.core.cid import CID


def test_sync_brings_artifacts_and_lists_the_missing(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run(a, "init")
    run(b, "init")
    ghost = CID.of_raw(b"nobody has this")
    with Replica.open(a, config=Config(legacy_writes=True)) as replica:
        cid = replica.put(b"z" * 300_000)
        replica.write("c", "user_message", {"content": "files"}, refs=[cid, ghost])
    summary = json.loads(run(b, "sync", str(a), "--json").stdout)
    art = summary["conversations"]["c"]["artifacts"]
    assert summary["ok"] and art["blocks_received"] == 3 and art["missing_here"] == [str(ghost)]
    with Replica.open(b) as replica:
        assert replica.get_artifact(cid) == b"z" * 300_000
    text = run(b, "sync", str(a)).stdout
    assert f"missing artifact block {ghost}" in " ".join(text.split())
