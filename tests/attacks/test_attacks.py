"""A lying server against honest clients, end to end (docs/integrity.md §1, §4-§7).

Each server is convgraph's own app over a SQLite replica, served by uvicorn on 127.0.0.1,
made to lie with the parts an operator has: a database file put back from a copy, records
taken out, statements re-signed with its own key, two databases under one key, a false
checkpoint. The clients are real replicas, some driven through the CLI in subprocesses.
Every test asserts that the lie is found within one sync after the honest parties next
talk, with the right kind, and that its bundle proves it to `convgraph verify-evidence` in a
fresh process with nothing else (exit 0) while a copy with one bit of a signature flipped
does not (exit 1).

Attacks covered elsewhere and not repeated here: a witness asked to cosign a fork refuses
it with `not_extending`, even after a restart (tests/server/test_witness.py
`test_it_refuses_a_fork_of_what_it_cosigned_even_after_a_restart`); a server re-signing its
statements to drop a receipted record while its fingerprints match, caught as `withholding`
by `convgraph sync` exiting 3 (tests/cli/test_sync_cli.py
`test_sync_prints_a_new_finding_and_exits_3`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import cli_process
from checkpoint_world import true_payload
from convgraph import Replica, SigningKey
from convgraph.core.hlc import Hlc
from convgraph.core.keys import actor_text
from convgraph.core.record import Record, decode_record, sign_record
from convgraph.integrity.evidence import decode_bundle
from convgraph.integrity.findings import Finding
from convgraph.integrity.statement import Statement, decode_statement, sign_statement
from convgraph.replica import KEY_FILE
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import SyncReport, synchronize
from convgraph.sync.peer import ReplicaPeer
from liars import Lie, Resigning
from server.live import LiveServer

ENV = {**os.environ, "COLUMNS": "300"}
CONV = "c"
STEP_MS = 5_000  # more than the slack (1 s) between a server's states, well inside freshness (60 s)


class Skew:
    """The server's clock: the real one moved on by `offset` ms, which each phase advances, so
    its statements are ordered (§2.3) without the test waiting, and stay fresh (§4 step 1)."""

    def __init__(self) -> None:
        self.offset = 0

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset

    def step(self) -> None:
        self.offset += STEP_MS


def run(home: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = cli_process.run(["--home", str(home), *args], text=True, env=ENV, timeout=120)
    if ok:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def client(home: Path, *texts: str) -> bytes:
    """A replica in `home` (its key made on first use) that wrote `texts` into CONV; its actor."""
    with Replica.open(home) as r:
        for text in texts:
            r.say(CONV, "user", text)
        return r.actor




def serving(home: Path, clock: Skew, actors: list[bytes], lie: Lie | None = None) -> LiveServer:
    """`convgraph serve`'s app over the replica in `home`, admitting `actors` to CONV; with `lie`,
    each statement of its sync replies is replaced by what `lie` signs with the server's key."""
    replica = Replica.open(home, clock=clock, synchronous="FULL")
    app = create_app(replica, ServerConfig(access=Access.from_rules([f"{actor_text(a)}={CONV}" for a in actors])),
                     clock=clock)
    if lie is not None:
        app.add_middleware(Resigning, key=replica.key, lie=lie)
    live = LiveServer(app)
    live_close = live.close

    def close() -> None:
        live_close()
        replica.close()

    live.close = close  # type: ignore[method-assign]
    return live


@pytest.fixture
def servers() -> Iterator[list[LiveServer]]:
    """Every server a test starts is closed, even when it fails."""
    started: list[LiveServer] = []
    yield started
    for s in started:
        s.close()


def cli_sync(home: Path, target: str) -> subprocess.CompletedProcess[str]:
    return run(home, "sync", target, "--conv", CONV, ok=False)


def http_sync(home: Path, url: str) -> SyncReport:
    """An in-process replica's sync with the server, judging its statements as the CLI does."""
    with Replica.open(home) as r, HttpRemote(url, r.key) as remote:
        key = remote.identity()
        return synchronize(ReplicaPeer(r), remote, [CONV], salts=lambda: os.urandom(8), witness=r,
                           peer_key=key, clock=r.clock)


def saved(home: Path, where: Path) -> dict[str, Path]:
    """`convgraph findings --save`: each finding's bundle file, by kind."""
    run(home, "findings", "--save", str(where))
    return {decode_bundle(p.read_bytes()).kind: p for p in where.iterdir()}


def flipped(bundle: bytes) -> bytes:
    """The bundle with one bit of its first signature flipped: still a bundle, no longer a proof."""
    form = decode_bundle(bundle)
    sig = decode_statement(form.statements[0]).sig if form.statements else decode_record(form.records[0]).sig
    at = bundle.index(sig) + 63
    return bundle[:at] + bytes([bundle[at] ^ 1]) + bundle[at + 1:]


