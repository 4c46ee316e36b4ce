"""Unified diffs of one file: a strict applier and a maker (docs/format.md §18).

Pure and exact: every hunk applies at the line its header names, every context and removed
line must equal the base's line byte for byte (its line ending included), and nothing is
searched for or fuzzed. Invariant: `apply_unified_diff(old, make_unified_diff(old, new, p))
== new` for every pair of different UTF-8 texts (for equal ones the diff is "", which only
`allow_empty=True` takes), and `apply_unified_diff` either returns the one result the diff
describes or raises `PatchApplyError` naming the hunk and diff line that failed.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Final

from convgraph.errors import NotADiffError, PatchApplyError, SchemaError

_HUNK: Final = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(?: .*)?")
_CONTEXT: Final = 3


@dataclass(slots=True)
class _Hunk:
    number: int  # 1-based, in the diff
    header: str
    line: int  # the diff line of the header, 1-based
    old_start: int  # 0-based index of the first base line the hunk covers
    old_len: int
    new_start: int
    new_len: int
    old: list[tuple[bytes, int]] = field(default_factory=list)  # (line with its ending, diff line)
    new: list[tuple[bytes, int]] = field(default_factory=list)


def _lines(data: bytes) -> list[bytes]:
    """`data` cut after each b"\\n"; the last line lacks it when `data` does not end with one."""
    parts = data.split(b"\n")
    out = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _fail(message: str, *, hunk: int, line: int) -> PatchApplyError:
    return PatchApplyError(f"hunk {hunk}, diff line {line}: {message}", hunk=hunk, line=line)


def _no_hunk(diff: bytes, lines: list[bytes], headers: bool) -> NotADiffError:
    """Why `diff`, which holds no hunk, is not a patch: git apply and GNU patch refuse it too."""
    if not diff.strip():
        why = "the diff is empty" if not diff else "the diff is only white space"
    elif headers:
        why = "the diff has `---`/`+++` headers but no hunk (`@@ -a,b +c,d @@`): it changes nothing"
    else:
        why = (f"not a unified diff: none of its {len(lines)} line(s) is a `---`/`+++` header or an "
               f"`@@ -a,b +c,d @@` hunk header (it starts {lines[0][:40]!r})")
    return NotADiffError(why, hunk=0, line=len(lines))


def _parse(diff: bytes, *, allow_empty: bool) -> list[_Hunk]:
    lines = diff.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the diff's own final newline ends its last line
    i = 0
    while i < len(lines) and not lines[i].startswith((b"--- ", b"+++ ", b"@@ ")):
        i += 1  # a preamble (`diff --git`, `index`, a message) is not part of the patch
    headers = i < len(lines)
    if i < len(lines) and lines[i].startswith(b"--- "):
        if i + 1 >= len(lines) or not lines[i + 1].startswith(b"+++ "):
            raise _fail("a `---` header not followed by a `+++` header", hunk=0, line=i + 1)
        i += 2
    elif i < len(lines) and lines[i].startswith(b"+++ "):
        raise _fail("a `+++` header without a `---` header before it", hunk=0, line=i + 1)
    hunks: list[_Hunk] = []
    while i < len(lines):
        hunk, i = _parse_hunk(lines, i, len(hunks) + 1)
        hunks.append(hunk)
    if not hunks and not allow_empty:
        raise _no_hunk(diff, lines, headers)
    return hunks


def _parse_hunk(lines: list[bytes], i: int, number: int) -> tuple[_Hunk, int]:
    head = lines[i]
    m = _HUNK.fullmatch(head)
    if m is None:
        if head.startswith(b"--- "):
            raise _fail("a second file's header: a diff is of one file", hunk=number, line=i + 1)
        if head[:1] in (b" ", b"-", b"+") and number > 1:
            raise _fail("a line past the lines the hunk's header counts", hunk=number - 1, line=i + 1)
        raise _fail(f"not a hunk header: {head[:80]!r}", hunk=number, line=i + 1)
    a, b, c, d = (int(g) if g is not None else 1 for g in m.groups())
    hunk = _Hunk(number, head.decode("utf-8", "replace"), i + 1,
                 a - 1 if b else a, b, c - 1 if d else c, d)
    if (b and a == 0) or (d and c == 0):
        raise _fail("a hunk with lines cannot start at line 0", hunk=number, line=i + 1)
    i += 1
    while len(hunk.old) < b or len(hunk.new) < d:
        if i >= len(lines):
            raise _fail(f"the diff ends inside the hunk {hunk.header!r}", hunk=number, line=i)
        line, tag = lines[i], lines[i][:1]
        body = line[1:] + b"\n"
        if tag == b" ":
            hunk.old.append((body, i + 1))
            hunk.new.append((body, i + 1))
        elif tag == b"-":
            hunk.old.append((body, i + 1))
        elif tag == b"+":
            hunk.new.append((body, i + 1))
        else:
            raise _fail(f"not a context, removed or added line: {line[:80]!r}", hunk=number, line=i + 1)
        if len(hunk.old) > b or len(hunk.new) > d:
            raise _fail(f"more lines than the header {hunk.header!r} counts", hunk=number, line=i + 1)
        i += 1
        if i < len(lines) and lines[i].startswith(b"\\"):  # "\ No newline at end of file"
            if tag in (b" ", b"-"):
                hunk.old[-1] = (hunk.old[-1][0][:-1], i)
            if tag in (b" ", b"+"):
                hunk.new[-1] = (hunk.new[-1][0][:-1], i)
            i += 1
    return hunk, i


def apply_unified_diff(base: bytes, diff: str | bytes, *, allow_empty: bool = False) -> bytes:
    """The bytes `diff` makes of `base`; `PatchApplyError` when it does not apply exactly, and
    its `NotADiffError` when it holds no hunk, unless `allow_empty` (as `git apply --allow-empty`):
    then a diff without hunks gives `base` unchanged, as docs/format.md §18.1 reads a record's."""
    data = diff.encode("utf-8") if isinstance(diff, str) else diff
    hunks = _parse(data, allow_empty=allow_empty)
    old = _lines(base)
    out: list[bytes] = []
    at = 0  # the next base line not yet copied
    for h in hunks:
        if h.old_start < at:
            raise _fail(f"starts at base line {h.old_start + 1}, before the end of the hunk before it",
                        hunk=h.number, line=h.line)
        if h.old_start + h.old_len > len(old):
            raise _fail(f"needs base lines {h.old_start + 1} to {h.old_start + h.old_len}; "
                        f"the base has {len(old)}", hunk=h.number, line=h.line)
        out.extend(old[at:h.old_start])
        if h.new_start != len(out):
            raise _fail(f"new side starts at line {h.new_start + 1}, but the result is at line "
                        f"{len(out) + 1} there", hunk=h.number, line=h.line)
        for k, (want, line) in enumerate(h.old):
            got = old[h.old_start + k]
            if got != want:
                raise _fail(f"base line {h.old_start + k + 1} is {got[:80]!r}, the diff expects "
                            f"{want[:80]!r}", hunk=h.number, line=line)
        for k, (text, line) in enumerate(h.new):
            if not text.endswith(b"\n") and not (k == len(h.new) - 1 and h is hunks[-1]
                                                 and h.old_start + h.old_len == len(old)):
                raise _fail("a line marked without newline is not the last of the result",
                            hunk=h.number, line=line)
            out.append(text)
        at = h.old_start + h.old_len
    out.extend(old[at:])
    return b"".join(out)


