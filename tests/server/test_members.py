"""The member index behind the cheap check: owners and grantees, fresh from the store, cheaply.

It must learn of a grant committed through another connection to the same database (another
server instance), and it must stay cheap: a key it knows costs no I/O, a key it does not know
costs one change-token read while the store is unchanged, and a refresh reads only what
arrived since the last one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from convgraph import Replica, SigningKey
from convgraph.core.hlc import Hlc
from convgraph.core.record import Record, sign_record
from convgraph.core.rooted import conv_id
from convgraph.server.members import MemberIndex
from convgraph.store.base import Store
from convgraph.store.sqlite import SqliteStore

OWNER, MEMBER, LATER, STRANGER = (SigningKey(bytes([i + 60]) * 32) for i in range(4))
NONCE = bytes(range(16))


class Counting:
    """A store that counts the index's reads of it."""

    def __init__(self, store: Store) -> None:
        self.store, self.tokens, self.pages, self.rows = store, 0, 0, 0

    def change_token(self) -> object:
        self.tokens += 1
        return self.store.change_token()

    def arrivals(self, cursor: int, limit: int) -> Any:
        self.pages += 1
        found, after = self.store.arrivals(cursor, limit)
        self.rows += len(found)
        return found, after


def test_the_index_learns_from_the_store_and_reads_only_what_is_new(tmp_path: Path) -> None:
    writer = Replica(SqliteStore(tmp_path / "db.sqlite"), OWNER)  # one instance writes ...
    reading = Counting(SqliteStore(tmp_path / "db.sqlite"))  # ... another's index reads
    index = MemberIndex(cast(Store, reading), page=2)
    conv = conv_id(OWNER.public, NONCE)
    legacy: list[Record] = []
    for i in range(3):  # signed and ingested: a replica may refuse to write legacy conversations
        legacy.append(sign_record(STRANGER, conv="legacy", seq=i + 1, hlc=Hlc(1 + i, 0),
                                  parents=[r.cid for r in legacy[-1:]], kind="user_message",
                                  payload={"content": f"legacy {i}"}))
    assert len(writer.ingest([r.data for r in legacy]).accepted) == 3
    writer.write(conv, "genesis", {"nonce": NONCE})
    writer.write(conv, "grant", {"grantee": MEMBER.public, "rights": ["read"]})
    writer.write(conv, "user_message", {"content": "not a grant"})

    assert index.knows(MEMBER.public) and index.knows(OWNER.public)
    assert reading.rows == 6 and reading.pages == 4  # three pages of two, and the empty one
    assert not index.knows(STRANGER.public)
    tokens, pages = reading.tokens, reading.pages
    for _ in range(5):  # the store has not changed: a token read each, nothing more
        assert not index.knows(STRANGER.public) and not index.known(STRANGER.public)
    assert reading.pages == pages and reading.tokens == tokens + 5
    tokens = reading.tokens
    assert index.known(MEMBER.public) and index.knows(MEMBER.public)
    assert reading.tokens == tokens  # a known key costs nothing

    writer.write(conv, "grant", {"grantee": LATER.public, "rights": ["read", "write"]})
    writer.write(conv, "revocation", {"grantee": MEMBER.public, "rights": ["read"]})
    rows = reading.rows
    assert not index.known(LATER.public) and index.knows(LATER.public)
    assert reading.rows == rows + 2  # only the two new records
    assert index.knows(MEMBER.public)  # revoked, still named: its refusal will cite the revocation
    writer.close()
    reading.store.close()