def assert_proves(path: Path, scratch: Path, kind: str) -> None:
    """`convgraph verify-evidence` in a fresh process, from an empty directory with an empty
    home, accepts the bundle (exit 0) and refuses a tampered copy (exit 1)."""
    empty = scratch / "empty"
    empty.mkdir(exist_ok=True)
    tampered = scratch / f"tampered-{path.name}"
    tampered.write_bytes(flipped(path.read_bytes()))
    for file, code in ((path, 0), (tampered, 1)):
        proc = cli_process.run(["--home", str(empty / "home"), "verify-evidence", str(file)], cwd=empty,
                               text=True, env=ENV, timeout=60)
        assert proc.returncode == code, (file, proc.stdout, proc.stderr)
    assert decode_bundle(path.read_bytes()).kind == kind
    assert not (empty / "home").exists()  # it opened no replica


def write_bundle(finding: Finding, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{finding.id}.cgev"
    path.write_bytes(finding.bundle)
    return path


def caught(proc: subprocess.CompletedProcess[str], kind: str) -> None:
    """`convgraph sync` printed the finding and exited 3 (a new finding)."""
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"FINDING {kind} in {CONV}:" in " ".join(proc.stdout.split()), proc.stdout


# ------------------------------------------------------------ a. database rolled back


@pytest.mark.parametrize("victim", ["reader", "writer"])
def test_a_database_put_back_from_a_copy_is_a_rollback_or_a_deletion(
    tmp_path: Path, servers: list[LiveServer], victim: str
) -> None:
    # the reader only ever saw the lost records in the server's statements: rollback; the
    # writer holds the server's receipts for them: deletion. Each syncs first after the restore
    # and pushes the lost records back in that very sync: the first reply proves it.
    clock, home = Skew(), tmp_path / "server"
    writer, reader = tmp_path / "writer", tmp_path / "reader"
    actors = [client(writer, "before the backup"), client(reader)]
    servers.append(live := serving(home, clock, actors))
    assert http_sync(writer, live.url).converged
    live.close()
    shutil.copytree(home, tmp_path / "backup")  # the operator's nightly copy
    clock.step()
    servers.append(live := serving(home, clock, actors))
    client(writer, "after the backup", "and again")
    assert http_sync(writer, live.url).converged  # both receipted
    clock.step()
    assert cli_sync(reader, live.url).returncode == 0
    live.close()
    shutil.rmtree(home)
    shutil.copytree(tmp_path / "backup", home)  # restored, then restarted
    clock.step()
    servers.append(live := serving(home, clock, actors))
    if victim == "reader":
        proc = cli_sync(reader, live.url)
        caught(proc, "rollback")
        bundle = saved(reader, tmp_path / "proofs")["rollback"]
        assert cli_sync(reader, live.url).returncode == 0  # one lie is reported once
    else:
        report = http_sync(writer, live.url)
        [finding] = report.findings
        assert finding.kind == "deletion"
        bundle = write_bundle(finding, tmp_path / "proofs")
    assert_proves(bundle, tmp_path, "rollback" if victim == "reader" else "deletion")


# ------------------------------------------------------------ b. receipted, then dropped


def test_records_receipted_then_dropped_are_a_deletion(tmp_path: Path, servers: list[LiveServer]) -> None:
    clock, home, writer = Skew(), tmp_path / "server", tmp_path / "writer"
    actors = [client(writer, "kept")]
    servers.append(live := serving(home, clock, actors))
    assert cli_sync(writer, live.url).returncode == 0
    client(writer, "receipted, then dropped")
    clock.step()
    assert cli_sync(writer, live.url).returncode == 0  # the server receipts it
    live.close()
    # the operator rebuilds the database without the last record, under the same key
    with Replica.open(home) as old:
        dropped = old.records(CONV)[-1]
        kept = [r.data for r in old.records(CONV) if r.cid != dropped.cid]
    shutil.move(home / KEY_FILE, tmp_path / KEY_FILE)
    shutil.rmtree(home)
    home.mkdir()
    shutil.move(tmp_path / KEY_FILE, home / KEY_FILE)
    with Replica.open(home) as rebuilt:
        rebuilt.ingest(kept)
    clock.step()
    servers.append(live := serving(home, clock, actors))
    proc = cli_sync(writer, live.url)  # it pushes the record again, and the first reply proves the drop
    caught(proc, "deletion")
    bundle = saved(writer, tmp_path / "proofs")["deletion"]
    [listed] = json.loads(run(writer, "findings", "--json").stdout)["findings"]
    assert str(dropped.cid) in listed["cites"], listed
    assert_proves(bundle, tmp_path, "deletion")


# ------------------------------------------------------------ c. in sync, storing nothing


def _holds_nothing(key: SigningKey, st: Statement) -> bytes:
    """What a server that keeps nothing signs: no records, no heads, yet receipts for a push."""
    return sign_statement(key, st.conv, 0, [], st.time_ms, stored=st.stored).data


def test_a_server_that_receipts_a_push_while_signing_that_it_holds_nothing_is_withholding(
    tmp_path: Path, servers: list[LiveServer]
) -> None:
    clock, home, writer = Skew(), tmp_path / "server", tmp_path / "writer"
    actors = [client(writer, "one", "two")]
    servers.append(live := serving(home, clock, actors, lie=_holds_nothing))
    proc = cli_sync(writer, live.url)  # the very push is caught: its receipt names what its heads lack
    caught(proc, "withholding")
    assert "converged" not in proc.stdout.replace("not converged", "")
    assert_proves(saved(writer, tmp_path / "proofs")["withholding"], tmp_path, "withholding")


# ------------------------------------------------------------ d. a split view


def test_two_clients_shown_two_histories_find_server_equivocation_when_they_meet(
    tmp_path: Path, servers: list[LiveServer]
) -> None:
    # one server key over two databases, each client sent to one of them: each alone sees
    # an honest server. (Two listeners stand for a server that answers by who asks: a
    # client knows the server by its key, not by its address.)
    clock, c2, c3 = Skew(), tmp_path / "c2", tmp_path / "c3"
    actors = [client(c2, "what c2 wrote"), client(c3, "what c3 wrote")]
    (tmp_path / "view3").mkdir()
    with Replica.open(tmp_path / "view2"):
        pass
    shutil.copy2(tmp_path / "view2" / KEY_FILE, tmp_path / "view3" / KEY_FILE)
    servers.append(shown_c2 := serving(tmp_path / "view2", clock, actors))
    servers.append(shown_c3 := serving(tmp_path / "view3", clock, actors))
    assert cli_sync(c2, shown_c2.url).returncode == 0
    alone = http_sync(c3, shown_c3.url)
    assert alone.converged and not alone.findings
    met = run(c3, "sync", str(c2), "--conv", CONV, ok=False)  # honest replicas meet, and gossip
    caught(met, "server_equivocation")
    assert_proves(saved(c3, tmp_path / "proofs")["server_equivocation"], tmp_path, "server_equivocation")


# ------------------------------------------------------------ e. a false checkpoint


@pytest.mark.parametrize("check", ["count", "heads"])
def test_a_checkpoint_served_with_a_false_count_or_false_heads_is_unverifiable(
    tmp_path: Path, servers: list[LiveServer], check: str
) -> None:
    clock, home, writer, reader = Skew(), tmp_path / "server", tmp_path / "writer", tmp_path / "reader"
    actors = [client(writer, "one", "two", "three"), client(reader)]
    servers.append(live := serving(home, clock, actors))
    assert cli_sync(writer, live.url).returncode == 0
    live.close()
    with Replica.open(home, clock=clock) as server:  # the operator signs a checkpoint that lies
        turns = server.records(CONV)
        if check == "count":
            payload = true_payload(server, [turns[-1].cid])
            payload["count"] += 1
        else:  # a head that is an ancestor of another head
            payload = true_payload(server, [turns[0].cid, turns[-1].cid])
        false = server.write(CONV, "checkpoint", payload)
    clock.step()
    servers.append(live := serving(home, clock, actors))
    proc = cli_sync(reader, live.url)
    caught(proc, "unverifiable_checkpoint")
    bundle = saved(reader, tmp_path / "proofs")["unverifiable_checkpoint"]
    form = decode_bundle(bundle.read_bytes())
    assert form.claim == {"checkpoint": false.cid, "check": check}
    assert_proves(bundle, tmp_path, "unverifiable_checkpoint")


# ------------------------------------------------------------ g. a record equivocation hidden


AUTHOR = SigningKey(bytes([7]) * 32)


def _turn(seq: int, *parents: Record, text: str) -> Record:
    return sign_record(AUTHOR, conv=CONV, seq=seq, hlc=Hlc(1_000 + seq, 0), parents=[p.cid for p in parents],
                       kind="user_message", payload={"content": text})


def test_a_server_that_drops_one_of_two_equivocating_records_is_caught_when_clients_meet(
    tmp_path: Path, servers: list[LiveServer]
) -> None:
    # the author signed two records at seq 2; the server keeps one and serves only that, so
    # its own clients never see the pair. A client that got the other elsewhere meets one.
    first = _turn(1, text="do we ship?")
    yes, no = _turn(2, first, text="I said yes"), _turn(2, first, text="I said no")
    clock, home, c2, c3 = Skew(), tmp_path / "server", tmp_path / "c2", tmp_path / "c3"
    with Replica.open(home) as server:
        server.ingest([first.data, yes.data])
    with Replica.open(c2) as other:
        other.ingest([first.data, no.data])
    servers.append(live := serving(home, clock, [client(c3)]))
    assert cli_sync(c3, live.url).returncode == 0  # it sees one consistent history
    met = run(c3, "sync", str(c2), "--conv", CONV, ok=False)
    caught(met, "record_equivocation")
    bundle = saved(c3, tmp_path / "proofs")["record_equivocation"]
    assert {decode_record(r).cid for r in decode_bundle(bundle.read_bytes()).records} == {yes.cid, no.cid}
    assert_proves(bundle, tmp_path, "record_equivocation")
