"""The `Store` contract for artifact blocks (docs/format.md §17), on every store: put, get and
has; idempotence; blocks landing with (or rolling back with) a transaction; `artifact_refs`
kept by commit for records with bytes and never for header-only ones, with the reverse look-ups
(`records_naming`, `conversations_naming`) and the manifest links `put_blocks` keeps (`chunks_of`,
`manifests_of`); and blocks of every size round-tripping through each store."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import closing, suppress

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_contract import (  # noqa: F401  (fixtures)
    KEYS,
    SERVER_EXAMPLES,
    SERVER_KINDS,
    STORE_EXAMPLES,
    T0,
    StoreMaker,
    aborted,
    chain,
    commit,
    new_store,
    rec,
)

from convgraph.artifacts import CHUNK_SIZE, Manifest, decode_manifest, encode_manifest, split
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import Record, sign_record
from convgraph.replica import artifacts as replica_artifacts
from convgraph.store.base import Store
from convgraph.store.rows import WriteSet

SIZES = [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 7]


@pytest.fixture
def store(new_store: StoreMaker) -> Iterator[Store]:  # noqa: F811
    with closing(new_store()) as s:
        yield s


def blocks(*texts: bytes) -> list[tuple[CID, bytes]]:
    return [(CID.of_raw(t), t) for t in texts]


def named(conv: str, kind: str, payload: dict[str, object], *, refs: tuple[CID, ...] = (), seq: int = 1,
          parents: tuple[Record, ...] = ()) -> Record:
    return sign_record(KEYS[0], conv=conv, seq=seq, hlc=Hlc(T0 + seq, 0), parents=[p.cid for p in parents],
                       kind=kind, payload=payload, refs=refs)


A, B, C, D, E, F = (CID.of_raw(b"artifact %d" % i) for i in range(6))


def test_put_get_has(store: Store) -> None:
    one, two = blocks(b"one", b"two")
    assert store.get_block(one[0]) is None and store.has_blocks([one[0], two[0]]) == set()
    store.put_blocks([one, two])
    assert store.get_block(one[0]) == b"one" and store.get_block(two[0]) == b"two"
    assert store.has_blocks([one[0], two[0], A]) == {one[0], two[0]}
    assert store.has_blocks([]) == set() and store.has_blocks(iter([one[0], one[0]])) == {one[0]}


def test_has_blocks_answers_for_many_cids_at_once(store: Store) -> None:
    held = blocks(*(b"block %d" % i for i in range(1_200)))
    store.put_blocks(held)
    asked = [c for c, _ in held] + [CID.of_raw(b"absent %d" % i) for i in range(700)]
    assert store.has_blocks(asked) == {c for c, _ in held}


def test_put_blocks_is_idempotent_and_keeps_the_first_bytes(store: Store) -> None:
    [(cid, data)] = blocks(b"same")
    store.put_blocks([(cid, data), (cid, data)])
    store.put_blocks([(cid, data)])
    assert store.get_block(cid) == b"same" and store.has_blocks([cid]) == {cid}


def test_put_blocks_is_not_a_commit(store: Store) -> None:
    """Blocks change no view of the records: caches keyed on the token stay valid."""
    commit(store, *chain(2))
    token = store.change_token()
    store.put_blocks(blocks(b"x", b"y"))
    assert store.change_token() == token


def test_a_transaction_that_raises_drops_its_blocks(store: Store) -> None:
    kept, dropped = blocks(b"kept"), blocks(b"dropped")
    store.put_blocks(kept)
    aborted(store, lambda: store.put_blocks(dropped))
    assert store.get_block(dropped[0][0]) is None and store.has_blocks([dropped[0][0]]) == set()
    assert store.get_block(kept[0][0]) == b"kept"
    store.put_blocks(dropped)  # and a later put of the same block lands
    assert store.get_block(dropped[0][0]) == b"dropped"


def test_blocks_land_with_the_records_of_their_transaction(store: Store) -> None:
    [record] = chain(1)
    with store.transaction():
        store.put_blocks(blocks(b"with"))
        commit(store, record)
    assert store.has(record.cid) and store.get_block(CID.of_raw(b"with")) == b"with"


def test_artifact_refs_are_what_the_records_name(store: Store) -> None:
    first = named("c1", "user_message", {"content": "see"}, refs=(A,))
    snap = named("c1", "code_snapshot", {"blob": B, "tree": {"a.py": C, "b.py": A}}, seq=2, parents=(first,))
    patch = named("c1", "patch", {"base": D, "result": E, "diff": "--- a\n+++ b\n"}, seq=3, parents=(snap,))
    other = named("c2", "user_message", {"content": "x"}, refs=(F,))
    plain = rec("c3")
    commit(store, first, snap, patch, other, plain)
    assert store.artifact_refs("c1") == {A, B, C, D, E}
    assert store.artifact_refs("c2") == {F} and store.artifact_refs("c3") == set()
    assert store.artifact_refs("absent") == set()
    commit(store, first)  # a record stored again adds nothing twice
    assert store.artifact_refs("c1") == {A, B, C, D, E}


def test_artifact_refs_roll_back_with_their_commit(store: Store) -> None:
    record = named("c1", "user_message", {"content": "see"}, refs=(A,))
    aborted(store, lambda: commit(store, record))
    assert store.artifact_refs("c1") == set()


def test_no_artifact_refs_for_a_record_held_as_a_header(store: Store) -> None:
    record = named("c1", "user_message", {"content": "see"}, refs=(A,))
    store.commit(WriteSet(headers=[record.meta]))
    assert store.artifact_refs("c1") == set()


@pytest.mark.parametrize("size", SIZES)
def test_artifacts_of_the_edge_sizes_round_trip(store: Store, size: int) -> None:
    data = bytes(i % 251 for i in range(size))
    cid = replica_artifacts.put(store, data, limit=1 << 30)
    assert cid == split(data)[0] and replica_artifacts.get(store, cid) == data
    assert store.has_blocks(c for c, _ in split(data)[1]) == {c for c, _ in split(data)[1]}


def test_any_bytes_round_trip(new_store: StoreMaker) -> None:  # noqa: F811
    @(SERVER_EXAMPLES if new_store.kind in SERVER_KINDS else STORE_EXAMPLES)
    @given(st.binary(max_size=300) | st.integers(0, 3 * CHUNK_SIZE + 10).map(os.urandom))
    def check(data: bytes) -> None:
        with closing(new_store()) as store:
            cid = replica_artifacts.put(store, data, limit=1 << 30)
            assert cid == split(data)[0] and replica_artifacts.get(store, cid) == data
            assert b"".join(replica_artifacts.open_artifact(store, cid)) == data

    check()


def test_block_cids_list_every_held_block_in_binary_order(store: Store) -> None:
    held = blocks(*(b"block %d" % i for i in range(2_345)))  # more than one page
    assert list(store.block_cids()) == []
    store.put_blocks(held)
    assert list(store.block_cids()) == sorted(c for c, _ in held)


def test_a_block_in_another_threads_open_transaction_is_not_seen(store: Store) -> None:
    """Embedded stores make the reader wait for the writer's end, PostgreSQL reads what was
    committed: either way a put that then rolls back was never visible."""
    [(cid, data)] = blocks(b"uncommitted")
    inside = threading.Event()

    def writer() -> None:
        with suppress(RuntimeError), store.transaction():
            store.put_blocks([(cid, data)])
            inside.set()
            time.sleep(0.2)  # long enough for the reader to ask while the transaction is open
            raise RuntimeError("roll back")

    thread = threading.Thread(target=writer)
    thread.start()
    assert inside.wait(10)
    seen = (store.has_blocks([cid]), store.get_block(cid))
    thread.join()
    assert seen == (set(), None)


# ---------------------------------------------------------------- the reverse look-ups


def test_records_naming_says_which_record_names_which_artifact(store: Store) -> None:
    first = named("c1", "user_message", {"content": "see"}, refs=(A,))
    snap = named("c1", "code_snapshot", {"blob": B, "tree": {"a.py": C, "b.py": A}}, seq=2, parents=(first,))
    patch = named("c1", "patch", {"base": D, "result": E, "diff": "--- a\n+++ b\n"}, seq=3, parents=(snap,))
    other = named("c2", "user_message", {"content": "x"}, refs=(A, F))
    commit(store, first, snap, patch, other)
    assert store.records_naming("c1", [A, B, D, F, CID.of_raw(b"never")]) == {
        A: {first.cid, snap.cid}, B: {snap.cid}, D: {patch.cid}}
    assert store.records_naming("c2", iter([A, A, B])) == {A: {other.cid}}
    assert store.records_naming("c1", []) == {} and store.records_naming("absent", [A]) == {}
    commit(store, first)  # stored again: named once
    assert store.records_naming("c1", [A]) == {A: {first.cid, snap.cid}}


def test_conversations_naming_is_the_reverse_of_artifact_refs(store: Store) -> None:
    commit(store, named("c1", "user_message", {"content": "see"}, refs=(A, B)),
           named("c2", "patch", {"base": A, "result": C, "diff": "-a\n+b\n"}), rec("c3"))
    assert store.conversations_naming([A]) == {"c1", "c2"}
    assert store.conversations_naming([B]) == {"c1"} and store.conversations_naming(iter([C, B])) == {"c1", "c2"}
    assert store.conversations_naming([D]) == set() and store.conversations_naming([]) == set()


def test_the_reverse_look_ups_roll_back_and_skip_headers(store: Store) -> None:
    record = named("c1", "user_message", {"content": "see"}, refs=(A,))
    aborted(store, lambda: commit(store, record))
    assert store.records_naming("c1", [A]) == {} and store.conversations_naming([A]) == set()
    store.commit(WriteSet(headers=[record.meta]))
    assert store.records_naming("c1", [A]) == {} and store.conversations_naming([A]) == set()


def test_many_named_artifacts_are_looked_up_at_once(store: Store) -> None:
    many = [CID.of_raw(b"named %d" % i) for i in range(1_200)]
    one = named("c1", "user_message", {"content": "many"}, refs=tuple(many[:600]))  # 1,024 refs at most
    two = named("c1", "user_message", {"content": "more"}, refs=tuple(many[600:]), seq=2, parents=(one,))
    commit(store, one, two)
    asked = [*many, *(CID.of_raw(b"absent %d" % i) for i in range(700))]
    assert store.records_naming("c1", asked) == {c: {one.cid if i < 600 else two.cid} for i, c in enumerate(many)}
    assert store.conversations_naming(asked) == {"c1"}


def test_put_blocks_links_a_manifest_to_its_chunks(store: Store) -> None:
    one = bytes(i % 251 for i in range(2 * CHUNK_SIZE + 5))
    two = one[:CHUNK_SIZE] + b"another tail"  # shares its first chunk with `one`
    (m1, blocks1), (m2, blocks2) = split(one), split(two)
    store.put_blocks(blocks1)
    chunks1 = {c for c, _ in blocks1 if c != m1}
    raw_leaf = CID.of_raw(b"leaf")
    store.put_blocks([(raw_leaf, b"leaf")])
    assert store.chunks_of([m1, raw_leaf, m2]) == {m1: chunks1}
    assert store.manifests_of([*chunks1, raw_leaf, m1]) == {c: {m1} for c in chunks1}
    store.put_blocks(blocks2)
    shared = CID.of_raw(one[:CHUNK_SIZE])
    assert store.manifests_of([shared]) == {shared: {m1, m2}}
    assert store.chunks_of(iter([m1, m2, m1])) == {m1: chunks1, m2: {c for c, _ in blocks2 if c != m2}}
    assert store.chunks_of([]) == {} and store.manifests_of([]) == {}


def test_a_dag_cbor_block_that_is_no_manifest_links_nothing(store: Store) -> None:
    [record] = chain(1)
    store.put_blocks([(record.cid, record.data)])  # a caller's own check let it through
    assert store.chunks_of([record.cid]) == {}


def test_links_roll_back_with_their_blocks(store: Store) -> None:
    manifest, pieces = split(bytes(CHUNK_SIZE + 1))
    aborted(store, lambda: store.put_blocks(pieces))
    assert store.chunks_of([manifest]) == {} and store.manifests_of([c for c, _ in pieces]) == {}
    store.put_blocks(pieces)
    assert set(store.chunks_of([manifest])) == {manifest}


def test_a_large_manifest_is_looked_up_at_once(store: Store) -> None:
    size = 1_200 * CHUNK_SIZE  # more chunks than one SQLite query may name
    manifest = encode_manifest(Manifest(tuple(CID.of_raw(b"chunk %d" % i) for i in range(1_200)), size))
    cid = CID.of_record(manifest)  # a manifest's CID is dag-cbor, as a record's
    store.put_blocks([(cid, manifest)])
    chunks = decode_manifest(manifest).chunks
    assert store.chunks_of([cid]) == {cid: set(chunks)}
    assert store.manifests_of(chunks) == {c: {cid} for c in chunks}


def test_admission_is_per_conversation_and_rolls_back(store: Store) -> None:
    a, b = CID.of_raw(b"a"), CID.of_raw(b"b")
    store.admit_blocks("one", [a, b])
    store.admit_blocks("one", [a])  # again: nothing changes
    store.admit_blocks("two", [b])
    assert store.admitted("one", [a, b, CID.of_raw(b"c")]) == {a, b}
    assert store.admitted("two", [a, b]) == {b}
    assert store.admitted("three", [a, b]) == set()
    assert store.admitting([a]) == {"one"} and store.admitting([a, b]) == {"one", "two"}
    assert store.admitting([]) == set() and store.admitted("one", []) == set()
    with suppress(RuntimeError), store.transaction():
        store.admit_blocks("three", [a])
        raise RuntimeError
    assert store.admitting([a]) == {"one"}


def test_many_admitted_blocks_are_looked_up_at_once(store: Store) -> None:
    cids = [CID.of_raw(b"%d" % i) for i in range(1_200)]  # over SQLite's 500 arguments a query
    store.admit_blocks("many", cids)
    assert store.admitted("many", cids) == set(cids)
    assert store.admitting(cids) == {"many"}
