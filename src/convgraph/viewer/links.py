"""Who names whom in a conversation about code: the record a review, request or decision
names, the records naming a given one (its reviews, the requests about it, and the decisions
answering those requests), and the artifacts a record names by a name of its own.

Pure: it reads only the values it is given, so the viewer's shell feeds it the
conversation's records and turns what it finds into links. Invariant: every CID it returns
is one that a given record's payload or refs hold, never one built from text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from convgraph.artifacts.claims import file_tree
from convgraph.core import safe_text
from convgraph.core.cid import CID

NAMING: Final = {"review_comment": "target", "decision_request": "subject", "decision": "request"}
_NOTES: Final = {"review_comment": "verdict", "decision_request": "question", "decision": "choice"}
NOTE_WIDTH: Final = 80


@dataclass(frozen=True)
class Said:
    """A record as the links see it: its CID, kind and payload."""

    cid: CID
    kind: str
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class Mention:
    """A record naming the one a page shows: `via` is the request a decision answers when
    the decision names the page's record through it; `note` (a verdict, a question, a
    choice) is one safe line."""

    cid: CID
    kind: str
    via: CID | None
    note: str


def named(kind: str, payload: Mapping[str, Any]) -> CID | None:
    """The record a review (`target`), request (`subject`) or decision (`request`) names."""
    field = NAMING.get(kind)
    found = payload.get(field) if field is not None else None
    return found if isinstance(found, CID) else None


def mentions(target: CID, records: Iterable[Said]) -> tuple[Mention, ...]:
    """The records naming `target`, in the order given: reviews of it, requests about it,
    decisions answering it, and decisions answering a request about it (`via` that request)."""
    naming = [(r, n) for r in records if (n := named(r.kind, r.payload)) is not None]
    asked = {r.cid for r, n in naming if n == target and r.kind == "decision_request"}
    return tuple(Mention(r.cid, r.kind, None if n == target else n, _note(r))
                 for r, n in naming if n == target or (r.kind == "decision" and n in asked))


def artifacts(kind: str, payload: Mapping[str, Any], refs: Sequence[CID] = ()) -> dict[CID, str]:
    """Each artifact the record names, with the first name it goes by there: a patch's
    `base` and `result`, a snapshot's file paths (safe lines), `ref` for one of its refs."""
    names: list[tuple[CID, str]] = []
    if kind == "patch":
        names += [(payload[k], k) for k in ("base", "result") if isinstance(payload.get(k), CID)]
    elif kind == "code_snapshot":
        tree = file_tree(dict(payload)) or {}
        names += [(cid, safe_text.line(path)) for path, cid in sorted(tree.items())]
    names += [(ref, "ref") for ref in refs]
    out: dict[CID, str] = {}
    for cid, name in names:
        out.setdefault(cid, name)
    return out


def _note(r: Said) -> str:
    raw = r.payload.get(_NOTES[r.kind])
    text = safe_text.line(" ".join(raw.split())) if isinstance(raw, str) else ""
    return text if len(text) <= NOTE_WIDTH else text[: NOTE_WIDTH - 1] + "…"
