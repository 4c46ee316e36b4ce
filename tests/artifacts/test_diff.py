"""The unified-diff applier (docs/format.md §18): round trips, exactness, and git as a second opinion.

The property is the module's promise: applying what `make_unified_diff` makes gives the new
text exactly, for texts with CRLF endings, no final newline, or nothing at all. The refusals
show that nothing is searched for: a diff one line off does not apply, it is named.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from convgraph.artifacts.diff import apply_unified_diff, make_unified_diff
from convgraph.errors import ConvgraphError, NotADiffError, PatchApplyError, SchemaError

# few distinct lines, so that random texts share lines and the diffs have context and hunks
_LINE = st.sampled_from(["a", "b", "c", "", "  x", "é", "d\r", "tab\t"])
_ENDING = st.sampled_from(["\n", "\r\n"])


@st.composite
def texts(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(_LINE, _ENDING), max_size=30))
    body = "".join(a + e for a, e in lines)
    if body and draw(st.booleans()):
        body = body.rstrip("\n")  # no final newline (may leave a final \r: content, not ending)
    return body.encode()


@given(texts(), texts())
@example(b"", b"")
@example(b"", b"a\n")
@example(b"a\n", b"")
@example(b"a", b"a\n")
@example(b"a\n", b"a")
@example(b"a\r\nb\r\n", b"a\nb\n")
@example(b"\n", b"")
def test_apply_of_make_is_the_new_text(old: bytes, new: bytes) -> None:
    diff = make_unified_diff(old, new, "f.txt")
    assert apply_unified_diff(old, diff, allow_empty=True) == new
    assert apply_unified_diff(old, diff.encode(), allow_empty=True) == new
    assert (diff == "") == (old == new)
    if old != new:
        assert apply_unified_diff(old, diff) == new


@given(texts(), texts(), st.data())
def test_a_changed_base_line_is_refused_not_searched_for(old: bytes, new: bytes, data: st.DataObject) -> None:
    diff = make_unified_diff(old, new, "f")
    base_lines = old.split(b"\n")
    i = data.draw(st.integers(0, len(base_lines) - 1))
    base_lines[i] = base_lines[i] + b"Z"
    changed = b"\n".join(base_lines)
    try:
        out = apply_unified_diff(changed, diff, allow_empty=True)
    except PatchApplyError as exc:
        where = (exc.hunk, exc.line)
        assert min(where) >= 1
        return
    # only a line no hunk covers may change, and it comes through as it is
    assert out != new or changed == old


def test_a_mismatch_names_the_hunk_and_the_diff_line() -> None:
    old = b"".join(b"line %d\n" % i for i in range(1, 21))
    new = old.replace(b"line 2\n", b"two\n").replace(b"line 18\n", b"eighteen\n")
    diff = make_unified_diff(old, new, "f")
    assert diff.count("@@ -") == 2
    with pytest.raises(PatchApplyError) as caught:
        apply_unified_diff(old.replace(b"line 19\n", b"nineteen\n"), diff)
    assert caught.value.hunk == 2
    assert diff.splitlines()[caught.value.line - 1] == " line 19"
    assert "base line 19" in str(caught.value)
    assert isinstance(caught.value, ConvgraphError) and caught.value.rule == "patch_apply"


def test_no_offset_search_a_hunk_applies_only_where_it_says() -> None:
    diff = "@@ -2,1 +2,1 @@\n-b\n+B\n"
    assert apply_unified_diff(b"a\nb\nc\n", diff) == b"a\nB\nc\n"
    with pytest.raises(PatchApplyError):
        apply_unified_diff(b"x\na\nb\nc\n", diff)  # `b` is there, one line lower


@pytest.mark.parametrize(("base", "diff", "result"), [
    (b"", "--- /dev/null\n+++ b/f\n@@ -0,0 +1,2 @@\n+a\n+b\n", b"a\nb\n"),
    (b"", "@@ -0,0 +1 @@\n+a\n\\ No newline at end of file\n", b"a"),
    (b"a\nb\n", "--- a/f\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n", b""),
    (b"a\nb", "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n", b"a\nb\n"),
    (b"a\nb", "@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n", b"a\nc"),
    (b"a\r\nb\r\n", "@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n", b"a\r\nc\r\n"),
    (b"x\n", "diff --git a/f b/f\nindex 1..2 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n", b"y\n"),
    (b"a\n", "@@ -1 +1 @@ a section name\n-a\n+b", b"b\n"),  # the diff's own last newline may be missing
    (b"a\nb\nc\n", "@@ -1,0 +2 @@\n+x\n", b"a\nx\nb\nc\n"),  # an insertion after line 1
])
def test_edges_apply(base: bytes, diff: str, result: bytes) -> None:
    assert apply_unified_diff(base, diff) == result


@pytest.mark.parametrize(("base", "diff", "hunk"), [
    (b"a\n", "--- a/f\n@@ -1 +1 @@\n-a\n+b\n", 0),  # --- without +++
    (b"a\n", "+++ b/f\n@@ -1 +1 @@\n-a\n+b\n", 0),
    (b"a\n", "@@ -1 +1 @@\n-a\n", 1),  # ends inside the hunk
    (b"a\n", "@@ -1 +1 @@\n-a\n+b\n+c\n", 1),  # more lines than counted
    (b"a\n", "@@ -1 +1 @@\n-a\n\n+b\n", 1),  # an empty line is not a blank context line
    (b"a\n", "@@ -1 +1 @@\n-a\n+b\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n", 2),  # two files
    (b"a\n", "@@ -1 +1 @@\n-a\n+b\ngarbage\n", 2),
    (b"a\nb\n", "@@ -1 +1 @@\n-a\n+x\n\\ No newline at end of file\n", 1),  # not the last line
    (b"a\nb\n", "@@ -2 +2 @@\n-b\n+c\n@@ -1 +1 @@\n-a\n+d\n", 2),  # hunks out of order
    (b"a\n", "@@ -1 +2 @@\n-a\n+b\n", 1),  # the new side's start disagrees
    (b"a\n", "@@ -2 +2 @@\n-a\n+b\n", 1),  # past the end of the base
    (b"a", "@@ -1 +1 @@\n-a\n+b\n", 1),  # the base's line has no newline, the diff's does
    (b"a\n", "@@ -0 +0 @@\n-a\n+b\n", 1),
    (b"a\n", "@@ -x +1 @@\n-a\n+b\n", 1),
])
def test_malformed_or_mismatched_diffs_are_refused(base: bytes, diff: str, hunk: int) -> None:
    with pytest.raises(PatchApplyError) as caught:
        apply_unified_diff(base, diff)
    assert caught.value.hunk == hunk


def test_make_refuses_bytes_that_are_not_text() -> None:
    with pytest.raises(SchemaError):
        make_unified_diff(b"\xff\n", b"a\n", "f")


_CASES = [
    (b"a\nb\nc\n", b"a\nB\nc\nd\n"),
    (b"", b"new\nfile\n"),
    (b"gone\n", b""),
    (b"no newline", b"no newline\n"),
    (b"x\r\ny\r\n", b"x\r\nz\r\n"),
    (b"".join(b"%d\n" % i for i in range(40)), b"".join(b"%d\n" % i for i in range(40) if i % 9)),
]


@pytest.mark.parametrize(("old", "new"), _CASES)
def test_git_apply_agrees(tmp_path: Path, old: bytes, new: bytes) -> None:
    diff = make_unified_diff(old, new, "f")
    (tmp_path / "f").write_bytes(old)
    (tmp_path / "d.patch").write_text(diff, newline="")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "apply", "--unidiff-zero", "--whitespace=nowarn", "d.patch"],
                   check=True, capture_output=True)
    assert (tmp_path / "f").read_bytes() == new == apply_unified_diff(old, diff)


@pytest.mark.parametrize(("old", "new"), _CASES)
def test_what_git_diff_makes_applies(tmp_path: Path, old: bytes, new: bytes) -> None:
    (tmp_path / "a").write_bytes(old)
    (tmp_path / "b").write_bytes(new)
    run = subprocess.run(["git", "diff", "--no-index", "--no-color", "a", "b"], cwd=tmp_path, capture_output=True,
                         check=False)
    assert run.returncode in (0, 1)
    assert apply_unified_diff(old, run.stdout) == new


@pytest.mark.parametrize(("old", "new"), _CASES)
def test_gnu_patch_agrees(tmp_path: Path, old: bytes, new: bytes) -> None:
    diff = make_unified_diff(old, new, "f")
    (tmp_path / "f").write_bytes(old)
    (tmp_path / "d.patch").write_text(diff, newline="")
    # -F0: no fuzz, like this applier; --binary: no CRLF conversion; -p1 strips a/ and b/
    subprocess.run(["patch", "-s", "-p1", "-F0", "--binary", "--no-backup-if-mismatch", "-i", "d.patch"],
                   cwd=tmp_path, check=True, capture_output=True)
    if new:
        assert (tmp_path / "f").read_bytes() == new == apply_unified_diff(old, diff)
    else:  # GNU patch removes a file a diff empties unless told otherwise
        assert not (tmp_path / "f").exists() or (tmp_path / "f").read_bytes() == b""
        assert apply_unified_diff(old, diff) == b""


def test_gnu_patch_also_refuses_a_diff_one_line_off_without_fuzz(tmp_path: Path) -> None:
    old = b"".join(b"%d\n" % i for i in range(20))
    diff = make_unified_diff(old, old.replace(b"10\n", b"ten\n"), "f")
    (tmp_path / "f").write_bytes(b"extra\n" + old)
    (tmp_path / "d.patch").write_text(diff, newline="")
    run = subprocess.run(["patch", "-p1", "-F0", "--dry-run", "-i", "d.patch"], cwd=tmp_path,
                         capture_output=True, check=False)
    # GNU patch searches for the context and finds it one line lower ("offset 1 line"); this
    # applier does not search: the hunk does not apply where its header says
    assert run.returncode == 0 and b"offset" in run.stdout
    with pytest.raises(PatchApplyError):
        apply_unified_diff(b"extra\n" + old, diff)


# ---------------------------------------------------------------- every refusal, where and why (§18.1)

_LONG = "x" * 100  # longer than the 80 bytes a message quotes


@pytest.mark.parametrize(("base", "diff", "hunk", "line", "message"), [
    (b"a\n", "--- a/f\n", 0, 1, "a `---` header not followed by a `+++` header"),
    (b"a\n", "msg\n--- a/f\n@@ -1 +1 @@\n-a\n+b\n", 0, 2, "a `---` header not followed by a `+++` header"),
    (b"a\n", "msg\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n", 0, 2, "a `+++` header without a `---` header before it"),
    (b"a\n", "@@ -1 +1 @@\n-a\n+b\n--- a/g\n+++ b/g\n", 2, 4, "a second file's header: a diff is of one file"),
    (b"a\n", "@@ -1 +1 @@\n-a\n+b\n a\n", 1, 4, "a line past the lines the hunk's header counts"),
    (b"a\n", "@@ -1 +1 @@\n-a\n+b\n-a\n", 1, 4, "a line past the lines the hunk's header counts"),
    (b"a\n", "@@ -1 +1 @@\n-a\n+b\n+a\n", 1, 4, "a line past the lines the hunk's header counts"),
    (b"a\n", "--- a/f\n+++ b/f\n a\n", 1, 3, "not a hunk header: b' a'"),  # no hunk before it
    (b"a\n", f"--- a/f\n+++ b/f\n{_LONG}\n", 1, 3, f"not a hunk header: {b'x' * 80!r}"),
    (b"a\n", "@@ -0,1 +1 @@\n-a\n+b\n", 1, 1, "a hunk with lines cannot start at line 0"),
    (b"a\n", "@@ -1 +0,1 @@\n-a\n+b\n", 1, 1, "a hunk with lines cannot start at line 0"),
    (b"a\nb\n", "@@ -1,2 +1,2 @@\n a\n", 1, 2, "the diff ends inside the hunk '@@ -1,2 +1,2 @@'"),
    (b"a\nb\n", f"@@ -1,2 +1,2 @@\n a\n{_LONG}\n", 1, 3,
     f"not a context, removed or added line: {b'x' * 80!r}"),
    (b"a\nb\n", "@@ -1,2 +1 @@\n-a\n+x\n+y\n-b\n", 1, 4, "more lines than the header '@@ -1,2 +1 @@' counts"),
    (b"a\nb\n", "@@ -1 +1,2 @@\n-a\n-b\n+x\n+y\n", 1, 3, "more lines than the header '@@ -1 +1,2 @@' counts"),
    (b"a\nb\n", "@@ -2 +2 @@\n-b\n+c\n@@ -1 +1 @@\n-a\n+d\n", 2, 4,
     "starts at base line 1, before the end of the hunk before it"),
    (b"a\n", "@@ -2 +2 @@\n-a\n+b\n", 1, 1, "needs base lines 2 to 2; the base has 1"),
    (b"a\nb\n", "@@ -1,3 +1,3 @@\n a\n b\n c\n", 1, 1, "needs base lines 1 to 3; the base has 2"),
    (b"a\n", "@@ -1 +2 @@\n-a\n+b\n", 1, 1, "new side starts at line 2, but the result is at line 1 there"),
    (b"a\nb\nc\n", "@@ -2 +1 @@\n-b\n+x\n", 1, 1, "new side starts at line 1, but the result is at line 2 there"),
    (b"a\nb\n", "@@ -1,2 +1,2 @@\n x\n b\n", 1, 2, "base line 1 is b'a\\n', the diff expects b'x\\n'"),  # context
    (b"a\nb\n", "@@ -1,2 +1,2 @@\n a\n-c\n+d\n", 1, 3, "base line 2 is b'b\\n', the diff expects b'c\\n'"),  # removed
    (b"a\nb\n", "@@ -1,2 +1,2 @@\n a\n\\ No newline at end of file\n b\n", 1, 2,
     "base line 1 is b'a\\n', the diff expects b'a'"),
    (f"{_LONG}\n".encode(), f"@@ -1 +1 @@\n-{'y' * 100}\n+b\n", 1, 2,
     f"base line 1 is {b'x' * 80!r}, the diff expects {b'y' * 80!r}"),
    (b"a\nb\n", "@@ -1 +1 @@\n-a\n+x\n\\ No newline at end of file\n", 1, 3,
     "a line marked without newline is not the last of the result"),  # an added line
    (b"a\nb\nc\n", "@@ -1,2 +1,2 @@\n-a\n+x\n b\n\\ No newline at end of file\n", 1, 4,
     "base line 2 is b'b\\n', the diff expects b'b'"),
    (b"a\nb", "@@ -1 +1 @@\n a\n\\ No newline at end of file\n", 1, 2,
     "base line 1 is b'a\\n', the diff expects b'a'"),
])
def test_each_refusal_names_its_hunk_its_diff_line_and_what_was_wrong(
        base: bytes, diff: str, hunk: int, line: int, message: str) -> None:
    """§18.1: `hunk` (0 for a header), `line` (1-based, of the diff), and a message naming the
    base line where one was compared; quoted lines are cut at 80 bytes."""
    with pytest.raises(PatchApplyError) as caught:
        apply_unified_diff(base, diff)
    assert (caught.value.hunk, caught.value.line) == (hunk, line)
    assert caught.value.message == f"hunk {hunk}, diff line {line}: {message}"


def test_a_context_line_without_newline_must_end_the_result_too() -> None:
    """§18.1 rule 6: a context line is a new line as well; marked without `0x0A` (as the base's
    last line is) while more new lines follow, it fails on its new side."""
    with pytest.raises(PatchApplyError) as caught:
        apply_unified_diff(b"a", "@@ -1 +1,2 @@\n a\n\\ No newline at end of file\n+b\n")
    assert (caught.value.hunk, caught.value.line) == (1, 2)
    assert caught.value.message.endswith("a line marked without newline is not the last of the result")


@pytest.mark.parametrize(("base", "diff", "result"), [
    (b"a\n", "a message of one line\n@@ -1 +1 @@\n-a\n+b\n", b"b\n"),  # a preamble of any length
    (b"a\n", "one\ntwo\nthree\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n", b"b\n"),
])
def test_preambles_and_headers(base: bytes, diff: str, result: bytes) -> None:
    assert apply_unified_diff(base, diff) == result


_SOURCE = "import os\n\n\ndef main() -> None:\n    print(os.getcwd())\n"


@pytest.mark.parametrize(("diff", "line", "message"), [
    ("", 0, "the diff is empty"),
    (b"", 0, "the diff is empty"),
    ("\n \n\t\n", 3, "the diff is only white space"),
    (_SOURCE, 5, "not a unified diff: none of its 5 line(s) is a `---`/`+++` header or an "
                 "`@@ -a,b +c,d @@` hunk header (it starts b'import os')"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", 3, "not a unified diff: none of its 3 line(s) is a `---`/`+++` header "
                                      "or an `@@ -a,b +c,d @@` hunk header (it starts b'\\x89PNG\\r')"),
    ("--- a/f\n+++ b/f\n", 2, "the diff has `---`/`+++` headers but no hunk (`@@ -a,b +c,d @@`): it changes nothing"),
    ("diff --git a/f b/f\nindex 1..2\n--- a/f\n+++ b/f", 4,
     "the diff has `---`/`+++` headers but no hunk (`@@ -a,b +c,d @@`): it changes nothing"),
])
def test_a_diff_without_a_hunk_is_no_patch(diff: str | bytes, line: int, message: str) -> None:
    """git apply ("No valid patches in input") and GNU patch ("Only garbage") refuse it too:
    applied, it would give the base back, so a source file given by mistake would make a patch
    that changes nothing. `allow_empty` reads it as §18.1 reads a record's diff."""
    base = _SOURCE.encode()
    with pytest.raises(NotADiffError) as caught:
        apply_unified_diff(base, diff)
    assert isinstance(caught.value, PatchApplyError) and caught.value.rule == "not_a_diff"
    assert (caught.value.hunk, caught.value.line, caught.value.message) == (0, line, message)
    assert apply_unified_diff(base, diff, allow_empty=True) == base


