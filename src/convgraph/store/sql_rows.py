"""How the SQL stores lay the store's values out in columns, and read them back.

SQLite and PostgreSQL keep the same tables (parents and missing CIDs back to back in one
column, statements as a DAG-CBOR list, the turn index as `turn_line`, `turn_targets` and
`turn_branches` rows); these pure functions build their parameters and decode their rows.
Invariant: for each value, decoding what was encoded gives that value back, in both stores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from convgraph.artifacts.links import artifact_links
from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import Record, RecordMeta
from convgraph.errors import StoreCorruptError
from convgraph.projections.index_rows import (
    LINE_KINDS,
    MAIN,
    SYSTEM_KIND,
    SYSTEM_LINE,
    TARGET_KINDS,
    BranchRow,
    LineRow,
    Row,
    TargetRow,
)
from convgraph.store.rows import FindingRow, Pending, PendingReason

CID_LEN: Final = 36


def split_cids(blob: bytes) -> tuple[CID, ...]:
    """CIDs stored back to back in one column (how the SQL stores keep parents and missing).

    Not checked again: only CIDs of validated records are written there, and ingest reads
    these for every parent of every record it plans (tens of thousands a second)."""
    new = bytes.__new__
    return tuple([new(CID, blob[i : i + CID_LEN]) for i in range(0, len(blob), CID_LEN)])


def meta_of_row(row: tuple[bytes, str, bytes, int, int, int, bytes]) -> RecordMeta:
    """A `RecordMeta` from the SQL stores' `cid, conv, actor, seq, wall, counter, parents` columns."""
    cid, conv, actor, seq, wall, counter, parents = row
    return RecordMeta(CID(cid), conv, actor, seq, Hlc(wall, counter), split_cids(parents))


def pending_of_row(row: tuple[bytes, str, int, bytes, bytes]) -> Pending:
    """A `Pending` from the SQL stores' `cid, reason, wall, missing, data` columns."""
    cid, reason, wall, missing, data = row
    why: PendingReason = "clock" if reason == "clock" else "parents"
    return Pending(CID(cid), data, why, wall, split_cids(missing))


def header_row(meta: RecordMeta) -> tuple[bytes, str, bytes, int, int, int, bytes, bytes]:
    """The SQL stores' `records` row of a header-only record: every column, empty `data`."""
    return (bytes(meta.cid), meta.conv, meta.actor, meta.seq, meta.hlc.wall_ms, meta.hlc.counter,
            b"".join(map(bytes, meta.parents)), b"")


def finding_of_row(row: tuple[bytes, str, str, bytes, bytes, bytes, str, int]) -> FindingRow:
    """A `FindingRow` from the SQL stores' `id, kind, conv, bundle, cites, statements, summary, found`."""
    fid, kind, conv, bundle, cites, statements, summary, found = row
    return FindingRow(CID(bytes(fid)), kind, conv, bytes(bundle), split_cids(bytes(cites)),
                      decode_blobs(bytes(statements)), summary, int(found))



def encode_blobs(blobs: Iterable[bytes]) -> bytes:
    """Byte strings in one column (a DAG-CBOR list), as the SQL stores keep statements."""
    return codec.encode(list(blobs))


def decode_blobs(data: bytes) -> tuple[bytes, ...]:
    """The byte strings `encode_blobs` stored."""
    value = codec.decode_trusted(data)
    if not isinstance(value, list) or not all(isinstance(v, bytes) for v in value):
        raise StoreCorruptError("a stored list of statements is not a list of byte strings")
    return tuple(value)



IndexParams = tuple[list[tuple[object, ...]], list[tuple[object, ...]], list[tuple[object, ...]]]


