"""CAR files against an independent implementation: the npm IPLD packages, driven by car_peer.mjs.

The packages are pinned by `car_peer/package-lock.json` and installed with `npm ci` into
`.cache/npm-car/` (gitignored), once per lock file. Missing node or npm fails these tests:
they are the only check that our files are CARs to anyone but ourselves.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import cli_process
from convgraph import Draft, ManualClock, Replica
from convgraph.core.cid import CID
from convgraph.sync.car import read_car, write_car

HERE = Path(__file__).resolve().parent
PEER = HERE / "car_peer"
CACHE = HERE.parents[1] / ".cache" / "npm-car"

Peer = Callable[..., Any]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not on PATH: the CAR interop tests need Node.js >= 18 and npm "
                    "(e.g. `apt-get install nodejs npm`)", pytrace=False)
    return path


def _install(npm: str) -> None:
    """`npm ci` the pinned packages into CACHE unless the same lock file is installed there."""
    wanted = hashlib.sha256((PEER / "package.json").read_bytes() + (PEER / "package-lock.json").read_bytes())
    stamp = CACHE / ".installed"
    if (CACHE / "node_modules").is_dir() and stamp.is_file() and stamp.read_text() == wanted.hexdigest():
        return
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PEER / name, CACHE / name)
    stamp.unlink(missing_ok=True)
    proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
                          cwd=CACHE, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        pytest.fail(f"npm ci of the CAR peer failed:\n{proc.stdout}\n{proc.stderr}", pytrace=False)
    stamp.write_text(wanted.hexdigest())


@pytest.fixture(scope="session")
def peer() -> Peer:
    node, npm = _tool("node"), _tool("npm")
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE.parent / "npm-car.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers share the cache: one installs, the rest wait
        _install(npm)
        # next to node_modules, so its imports resolve; replaced atomically under a running peer
        script = CACHE / "car_peer.mjs"
        part = script.with_suffix(f".{os.getpid()}.part")
        shutil.copyfile(HERE / "car_peer.mjs", part)
        os.replace(part, script)

    def run(*args: str) -> Any:
        proc = subprocess.run([node, str(script), *map(str, args)], capture_output=True, text=True,
                              timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    return run


def convgraph(home: Path, *args: str) -> tuple[int, dict[str, Any]]:
    env = {**os.environ, "CONVGRAPH_HOME": str(home)}
    proc = cli_process.run([*args, "--json"], text=True, env=env, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real signed records in four conversations, two authors, a branch and unicode."""
    home = tmp_path_factory.mktemp("interop") / "a"
    clock = ManualClock()
    other = Replica.in_memory(clock=clock)
    with Replica.open(home, clock=clock) as r:
        for conv in ("alpha", "beta", "gamma"):
            r.write_many(conv, [Draft("user_message", {"content": f"{conv} {i} · é ✓"}) for i in range(4)])
        other.ingest([d for _, d in r.store.records("alpha")])
        r.write("alpha", "user_message", {"content": "meanwhile"})
        r.ingest([other.say("alpha", "assistant", "a concurrent answer").data])  # two heads now
        first = r.say("delta", "user", [{"type": "text", "text": "blocks"}])
        r.branch("delta", "try", first.cid, purpose="an experiment")
        r.say("delta", "assistant", "on the branch", branch="try")
    return home


def records(home: Path) -> dict[str, list[tuple[CID, bytes]]]:
    with Replica.open(home) as r:
        return {c: r.store.records(c) for c in r.conversations()}


def test_npm_reads_what_we_export(peer: Peer, source: Path, tmp_path: Path) -> None:
    file = tmp_path / "ours.car"
    code, exported = convgraph(source, "export", str(file))
    assert code == 0
    held = records(source)
    order = [str(c) for recs in held.values() for c, _ in recs]
    summary = peer("check", file)
    assert summary["problems"] == [] and summary["ok"]
    assert summary["version"] == 1
    assert summary["count"] == exported["records"] == len(order) > 15
    assert summary["cids"] == order
    assert summary["roots"] == exported["roots"] and len(summary["roots"]) == 5 and summary["roots_present"]