def make_unified_diff(old: bytes, new: bytes, path: str) -> str:
    """A unified diff (3 lines of context, `a/path` and `b/path` headers) taking `old` to `new`;
    "" when they are equal. Both must be UTF-8 (`SchemaError`), as a record's `diff` is text."""
    try:
        a, b = _lines(old), _lines(new)
        a_text, b_text = [x.decode("utf-8") for x in a], [x.decode("utf-8") for x in b]
    except UnicodeDecodeError as exc:
        raise SchemaError(f"a patch's diff is text: a file not UTF-8 ({exc.reason}) has none") from exc
    groups = list(difflib.SequenceMatcher(None, a_text, b_text, autojunk=False).get_grouped_opcodes(_CONTEXT))
    if not groups:
        return ""
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    for group in groups:
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                out.extend(_marked(" ", line) for line in a_text[x1:x2])
                continue
            out.extend(_marked("-", line) for line in a_text[x1:x2])
            out.extend(_marked("+", line) for line in b_text[y1:y2])
    return "".join(out)


def _range(start: int, stop: int) -> str:
    n = stop - start
    return f"{start + 1}" if n == 1 else f"{start + 1 if n else start},{n}"


def _marked(tag: str, line: str) -> str:
    return f"{tag}{line}" if line.endswith("\n") else f"{tag}{line}\n\\ No newline at end of file\n"
