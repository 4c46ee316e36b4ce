"""The file transport: two replicas sync through a shared folder, answered by a watcher."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import cli_process
from convgraph import Config, Replica, transcript_bytes
from convgraph.errors import ProtocolError, SyncTimeoutError, TransportError
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.responder import Responder
from convgraph.sync.spool import SpoolTransport, answer_spool, prepare
from servers import SpoolProcess


@pytest.fixture
def answered(tmp_path: Path) -> Iterator[tuple[Replica, Path, list[int]]]:
    remote, spool, stop, counts = Replica.in_memory(), tmp_path / "spool", threading.Event(), []
    prepare(spool)
    watchers = [threading.Thread(target=lambda: counts.append(
        answer_spool(Responder(ReplicaPeer(remote), key=remote.key, clock=remote.clock).receive, spool, stop=stop))) for _ in range(2)]
    for w in watchers:  # two answerers on one folder: each request is still answered once
        w.start()
    yield remote, spool, counts
    stop.set()
    for w in watchers:
        w.join(5)


def test_two_replicas_converge_through_a_folder(answered: tuple[Replica, Path, list[int]]) -> None:
    remote, spool, _ = answered
    local = Replica.in_memory()
    for i in range(50):
        local.say("c", "user", f"local {i}")
        remote.say("c", "assistant", f"remote {i}")
    report = synchronize(ReplicaPeer(local), SpoolTransport(spool), ["c"], salts=lambda: os.urandom(8))
    assert report.converged
    assert transcript_bytes(local.transcript("c")) == transcript_bytes(remote.transcript("c"))
    assert not list((spool / "requests").iterdir()) and not list((spool / "replies").iterdir())


def test_a_broken_message_gets_an_error_file_and_a_typed_error(answered: tuple[Replica, Path, list[int]]) -> None:
    _, spool, _ = answered
    with pytest.raises(ProtocolError, match="unsupported sync protocol version"):
        SpoolTransport(spool)(b"\x09garbage")


def test_no_answerer_is_a_transport_error_and_the_request_is_withdrawn(tmp_path: Path) -> None:
    prepare(tmp_path)
    with pytest.raises(TransportError, match="no answer"):
        SpoolTransport(tmp_path, timeout_s=0.2)(b"\x01")
    assert not list((tmp_path / "requests").iterdir())
    with pytest.raises(TransportError, match="not a sync spool"):
        SpoolTransport(tmp_path / "missing")


def test_a_sync_through_a_spool_nobody_serves_ends_at_its_deadline(tmp_path: Path) -> None:
    prepare(tmp_path)
    local = Replica.in_memory()
    local.say("c", "user", "anyone there?")
    start = time.monotonic()
    with pytest.raises(SyncTimeoutError) as caught:
        synchronize(ReplicaPeer(local), SpoolTransport(tmp_path, timeout_s=60), ["c"],
                    salts=lambda: os.urandom(8), timeout_s=0.5)
    assert caught.value.timeout_s == 0.5 and "spool" in str(caught.value)  # the spool's wait, not a later check
    assert time.monotonic() - start < 15  # not the spool's own 60 s
    assert not list((tmp_path / "requests").iterdir())  # the request was withdrawn


def test_a_spool_nobody_serves_is_waited_on_as_long_as_the_error_says(tmp_path: Path) -> None:
    """The wait and the message agree: one deadline, not a per-message wait that a retried
    session repeats (it said 60 s and waited 180 s)."""
    prepare(tmp_path)
    local = Replica.in_memory()
    local.say("c", "user", "anyone there?")
    start = time.monotonic()
    with pytest.raises(SyncTimeoutError) as caught:
        synchronize(ReplicaPeer(local), SpoolTransport(tmp_path, timeout_s=0.2), ["c"],
                    salts=lambda: os.urandom(8), timeout_s=1.0)
    waited = time.monotonic() - start
    assert "within 1 s" in str(caught.value) and waited >= 1.0
    assert f"convgraph serve --spool {tmp_path}" in str(caught.value)  # what to start
    with pytest.raises(TransportError, match=r"within 0\.2 s"):  # on its own: its own wait, as said
        SpoolTransport(tmp_path, timeout_s=0.2)(b"\x01")


def test_cli_serve_spool_and_sync_spool(tmp_path: Path) -> None:
    run = lambda *a: cli_process.run(a, text=True, timeout=60)  # noqa: E731
    for side in ("b", "a"):  # a legacy conversation both wrote (the CLI writes only rooted ones)
        with Replica.open(tmp_path / side, config=Config(legacy_writes=True)) as replica:
            replica.say("c", "user", f"from {side}")
    spool = tmp_path / "spool"
    with SpoolProcess(tmp_path / "b", spool) as server:  # its folders are there once it says so
        assert server.announced["spool"] == str(spool) and (spool / "requests").is_dir()
        done = run("--home", str(tmp_path / "a"), "sync", f"spool:{spool}", "--conv", "c")
        assert done.returncode == 0, done.stderr
        assert "converged" in done.stdout
    a = run("--home", str(tmp_path / "a"), "transcript", "--conv", "c", "--format", "json").stdout
    b = run("--home", str(tmp_path / "b"), "transcript", "--conv", "c", "--format", "json").stdout
    assert a == b and "from a" in a and "from b" in a


def test_artifacts_travel_through_a_folder_both_ways(answered: tuple[Replica, Path, list[int]]) -> None:
    remote, spool, _ = answered
    local = Replica.in_memory()
    mine, theirs = os.urandom(300_000), b"remote file"
    mine_cid, theirs_cid = local.put(mine), remote.put(theirs)
    local.write("c", "user_message", {"content": "mine"}, refs=[mine_cid])
    remote.write("c", "user_message", {"content": "theirs"}, refs=[theirs_cid])
    report = synchronize(ReplicaPeer(local), SpoolTransport(spool), ["c"], salts=lambda: os.urandom(8))
    assert report.converged and local.missing_artifacts("c") == remote.missing_artifacts("c") == []
    assert local.get_artifact(theirs_cid) == theirs and remote.get_artifact(mine_cid) == mine