def index_params(rows: Iterable[tuple[str, Row]]) -> IndexParams:
    """The SQL stores' `turn_line`, `turn_targets` and `turn_branches` rows of (conv, row) pairs:
    `conv, line | target | name, wall, counter, actor, cid, kind | kind | origin`."""
    lines: list[tuple[object, ...]] = []
    targets: list[tuple[object, ...]] = []
    branches: list[tuple[object, ...]] = []
    for conv, row in rows:
        if isinstance(row, LineRow):
            lines.append((conv, row.line, *row.key, row.kind))
        elif isinstance(row, TargetRow):
            targets.append((conv, bytes(row.target), *row.key, row.kind))
        else:
            branches.append((conv, row.name, *row.key, bytes(row.origin)))
    return lines, targets, branches


def record_params(records: Iterable[Record], blob: Callable[[bytes], object] = bytes) -> IndexParams:
    """`index_params` of the rows of `records`, built straight from their headers: what each
    commit pays for its index (a turn's payload is never decoded); each byte string as `blob`
    makes it (a store may bind another type of the same bytes)."""
    lines: list[tuple[object, ...]] = []
    targets: list[tuple[object, ...]] = []
    branches: list[tuple[object, ...]] = []
    for r in records:
        kind, (wall, counter) = r.kind, r.hlc
        if kind in LINE_KINDS:
            lines.append((r.conv, r.branch or MAIN, wall, counter, blob(r.actor), blob(r.cid), kind))
        elif kind == SYSTEM_KIND:
            lines.append((r.conv, SYSTEM_LINE, wall, counter, blob(r.actor), blob(r.cid), kind))
        elif kind in TARGET_KINDS:
            targets.append((r.conv, blob(r.payload["target"]), wall, counter, blob(r.actor),
                            blob(r.cid), kind))
        elif kind == "branch":
            p = r.payload
            branches.append((r.conv, p["name"], wall, counter, blob(r.actor), blob(r.cid),
                             blob(p["from"])))
    return lines, targets, branches


def line_row(line: str, row: tuple[int, int, bytes, bytes, str]) -> LineRow:
    """A `LineRow` from the SQL stores' `wall, counter, actor, cid, kind` columns."""
    wall, counter, actor, cid, kind = row
    return LineRow(line, (int(wall), int(counter), bytes(actor), bytes(cid)), kind)


def target_row(row: tuple[bytes, int, int, bytes, bytes, str]) -> TargetRow:
    """A `TargetRow` from the SQL stores' `target, wall, counter, actor, cid, kind` columns."""
    target, wall, counter, actor, cid, kind = row
    return TargetRow(CID._trusted(bytes(target)), (int(wall), int(counter), bytes(actor), bytes(cid)), kind)


def branch_row(name: str, row: tuple[int, int, bytes, bytes, bytes]) -> BranchRow:
    """A `BranchRow` from the SQL stores' `wall, counter, actor, cid, origin` columns."""
    wall, counter, actor, cid, origin = row
    return BranchRow(name, (int(wall), int(counter), bytes(actor), bytes(cid)), CID._trusted(bytes(origin)))


def artifact_rows(records: Iterable[Record]) -> list[tuple[str, bytes, bytes]]:
    """The stores' `artifact_refs` rows of `records`: `conv, cid named, record`."""
    return [(r.conv, bytes(c), bytes(r.cid)) for r in records for c in artifact_links(r)]



def group(pairs: Iterable[tuple[bytes, bytes]]) -> dict[CID, set[CID]]:
    """`{a: {b, ...}}` of (a, b) byte pairs read back from a store, as CIDs."""
    out: dict[CID, set[CID]] = {}
    for a, b in pairs:
        out.setdefault(CID._trusted(bytes(a)), set()).add(CID._trusted(bytes(b)))
    return out



def prefix_range(between: str, above: str, head: bytes) -> tuple[list[str], tuple[object, ...]]:
    """The SQL condition (`between` or `above`, with their placeholders) and arguments that hold
    exactly the byte strings starting with `head`: `head <= x < head + 1`."""
    if not head:
        return [], ()
    upper = head.rstrip(b"\xff")
    if not upper:  # all 0xff: nothing sorts above, the range is open
        return [above], (head,)
    return [between], (head, upper[:-1] + bytes((upper[-1] + 1,)))