def spec_of(source: Path, spec: Path) -> tuple[list[CID], list[tuple[CID, bytes]]]:
    """Write the records and heads of `source` for car_peer.mjs to `spec`; return them."""
    held = records(source)
    blocks = [pair for recs in held.values() for pair in recs]
    with Replica.open(source) as r:
        roots = sorted({h for c in held for h in r.heads(c)})
    spec.write_text(json.dumps({"roots": [str(c) for c in roots], "blocks": [d.hex() for _, d in blocks]}))
    return roots, blocks


def test_we_import_what_npm_writes_from_our_records(peer: Peer, source: Path, tmp_path: Path) -> None:
    held = records(source)
    spec = tmp_path / "blocks.json"
    roots, blocks = spec_of(source, spec)
    file = tmp_path / "theirs.car"
    written = peer("write-blocks", spec, file)
    assert written["cids"] == [str(c) for c, _ in blocks]  # their CIDs of our bytes are ours
    ours = tmp_path / "ours.car"
    with ours.open("wb") as fh:
        write_car(fh, roots, blocks)
    assert file.read_bytes() == ours.read_bytes()  # byte for byte the same file
    with file.open("rb") as fh:
        got_roots, got = read_car(fh)
        assert (got_roots, list(got)) == (roots, blocks)
    fresh = tmp_path / "b"
    convgraph(fresh, "init")  # only `init` makes a replica
    code, report = convgraph(fresh, "import", str(file))
    assert code == 0 and report["error"] is None and report["rejected"] == []
    assert report["accepted"] == len(blocks) and report["roots_held"]
    assert records(fresh) == held
    code, verified = convgraph(fresh, "verify")
    assert code == 0 and verified["ok"] and verified["checked"] == len(blocks)


def test_npm_values_that_are_no_records_are_rejected_not_a_crash(peer: Peer, tmp_path: Path) -> None:
    file = tmp_path / "values.car"
    written = peer("write-value", file)
    convgraph(tmp_path / "b", "init")
    code, report = convgraph(tmp_path / "b", "import", str(file))
    assert code == 1 and report["error"] is None and report["blocks"] == 2 and report["accepted"] == 0
    assert [r["cid"] for r in report["rejected"]] == written["cids"]
    assert all(r["rule"] == "schema" for r in report["rejected"])
    assert report["roots"] == written["roots"] and not report["roots_held"]


def test_we_read_past_the_blocks_npm_writes_that_are_no_records(peer: Peer, source: Path, tmp_path: Path) -> None:
    held = records(source)
    spec = tmp_path / "blocks.json"
    _, blocks = spec_of(source, spec)
    file = tmp_path / "mixed.car"
    written = peer("write-mixed", spec, file)
    convgraph(tmp_path / "b", "init")
    code, report = convgraph(tmp_path / "b", "import", str(file))
    assert code == 1 and report["error"] is None and report["blocks"] == written["count"] == len(blocks) + 3
    assert report["accepted"] == len(blocks) and report["roots_held"] and report["rejected"] == []
    assert sorted(k["cid"] for k in report["skipped"]) == sorted(written["foreign"])  # named as multiformats names them
    assert records(tmp_path / "b") == held


def test_npm_reads_a_compacted_conversation_we_export(peer: Peer, tmp_path: Path) -> None:
    home = tmp_path / "a"
    with Replica.open(home, clock=ManualClock()) as r:
        r.write_many("c", [Draft("user_message", {"content": f"{i}"}) for i in range(5)])
        r.checkpoint("c", compact=True)
        r.say("c", "user", "after")
    file = tmp_path / "c.car"
    code, exported = convgraph(home, "export", str(file))
    assert code == 0 and exported["compacted"] == 5
    summary = peer("check", file)
    assert summary["problems"] == [] and summary["count"] == exported["records"] + 2  # + cover, snapshot
    assert summary["roots_present"]
