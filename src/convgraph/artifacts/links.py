"""Which CIDs a record names as artifacts: the set sync moves and readers may fetch.

Invariant: computed from the record alone (its `refs` and the artifact fields of its kind's
payload), so every replica derives the same set from the same record.
"""

from __future__ import annotations

from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.core.record import Record

# payload fields that name an artifact, per kind (docs/format.md §17.4)
_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "code_snapshot": ("blob",),
    "patch": ("base", "result"),
}

ARTIFACT_KINDS: Final = frozenset(_FIELDS)
"""The kinds whose payload may name artifacts (every kind's `refs` may too)."""


def artifact_links(record: Record) -> frozenset[CID]:
    """`refs`, plus `code_snapshot.blob` and every value of its `tree`, plus `patch.base` and
    `patch.result`; records named there are included too (a reader tells them apart by what
    it holds). Only those two kinds' payloads are read: ingest pays nothing for a turn."""
    if record.kind not in _FIELDS:
        return frozenset(record.refs) if record.refs else _NONE
    out: set[CID] = set(record.refs)
    payload: Any = record.payload
    for name in _FIELDS[record.kind]:
        if isinstance(value := payload.get(name), CID):
            out.add(value)
    if isinstance(tree := payload.get("tree"), dict):
        out.update(v for v in tree.values() if isinstance(v, CID))
    return frozenset(out)


_NONE: Final[frozenset[CID]] = frozenset()
