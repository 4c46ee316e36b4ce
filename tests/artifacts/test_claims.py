"""Claims about artifacts (docs/format.md §18.2): honest records hold, each lie is named by its check.

Blocks are made by `blocks.split` (the store's own cutting) and kept in a dict standing in for
`Store.get_block`; a manifest over two chunks covers the multi-block path.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convgraph.artifacts import blocks
from convgraph.artifacts.claims import ClaimStatus, artifact_cid, check_claim, check_patch, check_snapshot
from convgraph.artifacts.diff import make_unified_diff
from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import Record, sign_record

KEY = SigningKey(bytes([3]) * 32)
OLD = b"def f():\n    return 1\n"
NEW = b"def f():\n    return 2\n"


class Blocks(dict[CID, bytes]):
    def put(self, data: bytes) -> CID:
        cid, made = blocks.split(data)
        self.update(made)
        return cid


def record(kind: str, payload: dict[str, Any], seq: int = 1) -> Record:
    return sign_record(KEY, conv="c", seq=seq, hlc=Hlc(1_700_000_000_000, 0), parents=[], kind=kind,
                       payload=payload)


def patch(store: Blocks, old: bytes, new: bytes, **over: Any) -> Record:
    payload = {"base": store.put(old), "diff": make_unified_diff(old, new, "f.py"),
               "result": artifact_cid(new), "path": "f.py", **over}
    return record("patch", {k: v for k, v in payload.items() if v is not None})


def test_an_honest_patch_holds_and_its_result_is_never_read() -> None:
    store = Blocks()
    r = patch(store, OLD, NEW)
    assert r.payload["result"] not in store
    assert check_patch(r, store.get).status is ClaimStatus.HOLDS


def test_a_forged_result_is_false_and_the_base_is_its_evidence() -> None:
    store = Blocks()
    r = patch(store, OLD, NEW, result=artifact_cid(b"def f():\n    return 3\n"))
    got = check_patch(r, store.get)
    assert (got.status, got.check) == (ClaimStatus.FALSE, "result")
    assert got.blocks == (OLD,)
    replay = {CID.of_raw(b): b for b in got.blocks}
    assert check_patch(r, replay.get) == got


def test_a_diff_that_does_not_apply_is_false() -> None:
    store = Blocks()
    r = patch(store, OLD, NEW, diff=make_unified_diff(b"other\n", NEW, "f.py"))
    got = check_patch(r, store.get)
    assert (got.status, got.check) == (ClaimStatus.FALSE, "apply")
    assert "hunk 1" in got.reason


def test_a_patch_over_a_manifest_base_reads_every_chunk() -> None:
    store = Blocks()
    text = b"".join(b"line %d\n" % i for i in range(40_000))
    assert len(text) > blocks.CHUNK_SIZE
    changed = text.replace(b"line 39999\n", b"last\n")
    honest = patch(store, text, changed)
    assert check_patch(honest, store.get).status is ClaimStatus.HOLDS
    lie = patch(store, text, changed, result=artifact_cid(text))
    got = check_patch(lie, store.get)
    assert (got.status, got.check, len(got.blocks)) == (ClaimStatus.FALSE, "result", 3)


def test_a_missing_base_is_pending_and_an_unknown_format_not_checkable() -> None:
    store = Blocks()
    r = patch(store, OLD, NEW)
    got = check_patch(r, {}.get)
    assert got.status is ClaimStatus.PENDING and got.missing == (r.payload["base"],)
    assert check_patch(patch(store, OLD, NEW, format="git-binary"), store.get).status is ClaimStatus.UNCHECKABLE
    assert check_patch(patch(store, OLD, NEW, format="unified"), store.get).status is ClaimStatus.HOLDS


def test_a_rotten_block_makes_pending_not_false() -> None:
    store = Blocks()
    r = patch(store, OLD, NEW, result=artifact_cid(b"lie\n"))
    store[r.payload["base"]] = b"rotten"
    assert check_patch(r, store.get).status is ClaimStatus.PENDING


def test_a_manifest_with_a_chunk_of_the_wrong_length_names_no_artifact() -> None:
    store = Blocks()
    short = b"x" * 100
    a, b = store.put(b"y" * blocks.CHUNK_SIZE), store.put(short)
    bad = codec.encode({"chunks": [a, b], "size": blocks.CHUNK_SIZE + 101, "type": "convgraph/chunks", "v": 1})
    cid = CID.of_record(bad)
    store[cid] = bad
    snap = record("code_snapshot", {"tree": {"big.bin": cid}})
    got = check_snapshot(snap, store.get)
    assert (got.status, got.check) == (ClaimStatus.FALSE, "tree")
    assert got.blocks == tuple(sorted([bad, short]))  # the manifest and the chunk it cannot hold
    del store[a]  # chunk 0 not held: the short chunk still shows the lie
    assert check_snapshot(snap, store.get) == got
    del store[b]
    assert check_snapshot(snap, store.get).status is ClaimStatus.PENDING
    not_manifest = codec.encode({"hello": 1})
    store[CID.of_record(not_manifest)] = not_manifest
    got = check_patch(record("patch", {"base": CID.of_record(not_manifest), "diff": ""}), store.get)
    assert (got.status, got.check) == (ClaimStatus.FALSE, "base")


def test_snapshots() -> None:
    store = Blocks()
    blob = store.put(OLD)
    other = store.put(NEW)
    text = OLD.decode()
    cases: list[tuple[dict[str, Any], ClaimStatus, str]] = [
        ({"content": text, "blob": blob, "path": "f.py", "tree": {"f.py": blob, "g.py": other}}, ClaimStatus.HOLDS, ""),
        ({"content": text, "path": "f.py", "tree": {"f.py": blob}}, ClaimStatus.HOLDS, ""),
        ({"content": NEW.decode(), "blob": blob}, ClaimStatus.FALSE, "content"),
        ({"blob": blob, "path": "f.py", "tree": {"f.py": other}}, ClaimStatus.FALSE, "path"),
        ({"content": text, "path": "f.py", "tree": {"f.py": other}}, ClaimStatus.FALSE, "path"),
        ({"blob": blob, "path": "h.py", "tree": {"f.py": other}}, ClaimStatus.HOLDS, ""),  # path not in tree
        ({"tree": {"f.py": artifact_cid(b"not held")}}, ClaimStatus.PENDING, ""),
        # application state, not a file tree (docs/integrations.md): nothing is claimed of files
        ({"path": "langgraph/checkpoint", "tree": {"id": "1", "f.py": other}}, ClaimStatus.HOLDS, ""),
    ]
    for payload, status, rule in cases:
        got = check_snapshot(record("code_snapshot", payload), store.get)
        assert (got.status, got.check) == (status, rule), payload


def test_other_kinds_claim_nothing() -> None:
    assert check_claim(record("user_message", {"content": "hi"}), {}.get) is None


@given(st.lists(st.sampled_from(["a\n", "b\n", "c\r\n", "", "d"]), max_size=20),
       st.lists(st.sampled_from(["a\n", "b\n", "c\r\n", "e\n"]), max_size=20))
def test_every_made_patch_holds_and_any_other_result_is_false(old: list[str], new: list[str]) -> None:
    store = Blocks()
    a, b = "".join(old).encode(), "".join(new).encode()
    assert check_patch(patch(store, a, b), store.get).status is ClaimStatus.HOLDS
    lie = check_patch(patch(store, a, b, result=artifact_cid(b + b"!")), store.get)
    assert (lie.status, lie.check) == (ClaimStatus.FALSE, "result")


@pytest.mark.parametrize("n", [0, 1, blocks.CHUNK_SIZE, blocks.CHUNK_SIZE + 1])
def test_artifact_cid_is_the_raw_cid_up_to_one_block(n: int) -> None:
    data = b"z" * n
    assert (artifact_cid(data) == CID.of_raw(data)) == (n <= blocks.CHUNK_SIZE)


# ---------------------------------------------------------------- found by mutation testing (stop 22)


def test_every_answer_names_its_record_and_says_why() -> None:
    """Each answer names the record it is about (a finding cites it) and gives its reason."""
    store = Blocks()
    base = store.put(OLD)
    with_result, without = patch(store, OLD, NEW), patch(store, OLD, NEW, result=None)
    unknown = patch(store, OLD, NEW, format="f" * 100)
    cases = [
        (with_result, store.get, "the diff applies to the base and gives the result"),
        (without, store.get, "the diff applies to the base"),  # the claim is only that it applies
        (with_result, {}.get, f"block {base} of the base is not held"),
        (unknown, store.get, f"format {'f' * 64!r} is not one this version checks"),
    ]
    for r, get, reason in cases:
        got = check_claim(r, get)
        assert got is not None and (got.record, got.kind, got.reason) == (r.cid, "patch", reason)
    blob, other = store.put(OLD), store.put(NEW)
    snapshots = [
        ({"content": OLD.decode(), "blob": blob, "path": "f.py", "tree": {"f.py": blob}},
         "content, blob, path and tree agree"),
        ({"content": NEW.decode(), "blob": blob}, f"blob {blob} is not the CID of content ({other})"),
        ({"blob": blob, "path": "f.py", "tree": {"f.py": other}},
         f"tree names {other} at path 'f.py', the snapshot's file there is {blob}"),
        ({"tree": {"a": artifact_cid(b"a"), "b": artifact_cid(b"b"), "c": blob}}, "2 named artifacts not held"),
    ]
    for payload, reason in snapshots:
        r = record("code_snapshot", payload)
        got = check_claim(r, store.get)
        assert got is not None and (got.record, got.kind, got.reason) == (r.cid, "code_snapshot", reason)


def test_a_pending_snapshot_lists_every_missing_block_once_in_cid_order() -> None:
    store = Blocks()
    absent = sorted([artifact_cid(b"a"), artifact_cid(b"b")])
    snap = record("code_snapshot", {"blob": absent[1], "tree": {"x": absent[1], "y": absent[0], "z": store.put(OLD)}})
    got = check_snapshot(snap, store.get)
    assert (got.status, got.missing, got.blocks) == (ClaimStatus.PENDING, tuple(absent), ())


def test_a_snapshot_reads_only_the_artifacts_it_names_and_a_whole_large_one_holds() -> None:
    """§18.2: `blob` and the tree's values are read, nothing else (no blob: no read for it); an
    artifact of several blocks, all held and of the right lengths, holds."""
    store = Blocks()
    large = store.put(b"q" * (blocks.CHUNK_SIZE + 5))
    asked: list[CID] = []

    def get(cid: CID) -> bytes | None:
        assert isinstance(cid, CID)
        asked.append(cid)
        return store.get(cid)

    got = check_snapshot(record("code_snapshot", {"tree": {"big": large}}), get)
    assert got.status is ClaimStatus.HOLDS
    assert set(asked) == set(store) and len(store) == 3  # the manifest and its two chunks
    asked.clear()
    assert check_snapshot(record("code_snapshot", {"blob": large, "path": "p"}), get).status is ClaimStatus.HOLDS
    assert set(asked) == set(store)


def _not_a_manifest(store: Blocks) -> tuple[CID, bytes]:
    block = codec.encode({"hello": 1})
    store[CID.of_record(block)] = block
    return CID.of_record(block), block


def test_a_blob_that_names_no_artifact_is_false_blob_whatever_the_tree() -> None:
    store = Blocks()
    bad, block = _not_a_manifest(store)
    good = store.put(OLD)
    for payload in ({"blob": bad}, {"blob": bad, "tree": {"f.py": good}}, {"blob": bad, "path": "f.py", "tree": {"f.py": bad}}):
        got = check_snapshot(record("code_snapshot", payload), store.get)
        assert (got.status, got.check, got.blocks) == (ClaimStatus.FALSE, "blob", (block,)), payload
        assert got.reason == f"blob names no artifact: {bad} is not a chunk manifest: " \
            "a manifest is a map with exactly chunks, size, type and v"


def test_a_tree_value_that_is_no_manifest_is_false_tree_with_that_block_as_evidence() -> None:
    store = Blocks()
    bad, block = _not_a_manifest(store)
    snap = record("code_snapshot", {"tree": {"a": store.put(OLD), "b": bad}})
    got = check_snapshot(snap, store.get)
    assert (got.status, got.check, got.blocks) == (ClaimStatus.FALSE, "tree", (block,))
    assert check_snapshot(snap, {CID.of_record(block): block}.get) == got  # what a bundle replays


def test_a_false_base_or_apply_carries_the_blocks_that_show_it() -> None:
    """The invariant: a `FALSE` answer holds every block its check read, and replays from them."""
    store = Blocks()
    bad, block = _not_a_manifest(store)
    no_base = record("patch", {"base": bad, "diff": ""})
    got = check_patch(no_base, store.get)
    assert (got.status, got.check, got.blocks) == (ClaimStatus.FALSE, "base", (block,))
    assert got.reason == f"the base is no artifact: {bad} is not a chunk manifest: " \
        "a manifest is a map with exactly chunks, size, type and v"
    assert check_patch(no_base, {bad: block}.get) == got
    text = b"".join(b"line %d\n" % i for i in range(40_000))  # a manifest and two chunks
    wrong = patch(store, text, NEW, diff=make_unified_diff(b"other\n", NEW, "f.py"))
    got = check_patch(wrong, store.get)
    held = dict(blocks.split(text)[1])
    assert (got.status, got.check, got.blocks) == (ClaimStatus.FALSE, "apply", tuple(sorted(held.values())))
    assert check_patch(wrong, held.get) == got
