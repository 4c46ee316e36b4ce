"""`convgraph sync` and `convgraph serve` as real subprocesses over real SQLite replicas.

Replica to replica through a directory, then client to server to client over HTTP with a
`convgraph serve` process on a free port of 127.0.0.1 (always stopped, even when a test
fails), then the refusals: a key the server does not admit, a target that is nothing. The
legacy conversations these sync are written in process (`legacy_say`): the CLI writes only
rooted ones, and sync treats both alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import cli_process
from convgraph import Config, Replica, SigningKey
from convgraph.cli.sync import _server_replica
from convgraph.core.cid import CID
from convgraph.core.keys import actor_text, fingerprint
from convgraph.integrity.statement import ORDER_SLACK_MS, Statement, sign_statement
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from liars import Resigning
from server.live import LiveServer
from servers import ServeProcess

CLI = [sys.executable, "-m", "convgraph.cli"]
ENV = {**os.environ, "COLUMNS": "200"}


def run(home: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = cli_process.run(["--home", str(home), *args], text=True, env=ENV, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def legacy_say(home: Path, conv: str, text: str, role: str = "user") -> str:
    """Write a turn into legacy conversation `conv` of the replica in `home`, as a version-1
    writer would have; returns its CID."""
    with Replica.open(home, config=Config(legacy_writes=True)) as replica:
        return str(replica.say(conv, role, text).cid)


def actor(home: Path) -> str:
    info = json.loads(run(home, "init", "--json").stdout)
    assert len(info["actor"]) == 52
    return str(info["actor"])


def transcript(home: Path, conv: str) -> dict[str, object]:
    body: dict[str, object] = json.loads(run(home, "transcript", "--conv", conv, "--format", "json").stdout)
    return body


def sync(home: Path, target: str, *convs: str) -> dict[str, object]:
    flags = [a for c in convs for a in ("--conv", c)]
    summary: dict[str, object] = json.loads(run(home, "sync", target, *flags, "--json").stdout)
    return summary


def one_line(text: str) -> str:
    return " ".join(text.split())  # rich wraps long messages


def test_sync_between_two_replica_directories(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    legacy_say(a, "c", "from a")
    legacy_say(a, "d", "only a has d")
    legacy_say(b, "c", "from b", "assistant")

    first = sync(a, str(b))
    assert first["ok"] is True and first["target"] == str(b)
    assert isinstance(first["round_trips"], int) and first["round_trips"] >= 1
    convs = first["conversations"]
    assert isinstance(convs, dict) and set(convs) == {"c", "d"}
    assert convs["c"]["received"] == convs["c"]["accepted_here"] == 1
    assert convs["c"]["sent"] == convs["c"]["accepted_there"] == 1
    assert convs["d"]["received"] == 0 and convs["d"]["sent"] == convs["d"]["accepted_there"] == 1
    for conv in convs.values():
        assert conv["converged"] is True and conv["rejected_here"] == conv["rejected_there"] == []
    mine, theirs = transcript(a, "c"), transcript(b, "c")
    assert mine == theirs and len(mine["turns"]) == 2  # type: ignore[arg-type]

    again = sync(a, str(b))
    assert again["ok"] is True and again["round_trips"] == 1
    for conv in again["conversations"].values():  # type: ignore[union-attr]
        assert conv["received"] == conv["sent"] == conv["accepted_here"] == conv["accepted_there"] == 0
        assert conv["converged"] is True

    text = run(b, "sync", str(a), "--conv", "c").stdout
    assert "c: received 0 (of 0), sent 0 (0 accepted, 0 released, 0 duplicate), converged" in text and "1 round trips" in text


def test_a_rooted_conversation_syncs_by_its_alias_and_arrives_with_its_title(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run(b, "init")
    run(a, "init")
    conv = run(a, "new", "trip", "--alias", "trip").stdout.strip()
    run(a, "say", "Plan three days in Lisbon.", "--conv", "trip")
    summary = sync(a, str(b), "trip")  # the alias is resolved here: the id is what is synced
    assert summary["ok"] is True and set(summary["conversations"]) == {conv}  # type: ignore[arg-type]
    assert transcript(b, conv) == transcript(a, "trip")
    (listed,) = json.loads(run(b, "conversations", "--json").stdout)["conversations"]
    owner = json.loads(run(a, "init", "--json").stdout)["fingerprint"]
    assert "Z" in listed.pop("last_activity") and len(listed.pop("last_hlc")) == 2
    assert listed == {"conv": conv, "aliases": [], "legacy": False, "owner": owner, "records": 2, "title": "trip"}
    assert not (b / "aliases.json").exists()  # aliases never leave the machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[object]:
    """Start `convgraph serve` with the given arguments and return its URL once it answers
    (`servers.ServeProcess`); every server started is stopped at teardown."""
    with contextlib.ExitStack() as started:

        def start(*args: str) -> str:
            return started.enter_context(ServeProcess(tmp_path / "server", *args)).url

        yield start


def test_push_and_pull_through_convgraph_serve(tmp_path: Path, serve: object) -> None:
    a, b2 = tmp_path / "a", tmp_path / "b2"
    a_id, b2_id = actor(a), actor(b2)
    legacy_say(a, "c", "a says hello")
    legacy_say(a, "c", "and then this", "assistant")
    access = tmp_path / "access.json"
    access.write_text(json.dumps({"conversations": {"c": {"read": [b2_id]}}}))
    url = serve("--allow", f"{a_id}=c", "--access", str(access))  # type: ignore[operator]
    health = httpx.get(url + "/v1/health").json()
    assert health["ok"] is True and health["protocol"] == 4 and len(health["actor"]) == 52

    pushed = sync(a, url, "c")
    assert pushed["ok"] is True and pushed["target"] == url
    c = pushed["conversations"]["c"]  # type: ignore[index]
    assert c["sent"] == c["accepted_there"] == 2 and c["received"] == 0 and c["converged"] is True

    pulled = sync(b2, url, "c")
    assert pulled["ok"] is True
    c = pulled["conversations"]["c"]  # type: ignore[index]
    assert c["received"] == c["accepted_here"] == 2 and c["sent"] == 0 and c["converged"] is True
    mine, theirs = transcript(a, "c"), transcript(b2, "c")
    assert mine == theirs and len(mine["turns"]) == 2  # type: ignore[arg-type]

    # a read-only key's push: the summary names the record by its real CID and says why
    said = legacy_say(b2, "c", "b2 may read c but not write it")
    refused = run(b2, "sync", url, "--conv", "c", ok=False)
    assert refused.returncode == 1 and "not converged: 1 record rejected by the peer" in refused.stdout
    assert f"rejected {said}: forbidden" in refused.stdout, refused.stdout



def test_a_key_the_server_does_not_admit_gets_exit_2_and_the_reason(tmp_path: Path, serve: object) -> None:
    a, stranger = tmp_path / "a", tmp_path / "stranger"
    run(stranger, "init")
    legacy_say(a, "c", "for a only")
    url = serve("--allow", f"{actor(a)}=c")  # type: ignore[operator]
    refused = run(stranger, "sync", url, "--conv", "c", ok=False)
    message = one_line(refused.stderr)
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr and "403" in message, message
    assert json.loads(run(stranger, "conversations", "--json").stdout)["conversations"] == []
    # the server's reason ("key … is admitted to no conversation") is what tells the user why
    assert "admitted to no conversation" in message, f"the server's reason is not shown: {message!r}"
    assert f"hint: a server admits this key with `convgraph serve --allow {actor(stranger)}=CONVERSATION`" in message


def test_a_refusal_names_the_allow_rule_and_that_rule_admits_the_key(tmp_path: Path, serve: object) -> None:
    """`--allow KEY=team` names a legacy conversation "team", not the laptop's local alias: the
    403 says which rule would admit the key, and a server started with it does."""
    laptop = tmp_path / "laptop"
    key = actor(laptop)
    conv = run(laptop, "new", "team plan", "--alias", "team").stdout.strip()
    run(laptop, "say", "--conv", "team", "Kick-off at 10.")
    refused = run(laptop, "sync", serve("--allow", f"{key}=team"), "--conv", "team", ok=False)  # type: ignore[operator]
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    hint = re.search(r"^hint: .*`convgraph serve (--allow \S+)`", refused.stderr, re.MULTILINE)
    assert hint, refused.stderr
    assert hint[1] == f"--allow {key}={conv}"
    assert f"`convgraph grant {key} read --conv {conv}`" in refused.stderr  # once the server holds it
    summary = sync(laptop, serve(hint[1].split()[0], hint[1].split()[1]), "team")  # type: ignore[operator]
    assert summary["ok"] is True and summary["conversations"][conv]["accepted_there"] == 2  # type: ignore[index]


def test_serve_on_a_port_out_of_range_is_a_clear_error(tmp_path: Path) -> None:
    proc = run(tmp_path / "server", "serve", "--port", "99999", ok=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "99999 is not in the range 0<=x<=65535" in one_line(proc.stderr)
    assert "serving" not in proc.stderr


def test_serve_with_an_access_rule_naming_no_actor_is_a_clear_error(tmp_path: Path) -> None:
    proc = run(tmp_path / "server", "serve", "--port", "0", "--allow", "no-body=c", ok=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "access rule 'no-body=c': not an actor id: 'no-body'" in one_line(proc.stderr)
    assert "serving" not in proc.stderr
    run(tmp_path / "server", "init")  # "nobody" could be a short id: the server's known keys decide
    proc = run(tmp_path / "server", "serve", "--port", "0", "--allow", "nobody=c", ok=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "access rule 'nobody=c': no key known to the server replica" in one_line(proc.stderr)
    assert "serving" not in proc.stderr


def test_serve_announces_its_url_only_once_it_listens(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run(tmp_path / "server", "serve", "--port", str(port), ok=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in one_line(proc.stderr)
    assert "serving" not in proc.stderr  # no claim of a server that is not there


def test_sync_with_a_target_that_is_neither_url_nor_replica(tmp_path: Path) -> None:
    run(tmp_path / "a", "init")
    proc = run(tmp_path / "a", "sync", str(tmp_path / "nowhere") + "/", ok=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "neither a URL nor a replica directory" in one_line(proc.stderr)
    assert not (tmp_path / "nowhere").exists()  # nothing was created there


def test_sync_gives_up_at_its_timeout_against_a_server_that_dribbles(tmp_path: Path) -> None:
    from sync.hostile import Dribbler

    home = tmp_path / "a"
    run(home, "init")
    run(home, "say", "hello")
    with Dribbler(content_type="application/vnd.convgraph.sync", interval=0.5, total=60) as server:
        start = time.monotonic()
        proc = run(home, "sync", server.url, "--conv", "default", "--timeout", "2", ok=False)
        elapsed = time.monotonic() - start
        assert server.hung_up.wait(5)  # the client hung up while the server still had bytes to send
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "did not finish within 2 s" in one_line(proc.stderr), proc.stderr
    assert elapsed < 15  # a process start, 2 s, and one slow read at most; the server would take 30 s


def test_serve_prints_its_key_and_sync_pins_it_and_refuses_another(tmp_path: Path, serve: object) -> None:
    a = tmp_path / "a"
    legacy_say(a, "c", "pinned")
    url = serve("--allow", f"{actor(a)}=c")  # type: ignore[operator]
    key = httpx.get(url + "/.well-known/convgraph").json()["key"]
    first = sync(a, url, "c")
    assert first["ok"] is True and first["peer_key"] == key
    pinned = a / "remotes.json"
    assert json.loads(pinned.read_text()) == {"pins": {url: key}}

    pinned.write_text(json.dumps({"pins": {url: "00" * 32}}))  # as if the server had answered another key first
    refused = run(a, "sync", url, "--conv", "c", ok=False)
    message = one_line(refused.stderr)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert "now answers with key" in message and "--accept-new-key" in message, message
    assert json.loads(pinned.read_text()) == {"pins": {url: "00" * 32}}  # a refusal changes no pin

    accepted = json.loads(run(a, "sync", url, "--conv", "c", "--accept-new-key", "--json").stdout)
    assert accepted["ok"] is True and json.loads(pinned.read_text()) == {"pins": {url: key}}


def test_serve_announces_the_key_it_signs_statements_with(tmp_path: Path) -> None:
    home = tmp_path / "server"
    with ServeProcess(home) as server:
        announced = server.announced
    said = one_line(server.log)  # whole once it has stopped
    with Replica.open(home) as replica:
        expected = f"server key {replica.actor.hex()} (fingerprint {fingerprint(replica.actor)})"
    serving = f"serving {home / 'replica.sqlite'} on {server.url} as {actor_text(replica.actor)}"
    assert said.endswith(f"{serving} {expected}"), said  # the announcement comes last (warnings before it)
    assert (announced["key"], announced["fingerprint"]) == (replica.actor.hex(), fingerprint(replica.actor))


def test_sync_prints_a_new_finding_and_exits_3(tmp_path: Path) -> None:
    a = tmp_path / "a"
    first = legacy_say(a, "c", "first")
    legacy_say(a, "c", "second")
    server = Replica.open(tmp_path / "server")
    app = create_app(server, ServerConfig(access=Access.from_rules([f"{actor(a)}=c"])))
    honest = LiveServer(app)
    try:
        assert sync(a, honest.url, "c")["ok"] is True  # both records receipted
    finally:
        honest.close()
    lying = create_app(server, ServerConfig(access=Access.from_rules([f"{actor(a)}=c"])))
    # each reply's statement re-signed with the server's key, naming only the first record, 2 s later
    def away(key: SigningKey, true: Statement) -> bytes:
        return sign_statement(key, true.conv, 1, [CID.parse(first)], true.time_ms + 2_000).data

    lying.add_middleware(Resigning, key=server.key, lie=away)
    with LiveServer(lying) as live:
        pinned = json.loads((a / "remotes.json").read_text())["pins"]
        (a / "remotes.json").write_text(json.dumps({"pins": {live.url: pinned[honest.url]}}))
        caught = run(a, "sync", live.url, "--conv", "c", ok=False)
        as_json = run(a, "sync", live.url, "--conv", "c", "--json", ok=False)
    server.close()
    assert caught.returncode == 3, caught.stderr + caught.stdout
    assert "FINDING withholding in c:" in one_line(caught.stdout), caught.stdout
    assert one_line(caught.stdout).count("withholding") == 1, caught.stdout  # the kind said once
    assert as_json.returncode == 1  # the same evidence again is no new finding: still not converged
    summary = json.loads(as_json.stdout)
    assert summary["findings"] == [] and summary["ok"] is False
    listed = json.loads(run(a, "findings", "--json").stdout)
    assert [f["kind"] for f in listed["findings"]] == ["withholding"], listed


def test_readme_catching_a_lying_server(tmp_path: Path) -> None:
    """The README's "Catching a lying server", as processes: a server put back from its own
    backup is caught by the next `convgraph sync` (exit 3), with a bundle that proves it anywhere."""
    laptop, home, backup, proofs = (tmp_path / n for n in ("laptop", "server", "backup", "proofs"))
    run(laptop, "init")
    conv = json.loads(run(laptop, "new", "team plan", "--alias", "team", "--json").stdout)["conv"]
    allow = ("--allow", f"{actor(laptop)}={conv}")
    run(laptop, "say", "--conv", "team", "Kick-off at 10.")
    with ServeProcess(home, *allow) as server:
        run(laptop, "sync", server.url, "--conv", "team")
    shutil.copytree(home, backup)  # the operator's backup
    with ServeProcess(home, *allow) as server:
        run(laptop, "say", "--conv", "team", "Moved to 11.")
        run(laptop, "sync", server.url, "--conv", "team")  # the server receipts the new turn
    # statements less than ORDER_SLACK_MS apart are not ordered (docs/integrity.md §2.3): the
    # restored server must answer later than that, which waiting guarantees whatever the load
    time.sleep(ORDER_SLACK_MS / 1000 + 0.1)
    shutil.rmtree(home)
    shutil.copytree(backup, home)  # restored from the backup: the receipted turn is gone
    with ServeProcess(home, *allow) as server:
        caught = run(laptop, "sync", server.url, "--conv", "team", ok=False)
    assert caught.returncode == 3, caught.stdout + caught.stderr
    assert f"FINDING deletion in {conv}:" in one_line(caught.stdout), caught.stdout
    assert one_line(caught.stdout).count("deletion") == 1, caught.stdout  # not "deletion: deletion: …"
    run(laptop, "findings", "--save", str(proofs))
    [bundle] = proofs.iterdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proved = cli_process.run(["--home", str(elsewhere / "home"), "verify-evidence", str(bundle)],
                             cwd=elsewhere, text=True, env=ENV, timeout=60)
    assert proved.returncode == 0, proved.stdout + proved.stderr


def test_the_sqlite_server_fsyncs_every_commit_so_its_receipts_survive_a_power_loss(tmp_path: Path) -> None:
    """docs/integrity.md §2.3: a receipt promises its records for good, so `serve` (and
    `serve --spool`, which signs receipts too) runs SQLite at synchronous=FULL."""
    run(tmp_path / "server", "init")
    replica, listen, nonces = _server_replica(tmp_path / "server", None, "convgraph")
    with replica:
        assert (listen, nonces) == (None, None)
        assert replica.store.synchronous == "FULL"  # type: ignore[attr-defined]
    with Replica.open(tmp_path / "server") as client:  # a client's own replica keeps the faster default
        assert client.store.synchronous == "NORMAL"  # type: ignore[attr-defined]


def test_a_rejected_record_is_named_by_its_cid_once(tmp_path: Path) -> None:
    """A peer's record that fails its signature is reported once, by CID, although the second
    session is sent it again (it read `rejected ?: signature`, twice)."""
    a, b = tmp_path / "a", tmp_path / "b"
    run(a, "init")
    legacy_say(b, "c", "hello there")
    legacy_say(b, "c", "second one")
    db = sqlite3.connect(b / "replica.sqlite")  # the peer's copy of the second turn, altered
    db.execute("UPDATE records SET data = replace(data, CAST('second' AS BLOB), CAST('secOnd' AS BLOB))")
    db.commit()
    db.close()
    proc = run(a, "sync", str(b), "--conv", "c", ok=False)
    assert proc.returncode == 1, proc.stderr
    rejected = [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("rejected ")]
    assert len(rejected) == 1 and re.fullmatch(r"rejected bafyrei[a-z2-7]{52}: signature", rejected[0]), proc.stdout
    assert "1 record rejected here" in proc.stdout
