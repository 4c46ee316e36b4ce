"""What a conversation's artifact scope costs (`sync.artifact_scope`): `in_scope`, `take` and
`take_named` answer from the store's manifest links with the same calls however many other
manifests the conversation names, and read no block to do it; `export_blocks` reads each block
it writes once and no manifest twice (a manifest is never decoded to find its chunks); and
scope by links answers what scope by decoding every manifest would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convgraph import ManualClock, Replica, SigningKey, SqliteStore
from convgraph.artifacts.blocks import CHUNK_SIZE, Manifest, decode_manifest, encode_manifest
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.server.artifacts import readable
from convgraph.sync.artifact_scope import export_blocks, in_scope, named_scope, take, take_named
from counting_store import CountingStore

KEY, T0 = SigningKey(bytes([4]) * 32), 1_700_000_000_000


@pytest.fixture(params=["memory", "sqlite"])
def replica(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replica]:
    if request.param == "memory":
        r = Replica.in_memory(KEY, clock=ManualClock(T0))
    else:
        r = Replica(SqliteStore(tmp_path / "r.sqlite"), KEY, clock=ManualClock(T0))
    yield r
    r.close()


def manifest(tag: bytes) -> tuple[CID, bytes, list[tuple[CID, bytes]]]:
    """A manifest of two small chunks (scope checks hashes, not sizes) and those chunks."""
    chunks = [(CID.of_raw(tag + b" %d" % i), tag + b" %d" % i) for i in range(2)]
    block = encode_manifest(Manifest(tuple(c for c, _ in chunks), CHUNK_SIZE + 1))
    return CID.of_record(block), block, chunks  # a manifest's CID is dag-cbor, as a record's


def world(replica: Replica, others: int) -> tuple[str, CID, list[tuple[CID, bytes]]]:
    """A conversation naming a held manifest whose chunks are not held yet, and `others` held
    manifests with their chunks."""
    conv = replica.create(f"with {others}")
    root, block, chunks = manifest(b"target %d" % others)
    replica.store.put_blocks([(root, block)])
    refs = [root]
    for i in range(others):
        cid, data, pieces = manifest(b"other %d.%d" % (others, i))
        replica.store.put_blocks([(cid, data), *pieces])
        refs.append(cid)
    replica.write(conv, "user_message", {"content": "files"}, refs=refs)
    return conv, root, chunks


def cost_of_scope(replica: Replica, others: int) -> dict[str, int]:
    conv, root, chunks = world(replica, others)
    counting = CountingStore(replica.store)
    assert named_scope(counting.store, conv, [chunks[0][0], CID.of_raw(b"elsewhere")]) == {chunks[0][0]}
    assert in_scope(counting.store, conv, [chunks[0][0]]) == set()  # named, not come for `conv` yet
    assert take(counting.store, conv, chunks[:1]).stored == [chunks[0][0]]
    assert in_scope(counting.store, conv, [chunks[0][0]]) == {chunks[0][0]}
    outcome = take_named(counting.store, {root}, [chunks[1], (CID.of_raw(b"stray"), b"stray")])
    assert outcome.stored == [chunks[1][0]] and [r[1] for r in outcome.refused] == ["artifact_scope"]
    assert "get_block" not in counting.calls  # no manifest read, let alone decoded
    return dict(counting.calls)


def test_scope_checks_cost_the_same_beside_many_manifests(replica: Replica) -> None:
    few, many = cost_of_scope(replica, 1), cost_of_scope(replica, 30)
    assert few == many
    assert few["manifests_of"] == 4  # a look-up per call (two in `take`), not a read per manifest


def test_export_reads_each_block_once(replica: Replica) -> None:
    conv, root, chunks = world(replica, 12)
    replica.store.put_blocks(chunks)
    counting = CountingStore(replica.store)
    out = list(export_blocks(counting.store, conv, set()))
    assert len(out) == 3 * 13 and len({c for c, _ in out}) == len(out)
    assert out[out.index((root, replica.store.get_block(root) or b"")) + 1 :][:2] == sorted(chunks)
    assert counting.calls["get_block"] == len(out) and counting.calls["chunks_of"] == 1
    again = list(export_blocks(counting.store, conv, {c for c, _ in out}))
    assert again == [] and counting.calls["get_block"] == len(out)  # what was seen is not read


def reference_scope(replica: Replica, conv: str) -> set[CID]:
    """Scope as docs/sync.md states it, computed the slow way: every named CID, and the chunks
    of each named manifest held, decoded from its block."""
    named = replica.store.artifact_refs(conv)
    out = set(named)
    for cid in named:
        block = replica.store.get_block(cid)
        if block is not None and cid.codec == DAG_CBOR:
            out.update(decode_manifest(block).chunks)
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sets(st.integers(0, 5), max_size=3), st.booleans()), min_size=1, max_size=6),
       st.lists(st.sets(st.integers(0, 5), max_size=3), min_size=1, max_size=3), st.sets(st.integers(0, 2)))
def test_scope_by_links_is_scope_by_decoding(
    manifests: list[tuple[set[int], bool]], convs: list[set[int]], readers: set[int],
) -> None:
    """Manifests over a pool of six chunks, held or not; conversations naming some of them (and
    the chunks 0 and 1 directly): `in_scope` and `readable` answer what decoding would."""
    replica = Replica.in_memory(KEY, clock=ManualClock(T0))
    try:
        pool = [CID.of_raw(b"chunk %d" % i) for i in range(6)]
        roots = []
        for i, (chunks, held) in enumerate(manifests):
            listed = tuple(pool[c] for c in sorted(chunks)) or (pool[0],)
            block = encode_manifest(Manifest((*listed, CID.of_raw(b"own %d" % i)), CHUNK_SIZE * len(listed) + 1))
            roots.append(CID.of_record(block))
            if held:
                replica.store.put_blocks([(roots[-1], block)])
        ids = []
        for j, picks in enumerate(convs):
            ids.append(replica.create(f"c{j}"))
            refs = [roots[p % len(roots)] for p in sorted(picks)] + ([pool[j]] if j < 2 else [])
            if refs:
                replica.write(ids[-1], "user_message", {"content": "x"}, refs=refs)
        everything = {*pool, *roots, CID.of_raw(b"nowhere")}
        for conv in ids:
            assert named_scope(replica.store, conv, everything) == reference_scope(replica, conv) & everything
        # what may be fetched is what came for a conversation: here the held manifests each
        # one's writer named (no chunk was ever held, so none was admitted)
        allowed = {ids[r] for r in readers if r < len(ids)}
        for cid in everything:
            expected = any(cid in replica.store.artifact_refs(c) and replica.store.get_block(cid) is not None
                           for c in allowed)
            assert readable(replica.store, cid, allowed.__contains__) == expected
    finally:
        replica.close()
