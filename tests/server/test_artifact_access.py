"""Artifacts over a real `convgraph serve`: readers fetch them, others cannot, by any route.

"A key that cannot read the conversation cannot fetch its artifacts, even by guessing a CID":
a stranger admitted to another conversation asks `GET /v1/artifacts/{cid}` (whole and
`?block=1`) and sends sync WANTs (`needs`) naming the CIDs under its own conversation and
under the guarded one; it gets the same 404 as for a CID that exists nowhere, no block,
and a 403 for the guarded section.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from convgraph import Replica
from convgraph.artifacts.blocks import CHUNK_SIZE, Manifest, decode_manifest, encode_manifest
from convgraph.core.cid import CID
from convgraph.core.keys import actor_text
from convgraph.errors import ForbiddenError, NotFoundError
from convgraph.sync import wire
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.wire import Kind, Message, Section
from servers import ServeProcess

_salt = itertools.count(1)
SIZES = [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 5]


def salts() -> bytes:
    return next(_salt).to_bytes(8, "big")


@pytest.fixture
def homes(tmp_path: Path) -> Iterator[tuple[str, Replica, Replica, Replica]]:
    owner, reader, stranger = (Replica.open(tmp_path / n) for n in ("owner", "reader", "stranger"))
    rules = [f"{actor_text(owner.actor)}=team", f"{actor_text(reader.actor)}=team:read",
             f"{actor_text(stranger.actor)}=lobby"]
    try:
        with ServeProcess(tmp_path / "server", *(x for r in rules for x in ("--allow", r))) as server:
            yield server.url, owner, reader, stranger
    finally:
        for r in (owner, reader, stranger):
            r.close()


def _sync(replica: Replica, url: str, conv: str) -> object:
    with HttpRemote(url, replica.key) as remote:
        return synchronize(ReplicaPeer(replica), remote, [conv], salts=salts)


def test_readers_fetch_artifacts_and_nobody_else_can_by_any_route(
    homes: tuple[str, Replica, Replica, Replica],
) -> None:
    url, owner, reader, stranger = homes
    rng = random.Random(7)
    data = [rng.randbytes(n) for n in SIZES]
    cids = [owner.put(d) for d in data]
    owner.write("team", "user_message", {"content": "the files"}, refs=cids)
    pushed = _sync(owner, url, "team")
    assert pushed.converged and pushed.convs["team"].blocks_sent == 4 + 3 + 5  # 4 leaves; 2 and 4 chunks with their manifests; type: ignore[attr-defined]

    pulled = _sync(reader, url, "team")  # put -> sync (HTTP) -> get, both ways through the server
    assert pulled.converged and [reader.get_artifact(c) for c in cids] == data  # type: ignore[attr-defined]
    big = cids[-1]
    with HttpRemote(url, reader.key) as remote:
        assert [remote.artifact(c) for c in cids] == data
        manifest = decode_manifest(remote.artifact_block(big))
        assert remote.artifact_block(manifest.chunks[1]) == data[-1][CHUNK_SIZE : 2 * CHUNK_SIZE]

    stranger.write("lobby", "user_message", {"content": "hi"})
    _sync(stranger, url, "lobby")
    ghost = CID.of_raw(b"exists nowhere")
    with HttpRemote(url, stranger.key) as remote:
        answers = []
        for cid in [*cids, manifest.chunks[0], ghost]:
            for fetch in (remote.artifact, remote.artifact_block):
                with pytest.raises(NotFoundError) as caught:
                    fetch(cid)
                answers.append(str(caught.value).replace(str(cid), "CID").replace("?block=1", ""))
        assert len(answers) == 16 and len(set(answers)) == 1  # a held artifact and an unknown one alike
        # a WANT under its own conversation names blocks that no record of it names: nothing
        ask = Message(Kind.CONTINUE, salts(), (Section("lobby", needs=tuple(sorted({*cids, *manifest.chunks}))),))
        reply = wire.decode(remote.exchange(wire.encode(ask)))
        assert reply.sections[0].blocks == ()
        # and under the guarded conversation, the section is refused before it is read
        ask = Message(Kind.CONTINUE, salts(), (Section("team", needs=tuple(sorted(cids))),))
        with pytest.raises(ForbiddenError):
            remote.exchange(wire.encode(ask))
    assert stranger.store.has_blocks(cids) == set()


def test_naming_a_cid_in_a_conversation_of_your_own_does_not_fetch_its_bytes(
    homes: tuple[str, Replica, Replica, Replica],
) -> None:
    # the stranger learned the CIDs of the team's files (from a log, say) and names them in a
    # record of its own conversation, and a manifest of its own listing a chunk of theirs:
    # the server holds those bytes, but they never came for the stranger's conversation
    url, owner, _, stranger = homes
    secret = random.Random(11).randbytes(2 * CHUNK_SIZE + 9)
    small = b"the team's password list"
    big, leaf = owner.put(secret), owner.put(small)
    owner.write("team", "user_message", {"content": "files"}, refs=[big, leaf])
    assert _sync(owner, url, "team").converged  # type: ignore[attr-defined]
    chunk = decode_manifest(owner.store.get_block(big) or b"").chunks[0]
    lure = encode_manifest(Manifest((chunk, CID.of_raw(b"mine")), CHUNK_SIZE + 4))
    stranger.store.put_blocks([(CID.of_record(lure), lure), (CID.of_raw(b"mine"), b"mine")])
    stranger.write("lobby", "user_message", {"content": "mine now?"}, refs=[big, leaf, chunk, CID.of_record(lure)])
    report = _sync(stranger, url, "lobby")
    # the server asks for the bytes it holds only for "team": the stranger cannot send them
    assert set(report.convs["lobby"].missing_there) >= {big, leaf, chunk}  # type: ignore[attr-defined]
    with HttpRemote(url, stranger.key) as remote:
        for cid in (big, leaf, chunk):
            for fetch in (remote.artifact, remote.artifact_block):
                with pytest.raises(NotFoundError):
                    fetch(cid)
        ask = Message(Kind.CONTINUE, salts(), (Section("lobby", needs=tuple(sorted((chunk, big, leaf)))),))
        assert wire.decode(remote.exchange(wire.encode(ask))).sections[0].blocks == ()
    assert stranger.store.has_blocks([big, leaf, chunk]) == set()


def test_a_pushed_block_no_record_names_is_not_stored(homes: tuple[str, Replica, Replica, Replica]) -> None:
    url, owner, _, _ = homes
    owner.write("team", "user_message", {"content": "nothing attached"})
    _sync(owner, url, "team")
    stray = b"stray"
    with HttpRemote(url, owner.key) as remote:
        push = Message(Kind.CONTINUE, salts(), (Section("team", blocks=((CID.of_raw(stray), stray),)),))
        remote.exchange(wire.encode(push))
        with pytest.raises(NotFoundError):
            remote.artifact(CID.of_raw(stray))


def test_in_a_rooted_conversation_a_revocation_ends_artifact_reads(tmp_path: Path) -> None:
    """The authority projection decides: a grantee of `read` fetches, and from the request
    after its revocation it gets the 404 a stranger gets, by HTTP and by sync."""
    owner, reader = Replica.open(tmp_path / "owner"), Replica.open(tmp_path / "reader")
    try:
        with ServeProcess(tmp_path / "server", "--allow", f"{actor_text(owner.actor)}=*") as server:
            conv = owner.create("design")
            owner.write(conv, "grant", {"grantee": reader.actor, "rights": ["read"]})
            data = b"r" * (CHUNK_SIZE + 10)
            cid = owner.put(data)
            owner.write(conv, "user_message", {"content": "the file"}, refs=[cid])
            assert _sync(owner, server.url, conv).converged  # type: ignore[attr-defined]
            with HttpRemote(server.url, reader.key) as remote:
                assert remote.artifact(cid) == data
            owner.write(conv, "revocation", {"grantee": reader.actor, "rights": ["read"], "reason": "left"})
            _sync(owner, server.url, conv)
            with HttpRemote(server.url, reader.key) as remote:
                for fetch in (remote.artifact, remote.artifact_block):
                    with pytest.raises(NotFoundError):
                        fetch(cid)
                ask = Message(Kind.CONTINUE, salts(), (Section(conv, needs=(cid,)),))
                with pytest.raises(ForbiddenError):
                    remote.exchange(wire.encode(ask))
    finally:
        owner.close()
        reader.close()
