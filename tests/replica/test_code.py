"""Code in a conversation through the replica: attachments, snapshots of a real working tree,
patches applied strictly, and the review / request / decision records gated by authority."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convgraph import Replica
from convgraph.artifacts.blocks import CHUNK_SIZE
from convgraph.artifacts.claims import ClaimStatus, check_claim
from convgraph.artifacts.diff import make_unified_diff
from convgraph.core.cid import CID
from convgraph.core.hlc import ManualClock
from convgraph.core.keys import SigningKey
from convgraph.errors import (
    ArtifactMissingError,
    ArtifactTooLargeError,
    AuthorityError,
    ChoiceError,
    NotADiffError,
    PatchApplyError,
    SchemaError,
    WorkingTreeError,
    WrongTargetError,
)
from convgraph.replica import Config
from convgraph.replica.code import SKIPPED_DIRS

T0 = 1_700_000_000_000


def _blocks(r: Replica, *cids: CID) -> set[CID]:
    return r.store.has_blocks(cids)


def test_say_puts_each_attachment_and_names_it_in_refs(tmp_path: Path) -> None:
    r = Replica.in_memory()
    conv = r.create("t")
    (tmp_path / "notes.txt").write_bytes(b"from a file\n")
    held = r.put(b"put before")
    rec = r.say(conv, "user", "see attached", attachments=[b"raw bytes", tmp_path / "notes.txt",
                                                            str(tmp_path / "notes.txt"), held])
    assert set(rec.refs) == {CID.of_raw(b"raw bytes"), CID.of_raw(b"from a file\n"), held}
    assert r.get_artifact(CID.of_raw(b"raw bytes")) == b"raw bytes"
    assert r.missing_artifacts(conv) == []
    named_only = CID.of_raw(b"not held here")  # a CID is named as given: sync may bring it
    r.say(conv, "user", "and this", attachments=[named_only])
    assert r.missing_artifacts(conv) == [named_only]


def test_an_attachment_too_large_leaves_neither_turn_nor_artifacts() -> None:
    r = Replica.in_memory(config=Config(max_artifact_bytes=10))
    conv = r.create("t")
    before = r.store.count(conv)
    with pytest.raises(ArtifactTooLargeError):
        r.say(conv, "user", "two files", attachments=[b"small", b"x" * 11])
    assert r.store.count(conv) == before
    assert _blocks(r, CID.of_raw(b"small")) == set()


def _tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def test_snapshot_maps_relative_paths_to_artifacts_and_skips_vcs_dirs(tmp_path: Path) -> None:
    _tree(tmp_path, {"src/app.py": b"print(1)\n", "src/pkg/util.py": b"", "README": b"hi",
                     "src/.git/HEAD": b"ref", "src/pkg/__pycache__/u.pyc": b"\0", ".hg/x": b"y"})
    r = Replica.in_memory()
    conv = r.create("t")
    made = r.snapshot(conv, ["src", "README"], root=tmp_path)
    assert sorted(made.tree) == ["README", "src/app.py", "src/pkg/util.py"]
    assert made.skipped == ()
    assert made.record.kind == "code_snapshot" and made.record.payload == {"tree": made.tree}
    for name, cid in made.tree.items():
        assert r.get_artifact(cid) == (tmp_path / name).read_bytes()
    claim = check_claim(made.record, r.store.get_block)
    assert claim is not None and claim.status is ClaimStatus.HOLDS
    assert {".git", ".hg", "__pycache__"} <= SKIPPED_DIRS
    one = r.snapshot(conv, ["."], root=tmp_path / "src")  # one path: the snapshot's `path` says what of
    assert one.record.payload["path"] == "." and sorted(one.tree) == ["app.py", "pkg/util.py"]


def test_snapshot_root_defaults_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path, {"a/b.txt": b"b"})
    monkeypatch.chdir(tmp_path / "a")
    r = Replica.in_memory()
    made = r.snapshot(r.create("t"), ["b.txt"])
    assert made.tree == {"b.txt": CID.of_raw(b"b")} and made.record.payload["path"] == "b.txt"
    assert r.snapshot(r.create("u"), "b.txt").tree == made.tree  # one path given bare
    assert r.snapshot(r.create("v"), Path("b.txt")).tree == made.tree


def test_symlinks_and_special_files_are_reported_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_bytes(b"never read")
    work = tmp_path / "work"
    _tree(work, {"real.txt": b"real"})
    (work / "link.txt").symlink_to(outside)
    (work / "linkdir").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(work / "pipe")
    r = Replica.in_memory()
    made = r.snapshot(r.create("t"), ["."], root=work)
    assert made.tree == {"real.txt": CID.of_raw(b"real")}
    assert [(s.path, s.reason.split(":")[0]) for s in made.skipped] == [
        ("link.txt", f"symlink to {outside}"), ("linkdir", f"symlink to {tmp_path}"),
        ("pipe", "not a regular file")]
    assert _blocks(r, CID.of_raw(b"never read")) == set()
    given_link = r.snapshot(r.create("u"), ["real.txt", "link.txt"], root=work)  # named directly, too
    assert [s.path for s in given_link.skipped] == ["link.txt"]


_UNREADABLE = """
import sys
from pathlib import Path
from convgraph import Replica
r = Replica.in_memory()
made = r.snapshot(r.create("t"), ["."], root=Path(sys.argv[1]))
assert list(made.tree) == ["ok.txt"], made.tree
assert [(s.path, s.reason.startswith("unreadable")) for s in made.skipped] == [("locked.txt", True)], made.skipped
"""


def test_an_unreadable_file_is_reported_and_the_rest_snapshotted(tmp_path: Path) -> None:
    # root reads a file whatever its mode, and CI runs as root: there the snapshot is taken by
    # a child without the capabilities that override file modes, so the file is unreadable to it
    _tree(tmp_path, {"ok.txt": b"ok", "locked.txt": b"no"})
    (tmp_path / "locked.txt").chmod(0)
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    done = subprocess.run([*drop, sys.executable, "-c", _UNREADABLE, str(tmp_path)],
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr


def test_snapshot_refuses_paths_missing_outside_or_empty(tmp_path: Path) -> None:
    work = tmp_path / "work"
    _tree(work, {"a.txt": b"a", "empty/.git/HEAD": b"x"})
    _tree(tmp_path, {"other.txt": b"o"})
    r = Replica.in_memory()
    conv = r.create("t")
    before = r.store.count(conv)
    for paths in (["nope.txt"], ["../other.txt"], [str(tmp_path / "other.txt")], ["empty"], []):
        with pytest.raises(WorkingTreeError):
            r.snapshot(conv, paths, root=work)
    with pytest.raises(WorkingTreeError, match="not a directory"):
        r.snapshot(conv, ["a.txt"], root=work / "a.txt")
    assert r.store.count(conv) == before


_NAMES = st.text(st.characters(whitelist_categories=("Ll", "Nd")), min_size=1, max_size=6)
_FILES = st.dictionaries(st.lists(_NAMES, min_size=1, max_size=3).map("/".join),
                         st.binary(max_size=600) | st.sampled_from([b"", b"x" * CHUNK_SIZE]), min_size=1,
                         max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=_FILES)
def test_every_snapshotted_files_bytes_come_back(files: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("tree")
    written: dict[str, bytes] = {}
    for name, data in files.items():  # "a" and "a/b" cannot both be files: the first one wins
        try:
            _tree(root, {name: data})
            written[name] = data
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            continue
    r = Replica.in_memory()
    made = r.snapshot(r.create("t"), ["."], root=root)
    assert made.tree.keys() == written.keys()
    for name, cid in made.tree.items():
        assert r.get_artifact(cid) == written[name]
        assert b"".join(r.open_artifact(cid)) == written[name]


def test_patch_applies_the_diff_and_stores_the_result() -> None:
    r = Replica.in_memory()
    conv = r.create("t")
    old, new = b"def f():\n    return 1\n", b"def f():\n    return 2\n"
    base = r.put(old)
    diff = make_unified_diff(old, new, "app.py")
    rec = r.patch(conv, base, diff)
    assert rec.kind == "patch"
    assert rec.payload == {"base": base, "diff": diff, "result": CID.of_raw(new), "format": "unified",
                           "path": "app.py"}
    assert r.get_artifact(rec.payload["result"]) == new
    claim = check_claim(rec, r.store.get_block)
    assert claim is not None and claim.status is ClaimStatus.HOLDS
    named = r.patch(conv, base, diff.encode(), path="src/app.py")  # bytes in; the path given wins
    assert named.payload["path"] == "src/app.py" and named.payload["diff"] == diff


@pytest.mark.parametrize(("diff", "said"), [
    (b"def f():\n    return 2\n", "not a unified diff"),  # the new file given instead of a diff
    (b"", "the diff is empty"),
    ("", "the diff is empty"),
    (b"\x00\x01garbage\n", "not a unified diff"),
    ("--- a/app.py\n+++ b/app.py\n", "headers but no hunk"),
])
def test_a_diff_without_a_hunk_is_refused_and_nothing_is_signed(diff: str | bytes, said: str) -> None:
    r = Replica.in_memory()
    conv = r.create("t")
    base = r.put(b"def f():\n    return 1\n")
    before, heads = r.store.count(conv), r.heads(conv)
    with pytest.raises(NotADiffError, match=said) as caught:
        r.patch(conv, base, diff)
    assert isinstance(caught.value, PatchApplyError) and caught.value.hunk == 0
    assert (r.store.count(conv), r.heads(conv)) == (before, heads)
    made = make_unified_diff(b"def f():\n    return 1\n", b"def f():\n    return 2\n", "app.py")
    assert r.patch(conv, base, made).kind == "patch"  # the same base, given a real diff
    assert r.store.count(conv) == before + 1


def test_a_patch_that_does_not_apply_stores_and_signs_nothing() -> None:
    r = Replica.in_memory()
    conv = r.create("t")
    base = r.put(b"one\ntwo\n")
    before = r.store.count(conv)
    wrong = make_unified_diff(b"one\nTWO\n", b"one\nthree\n", "f")
    with pytest.raises(PatchApplyError) as caught:
        r.patch(conv, base, wrong)
    assert caught.value.hunk == 1
    with pytest.raises(PatchApplyError, match="not UTF-8"):
        r.patch(conv, base, b"--- a/f\n+++ b/f\n@@ -1 +1 @@\n-one\n+\xff\n")
    with pytest.raises(ArtifactMissingError):
        r.patch(conv, CID.of_raw(b"never put"), make_unified_diff(b"a\n", b"b\n", "f"))
    with pytest.raises(WrongTargetError, match="not a file"):
        r.patch(conv, r.heads(conv)[0], make_unified_diff(b"a\n", b"b\n", "f"))
    assert r.store.count(conv) == before
    assert _blocks(r, CID.of_raw(b"one\nthree\n")) == set()


def test_review_ask_and_decide_name_exact_records() -> None:
    r = Replica.in_memory()
    conv = r.create("t")
    snap_base = r.put(b"a\n")
    p = r.patch(conv, snap_base, make_unified_diff(b"a\n", b"b\n", "f"))
    review = r.review(conv, p.cid, "good", verdict="approve", line=1)
    assert review.payload == {"target": p.cid, "body": "good", "verdict": "approve", "line": 1}
    q = r.ask(conv, "ship it?", subject=p.cid, options=["yes", "no"], reviews=1, reviewers=[r.actor])
    assert q.payload == {"question": "ship it?", "subject": p.cid, "options": ["yes", "no"], "reviews": 1,
                         "reviewers": [r.actor]}
    d = r.decide(conv, q.cid, "yes", rationale="reviewed")
    assert d.payload == {"request": q.cid, "choice": "yes", "rationale": "reviewed"}
    assert list(r.authority(conv).findings()) == []  # the review the request asked for is there
    free = r.ask(conv, "anything else?")
    assert r.decide(conv, free.cid, "no").payload["choice"] == "no"  # no options: any choice


def test_review_and_decide_refuse_the_wrong_record() -> None:
    r = Replica.in_memory()
    conv, other = r.create("t"), r.create("u")
    turn = r.say(conv, "user", "hi")
    foreign = r.patch(other, r.put(b"a\n"), make_unified_diff(b"a\n", b"b\n", "f"))
    q = r.ask(conv, "pick", options=["a", "b"])
    before = r.store.count(conv)
    cases = [
        lambda: r.review(conv, turn.cid, "not code"),
        lambda: r.review(conv, foreign.cid, "another conversation's"),
        lambda: r.review(conv, CID.of_raw(b"no record"), "not held"),
        lambda: r.decide(conv, turn.cid, "a"),
        lambda: r.ask(conv, "about nothing held", subject=CID.of_raw(b"x")),
    ]
    for case in cases:
        with pytest.raises(WrongTargetError):
            case()
    with pytest.raises(ChoiceError) as caught:
        r.decide(conv, q.cid, "c")
    assert caught.value.cid == str(q.cid)
    with pytest.raises(SchemaError):
        r.review(conv, r.patch(conv, r.put(b"a\n"), make_unified_diff(b"a\n", b"c\n", "f")).cid, "x",
                 verdict="lgtm")
    assert r.store.count(conv) == before + 1  # only the patch the last case wrote


def test_review_and_decide_need_their_capabilities() -> None:
    clock = ManualClock(T0)
    owner = Replica.in_memory(SigningKey(bytes([7]) * 32), clock=clock)
    writer = Replica.in_memory(SigningKey(bytes([8]) * 32), clock=clock)
    conv = owner.create("team")
    owner.write(conv, "grant", {"grantee": writer.actor, "rights": ["read", "write"]})
    p = owner.patch(conv, owner.put(b"a\n"), make_unified_diff(b"a\n", b"b\n", "f"))
    q = owner.ask(conv, "merge?", subject=p.cid)
    writer.ingest([x.data for x in owner.iter_records(conv)])
    writer.put(b"a\n")
    before = writer.store.count(conv)
    with pytest.raises(AuthorityError) as review:
        writer.review(conv, p.cid, "lgtm", verdict="approve")
    with pytest.raises(AuthorityError) as decide:
        writer.decide(conv, q.cid, "yes")
    assert (review.value.capability, decide.value.capability) == ("review", "decide")
    assert writer.store.count(conv) == before
    writer.patch(conv, p.payload["base"], make_unified_diff(b"a\n", b"c\n", "f"))  # `write` suffices here


def test_paths_are_read_lexically_and_never_through_a_symlinked_directory(tmp_path: Path) -> None:
    _tree(tmp_path, {"work/src/a.txt": b"a", "elsewhere/secret.txt": b"s"})
    work = tmp_path / "work"
    (work / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    linked = tmp_path / "linked-root"
    linked.symlink_to(work, target_is_directory=True)
    r = Replica.in_memory()
    conv = r.create("t")
    made = r.snapshot(conv, ["src/../src/a.txt", str(work / "src"), "out/secret.txt"], root=work)
    assert made.tree == {"src/a.txt": CID.of_raw(b"a")}
    assert [(s.path, s.reason) for s in made.skipped] == [("out/secret.txt", "under out, a symlink: not followed")]
    assert _blocks(r, CID.of_raw(b"s")) == set()
    via_link = r.snapshot(conv, ["."], root=linked)  # the root itself may be reached by a symlink
    assert sorted(via_link.tree) == ["src/a.txt"] and [s.path for s in via_link.skipped] == ["out"]
