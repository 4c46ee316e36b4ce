"""Grants and revocations decide access through real processes: `convgraph serve` and `convgraph sync`.

The owner's `--allow OWNER=*` lets it create a conversation on the server; the key it grants
`write`, named in no configuration, syncs and writes; a key named nowhere is refused; after
the revocation the granted key's next sync fails (exit 2) and `convgraph sync` prints the
server's reason, which cites the revocation. Against one SQLite server, and against two
server processes over one PostgreSQL schema, the clients taking turns between them.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

import cli_process
import pg
from convgraph import Replica
from convgraph.core.keys import actor_text
from convgraph.core.rooted import conv_id
from servers import ServeProcess

NONCE = bytes(range(16))


def cli_sync(home: Path, url: str, conv: str) -> subprocess.CompletedProcess[str]:
    return cli_process.run(["--home", str(home), "sync", url, "--conv", conv, "--json"], text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "400"})


def actor_of(home: Path) -> bytes:
    with Replica.open(home) as replica:
        return replica.actor


@pytest.fixture(params=["sqlite", "postgres"])
def servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[list[str], Path]]:
    """The URLs to take turns at, and the owner's home (its key is the one `--allow` names)."""
    owner = tmp_path / "owner"
    allow = ("--allow", f"{actor_text(actor_of(owner))}=*")
    with ExitStack() as stack:
        if request.param == "sqlite":
            urls = [stack.enter_context(ServeProcess(tmp_path / "server", *allow)).url]
        else:
            dsn = request.getfixturevalue("pg_dsn")
            db = ("--db", dsn, "--schema", pg.served_schema(dsn))
            urls = [stack.enter_context(ServeProcess(tmp_path / f"server{i}", *db, *allow)).url for i in range(2)]
        yield urls, owner


def test_grants_and_revocations_decide_access_through_the_cli(
    servers: tuple[list[str], Path], tmp_path: Path,
) -> None:
    urls, owner_home = servers
    writer_home, stranger_home = tmp_path / "writer", tmp_path / "stranger"
    writer, stranger = actor_of(writer_home), actor_of(stranger_home)
    with Replica.open(owner_home) as owner:
        conv = conv_id(owner.actor, NONCE)
        owner.write(conv, "genesis", {"nonce": NONCE, "title": "design review"})
        owner.write(conv, "grant", {"grantee": writer, "rights": ["read", "write"]})
    first = cli_sync(owner_home, urls[0], conv)
    assert first.returncode == 0, first.stderr

    joined = cli_sync(writer_home, urls[-1], conv)
    assert joined.returncode == 0 and json.loads(joined.stdout)["ok"], joined.stderr
    with Replica.open(writer_home) as mine:
        mine.say(conv, "user", "hello from the writer")
    sent = cli_sync(writer_home, urls[0], conv)
    assert json.loads(sent.stdout)["conversations"][conv]["accepted_there"] == 1, sent.stderr

    refused = cli_sync(stranger_home, urls[-1], conv)
    assert refused.returncode == 2 and "admitted to no conversation" in refused.stderr, refused.stderr
    assert actor_text(stranger) in refused.stderr

    with Replica.open(owner_home) as owner:
        revocation = owner.write(conv, "revocation", {"grantee": writer, "rights": ["read"], "reason": "left"})
    assert cli_sync(owner_home, urls[-1], conv).returncode == 0
    with Replica.open(writer_home) as mine:
        mine.say(conv, "user", "written after the revocation")
    for url in urls:
        late = cli_sync(writer_home, url, conv)
        said = " ".join(late.stderr.split())
        assert late.returncode == 2 and late.stdout == "", late
        assert (f"403 no access: key {actor_text(writer)} lacks `read` in conversation {conv}: "
                f"revoked by {revocation.cid}") in said, said