def test_git_apply_also_refuses_a_diff_without_a_hunk(tmp_path: Path) -> None:
    for diff in ("", _SOURCE, "--- a/f\n+++ b/f\n"):
        (tmp_path / "d.patch").write_text(diff)
        run = subprocess.run(["git", "apply", "--check", "d.patch"], cwd=tmp_path, capture_output=True, check=False)
        assert run.returncode != 0 and b"No valid patches in input" in run.stderr
        with pytest.raises(NotADiffError):
            apply_unified_diff(b"a\n", diff)


def test_a_section_name_in_another_encoding_is_any_text() -> None:
    """§18.1 rule 3: what follows `@@ ` is not read; `git diff` may write it in the file's own
    encoding, so a diff given as bytes may carry bytes that are not UTF-8 there."""
    assert apply_unified_diff(b"a\n", b"@@ -1 +1 @@ f\xe9()\n-a\n+b\n") == b"b\n"
    with pytest.raises(PatchApplyError) as caught:
        apply_unified_diff(b"a\n", b"@@ -1 +1 @@ f\xe9()\n-a\n")
    assert caught.value.message == "hunk 1, diff line 2: the diff ends inside the hunk '@@ -1 +1 @@ f\ufffd()'"


def test_make_refuses_bytes_that_are_not_text_saying_why() -> None:
    with pytest.raises(SchemaError) as caught:
        make_unified_diff(b"a\n", b"\xff\n", "f")
    assert caught.value.message == "a patch's diff is text: a file not UTF-8 (invalid start byte) has none"


