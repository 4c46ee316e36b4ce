"""Sync over compacted history, with real SQLite replicas and a real `convgraph serve`.

A replica that lacks compacted records receives the conversation's base and adopts it, so
it folds, resumes and syncs on byte for byte like the server; a repeat sync is one round
trip whichever side compacted; records written after a checkpoint flow both ways; and a
base that does not vouch for itself, or whose signer the policy does not trust, is refused
by rule with nothing stored.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import cli_process
from convgraph import ManualClock, Replica, sync_replicas
from convgraph.core import codec
from convgraph.core.hlc import Hlc
from convgraph.core.keys import actor_text
from convgraph.core.record import RecordMeta
from convgraph.projections.transcript import transcript_bytes
from convgraph.projections.turn import ToolCall
from convgraph.replica.adoption import encode_cover
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.sync import wire
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import SyncReport, synchronize
from convgraph.sync.peer import ReplicaPeer, trusting
from convgraph.sync.responder import Responder
from server.live import LiveServer
from servers import ServeProcess

T0 = 1_700_000_000_000
PROVIDERS = ("anthropic", "openai", "openai-responses", "gemini")


def _salts() -> bytes:
    return os.urandom(8)


def converse(r: Replica, conv: str = "c", n: int = 3) -> None:
    """Turns of every role, a tool exchange included, so that resume has something to repair."""
    for i in range(n):
        r.say(conv, "user", f"question {i}")
        r.say(conv, "assistant", f"let me look {i}", tool_calls=[ToolCall(f"t{i}", "lookup", {"q": i})])
        r.say(conv, "tool", f"found {i}", tool_use_id=f"t{i}")
        r.say(conv, "assistant", f"answer {i}")


def same_history(a: Replica, b: Replica, conv: str = "c") -> None:
    assert transcript_bytes(a.transcript(conv)) == transcript_bytes(b.transcript(conv))
    for provider in PROVIDERS:
        assert json.dumps(a.resume(conv, provider)) == json.dumps(b.resume(conv, provider)), provider
    assert a.heads(conv) == b.heads(conv) and a.store.count(conv) == b.store.count(conv)


def open_replica(path: Path, clock: ManualClock) -> Replica:
    return Replica.open(path, clock=clock)


def cli_sync(home: Path, url: str, conv: str) -> dict[str, Any]:
    """`convgraph sync URL --conv CONV --json` as a process of its own; its summary."""
    proc = cli_process.run(["--home", str(home), "sync", url, "--conv", conv, "--json"], text=True, timeout=120)
    summary: dict[str, Any] = json.loads(proc.stdout)
    assert proc.returncode == (0 if summary["ok"] else 1), proc.stderr
    return summary


# ---------------------------------------------------------------- over a real server


def test_a_fresh_replica_syncs_a_compacted_conversation_from_a_server_and_resumes_it(tmp_path: Path) -> None:
    home, client = tmp_path / "server", tmp_path / "client"
    with Replica.open(home) as server:
        converse(server)
        server.checkpoint("c", compact=True)
        server.say("c", "user", "written after the checkpoint")
    with Replica.open(client) as fresh:
        allow = f"{actor_text(fresh.actor)}=c"
    with ServeProcess(home, "--allow", allow) as serve:
        first = cli_sync(client, serve.url, "c")
        assert first["ok"], first
        conv = first["conversations"]["c"]
        assert conv["converged"] and not conv["gone"] and conv["adopted"] == 13  # 12 turns, the checkpoint
        again = cli_sync(client, serve.url, "c")
        assert again["ok"] and again["round_trips"] == 1, again
    with Replica.open(home) as server, Replica.open(client) as fresh:
        same_history(fresh, server)
        assert fresh.verify().ok and fresh.verify().headers_only == 12
        fresh.say("c", "user", "resumed on the fresh replica")  # it builds on the adopted history
    with ServeProcess(home, "--allow", allow) as serve:
        back = cli_sync(client, serve.url, "c")
        assert back["ok"] and back["conversations"]["c"]["accepted_there"] == 1, back
    with Replica.open(home) as server, Replica.open(client) as fresh:
        same_history(fresh, server)


# ---------------------------------------------------------------- every combination, in process


def _full_and_compacted(tmp: Path) -> tuple[Replica, Replica]:
    clock = ManualClock(T0)
    client, server = open_replica(tmp / "client", clock), open_replica(tmp / "server", clock)
    converse(server)
    sync_replicas(client, server, ["c"])
    return client, server


def _server_compacted(tmp: Path) -> tuple[Replica, Replica]:
    client, server = _full_and_compacted(tmp)
    server.checkpoint("c", compact=True)
    return client, server


def _client_compacted(tmp: Path) -> tuple[Replica, Replica]:
    client, server = _full_and_compacted(tmp)
    client.checkpoint("c", compact=True)
    return client, server


def _both_at_one_checkpoint(tmp: Path) -> tuple[Replica, Replica]:
    client, server = _server_compacted(tmp)
    client.store.close()
    fresh = open_replica(tmp / "fresh", ManualClock(T0))
    sync_replicas(fresh, server, ["c"])  # adopts the server's checkpoint
    return fresh, server


def _both_at_different_checkpoints(tmp: Path) -> tuple[Replica, Replica]:
    client, server = _both_at_one_checkpoint(tmp)
    converse(client, n=1)
    client.checkpoint("c", compact=True)  # covers the server's checkpoint and what came after
    converse(server, n=1)
    return client, server


SHAPES: dict[str, Callable[[Path], tuple[Replica, Replica]]] = {
    "full client, compacted server": _server_compacted,
    "compacted client, full server": _client_compacted,
    "both compacted at one checkpoint": _both_at_one_checkpoint,
    "compacted at different checkpoints": _both_at_different_checkpoints,
}


@pytest.mark.parametrize("shape", SHAPES)
def test_repeat_syncs_against_compacted_peers_take_one_round_trip(tmp_path: Path, shape: str) -> None:
    client, server = SHAPES[shape](tmp_path)
    first = sync_replicas(client, server, ["c"])
    assert first.converged and not first.convs["c"].gone and not first.convs["c"].rejected_here
    same_history(client, server)
    for _ in range(2):
        again = sync_replicas(client, server, ["c"])
        assert (again.converged, again.round_trips, again.bytes_received < 1024) == (True, 1, True)
    assert client.verify().ok and server.verify().ok


def test_records_after_the_checkpoint_flow_both_ways_and_a_late_child_of_a_compacted_record_validates(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0)
    server, other = open_replica(tmp_path / "server", clock), open_replica(tmp_path / "other", clock)
    converse(server)
    sync_replicas(other, server, ["c"])
    late = other.say("c", "assistant", "written before the checkpoint, sent after it")
    server.checkpoint("c", compact=True)  # compacts every record `late` names as parent
    fresh = open_replica(tmp_path / "fresh", clock)
    assert sync_replicas(fresh, server, ["c"]).converged
    assert set(late.parents) <= set(fresh.store.metas(late.parents))  # held as headers only
    assert all(fresh.store.get(p) is None for p in late.parents)
    from_other = sync_replicas(fresh, other, ["c"])  # other holds the full history and `late`
    assert from_other.converged and not from_other.convs["c"].rejected_here
    assert fresh.store.get(late.cid) == late.data  # validated against the adopted headers
    mine = fresh.say("c", "user", "from the fresh replica")
    theirs = server.say("c", "user", "from the server")
    both = sync_replicas(fresh, server, ["c"])
    assert both.converged and fresh.store.get(theirs.cid) == theirs.data
    assert server.store.get(mine.cid) == mine.data and server.store.get(late.cid) == late.data
    same_history(fresh, server)


# ---------------------------------------------------------------- what is refused


def _headers(cover: bytes) -> list[RecordMeta]:
    return [RecordMeta(h["cid"], "c", h["actor"], h["seq"], Hlc(*h["hlc"]), tuple(h["parents"]))
            for h in codec.decode(cover)["headers"]]


def _wrong_snapshot(base: wire.Base) -> wire.Base:
    return wire.Base(base.checkpoint, base.snapshot.replace(b"question 1", b"question X"), base.cover)


def _contradicting_cover(base: wire.Base) -> wire.Base:
    m = _headers(base.cover)
    lie = [*m[:-1], m[-1]._replace(hlc=Hlc(m[-1].hlc.wall_ms + 1, 0))]
    return wire.Base(base.checkpoint, base.snapshot, encode_cover(codec.decode(base.cover)["checkpoint"], lie))


FORGERIES: dict[str, tuple[Callable[[wire.Base], wire.Base], str]] = {
    "wrong snapshot": (_wrong_snapshot, "snapshot"),
    "cover that contradicts": (_contradicting_cover, "cover"),
    "untrusted signer": (lambda base: base, "untrusted_checkpoint"),
}


def hostile(responder: Responder, forge: Callable[[wire.Base], wire.Base]) -> Callable[[bytes], bytes]:
    def answer(message: bytes) -> bytes:
        reply = wire.decode(responder.receive(message))
        sections = tuple(s if s.base is None else dataclasses.replace(s, base=forge(s.base))
                         for s in reply.sections)
        return wire.encode(wire.Message(reply.kind, reply.salt, sections))

    return answer


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_or_untrusted_base_is_refused_and_nothing_is_stored(tmp_path: Path, forgery: str) -> None:
    clock = ManualClock(T0)
    server = open_replica(tmp_path / "server", clock)
    converse(server)
    server.checkpoint("c", compact=True)
    after = server.say("c", "user", "after the checkpoint")
    fresh = open_replica(tmp_path / "fresh", clock)
    forge, rule = FORGERIES[forgery]
    trusted = [fresh.actor] if forgery == "untrusted signer" else [fresh.actor, server.actor]
    report: SyncReport = synchronize(
        ReplicaPeer(fresh, adopt_from=trusting(trusted)), hostile(Responder(ReplicaPeer(server), key=server.key, clock=server.clock), forge),
        ["c"], salts=_salts)
    conv = report.convs["c"]
    assert [r for _, r, _ in conv.rejected_here] == [rule] and not report.converged
    assert fresh.store.count() == 0 and fresh.store.snapshot("c") is None
    assert fresh.store.pending_get([after.cid])  # what came after waits for the base
    assert sync_replicas(fresh, server, ["c"]).converged  # the genuine base is still adopted


def test_a_server_adopts_no_base_signed_by_a_key_it_does_not_trust(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    client = open_replica(tmp_path / "client", clock)
    converse(client)
    client.checkpoint("c", compact=True)
    server = open_replica(tmp_path / "server", clock)
    report = synchronize(ReplicaPeer(client), Responder(ReplicaPeer(server), key=server.key, clock=server.clock).receive, ["c"], salts=_salts)
    assert [r.rule for r in report.convs["c"].rejected_there] == ["untrusted_checkpoint"]
    assert not report.converged and server.store.count() == 0 and server.store.snapshot("c") is None


def test_a_server_adopts_a_writer_s_own_base_and_refuses_a_reader_s(tmp_path: Path) -> None:
    writer, reader = Replica.open(tmp_path / "writer"), Replica.open(tmp_path / "reader")
    for r, conv in ((writer, "w"), (reader, "r")):
        converse(r, conv, n=1)
        r.checkpoint(conv, compact=True)
    rules = [f"{actor_text(writer.actor)}=w", f"{actor_text(reader.actor)}=r:read"]
    with Replica.open(tmp_path / "server") as server:
        config = ServerConfig(access=Access.from_rules(rules))
        with LiveServer(create_app(server, config)) as live:
            with HttpRemote(live.url, writer.key) as remote:
                pushed = synchronize(ReplicaPeer(writer), remote, ["w"], salts=_salts)
            with HttpRemote(live.url, reader.key) as remote:
                refused = synchronize(ReplicaPeer(reader), remote, ["r"], salts=_salts)
        assert pushed.converged and pushed.convs["w"].accepted_there == 1  # the base, with its 4 headers
        same_history(writer, server, "w")
        assert [r.rule for r in refused.convs["r"].rejected_there] == ["forbidden"]
        assert server.store.count("r") == 0 and server.store.snapshot("r") is None
