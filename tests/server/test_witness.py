"""A witness over real HTTP (docs/integrity.md §7.4): uvicorn on 127.0.0.1 over a SQLite replica.

The client syncs its conversation to the witness and asks it to cosign (`witness_client.ask`).
The witness cosigns what extends what it cosigned last, refuses a fork with `not_extending`,
also after a restart over the same home, and refuses what it does not hold, cannot check or
finds false, each with its reason. A cosignature it gives verifies as a C2SP note line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from checkpoint_world import CONV, checkpoint_at, copy, replica, say, true_payload
from convgraph import Replica
from convgraph.core.keys import SigningKey, actor_text
from convgraph.core.record import Record
from convgraph.errors import TransportError, WitnessRefusedError
from convgraph.integrity import cosignature, note
from convgraph.replica.witness_policy import Witness
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.server.witness import cosigner_for
from convgraph.sync.http import HttpRemote
from convgraph.sync.witness_client import ask
from server.live import LiveServer

CLIENT = SigningKey(bytes([7]) * 32)
NOW_S = 1_700_000_000


@contextmanager
def witness_at(home: Path, *, as_witness: bool = True) -> Iterator[Witness]:
    """A witness server over the replica in `home`, admitting CLIENT to every conversation."""
    server = Replica.open(home)
    cosigner = cosigner_for(home, server.store, server.key, name=None, clock_s=lambda: NOW_S) if as_witness else None
    access = Access.from_rules([f"{actor_text(CLIENT.public)}=*"])
    try:
        with LiveServer(create_app(server, ServerConfig(access=access), cosigner=cosigner)) as live:
            yield Witness(note.witness_key_name(server.actor), server.actor, live.url)
    finally:
        server.close()


def _cosign(client: Replica, w: Witness, cp: Record) -> cosignature.Cosignature:
    return ask(client, w, cp, timeout_s=30)


def _refusal(client: Replica, w: Witness, cp: Record) -> str:
    with pytest.raises(WitnessRefusedError) as refused:
        _cosign(client, w, cp)
    return refused.value.reason


def test_it_cosigns_checkpoints_that_extend_and_the_line_verifies_as_c2sp(tmp_path: Path) -> None:
    client = replica(7)
    with witness_at(tmp_path / "w") as w:
        say(client, 3)
        first = client.checkpoint(CONV)
        c1 = _cosign(client, w, first)
        say(client, 5)
        second = client.checkpoint(CONV)
        c2 = _cosign(client, w, second)
        again = _cosign(client, w, second)  # a checkpoint extends itself
    for c, cp in [(c1, first), (c2, second), (again, second)]:
        assert cosignature.verify(c, cp)
        assert (c.key, c.time, c.name) == (w.key, NOW_S, w.name)
        signed = note.parse_note(note.export_note(note.checkpoint_body(cp).text, None, [c.line()]).text)
        known = note.NoteKey(w.name, w.key, note.COSIGNATURE_V1)
        assert [v.time for v in note.verify_note(signed, [known])] == [NOW_S]


def test_it_refuses_a_fork_of_what_it_cosigned_even_after_a_restart(tmp_path: Path) -> None:
    client, other = replica(7), replica(8)
    say(client, 4)
    copy(client, other)
    side = say(other, 1)[0]  # a branch beside what the client writes next
    early = client.checkpoint(CONV)
    say(client, 2)
    late = client.checkpoint(CONV)
    with witness_at(tmp_path / "w") as w:
        _cosign(client, w, late)
        assert _refusal(client, w, early) == "not_extending"  # smaller: it does not extend `late`
    with witness_at(tmp_path / "w") as w:  # a new process over the same home
        assert _refusal(client, w, early) == "not_extending"
        copy(other, client)  # a checkpoint of the side branch alone forks from `late`
        fork = checkpoint_at(client, [side.cid])
        assert _refusal(client, w, fork) == "not_extending"
        assert cosignature.verify(_cosign(client, w, late), late)


def test_it_refuses_what_it_does_not_hold_cannot_check_or_finds_false(tmp_path: Path) -> None:
    client, other = replica(7), replica(8)
    say(client, 2)
    copy(client, other)
    unseen = say(other, 1)[0]  # the witness never gets it: the client does not hold it
    waiting = client.write(CONV, "checkpoint", true_payload(other, [unseen.cid]))
    false = checkpoint_at(client, client.heads(CONV), count=99)
    with witness_at(tmp_path / "w") as w:
        with HttpRemote(w.url, client.key) as remote, pytest.raises(WitnessRefusedError) as unknown:
            remote.cosign(CONV, false.cid)  # nothing synced yet
        assert unknown.value.reason == "unknown_checkpoint"
        assert _refusal(client, w, waiting) == "unverified"
        assert _refusal(client, w, false) == "false_checkpoint"


def test_a_server_that_is_no_witness_says_so(tmp_path: Path) -> None:
    client = replica(7)
    say(client, 1)
    cp = client.checkpoint(CONV)
    with (witness_at(tmp_path / "s", as_witness=False) as w, HttpRemote(w.url, client.key) as remote,
          pytest.raises(TransportError, match="not a witness")):
        remote.cosign(CONV, cp.cid)