@pytest.mark.parametrize(("old", "new"), [*_CASES, (b"a\nb\nc\nd\ne\nf\ng\nh\n", b"a\nb\nc\nD\ne\nf\ng\nh\n")])
def test_make_writes_the_hunks_diff_u_writes(tmp_path: Path, old: bytes, new: bytes) -> None:
    """The unified format as POSIX `diff -u` writes it: a range of one line is its start alone."""
    (tmp_path / "a").write_bytes(old)
    (tmp_path / "b").write_bytes(new)
    run = subprocess.run(["diff", "-u", "a", "b"], cwd=tmp_path, capture_output=True, check=False)
    assert make_unified_diff(old, new, "f").split("\n", 2)[2] == run.stdout.decode().split("\n", 2)[2]


def test_a_one_line_change_among_many_equal_lines_changes_one_line() -> None:
    """The diff shows what changed with 3 lines of context: a line common in the file (a blank
    line, a brace) is no reason to rewrite the file around the change."""
    old = [b"x\n"] * 300
    new = [*old[:150], b"y\n", *old[151:]]
    diff = make_unified_diff(b"".join(old), b"".join(new), "f").splitlines()[2:]
    changed = [x for x in diff if x[:1] in ("-", "+")]
    assert sorted(changed) == ["+y", "-x"]
