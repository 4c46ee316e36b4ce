"""How the SQL stores lay values out in columns (`store/sql_rows.py`): what is encoded decodes
back to itself, and the rows a commit writes are exactly the turn index rows of its records."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import RecordMeta
from convgraph.projections.index_rows import LINE_KINDS, TARGET_KINDS, rows_of
from convgraph.store.rows import FindingRow
from convgraph.store.sql_rows import (
    decode_blobs,
    encode_blobs,
    finding_of_row,
    header_row,
    index_params,
    meta_of_row,
    prefix_range,
    record_params,
    split_cids,
)
from projections.window_world import upgrade_history

cids = st.binary(min_size=1, max_size=64).map(CID.of_record)
blobs = st.lists(st.binary(max_size=40), max_size=5).map(tuple)


@given(conv=st.text(max_size=8), actor=st.binary(min_size=32, max_size=32), seq=st.integers(0, 2**40),
       wall=st.integers(0, 2**47), counter=st.integers(0, 2**16), cid=cids,
       parents=st.lists(cids, max_size=4).map(tuple))
def test_a_header_row_reads_back_as_its_meta(
    conv: str, actor: bytes, seq: int, wall: int, counter: int, cid: CID, parents: tuple[CID, ...]
) -> None:
    meta = RecordMeta(cid, conv, actor, seq, Hlc(wall, counter), parents)
    row = header_row(meta)
    assert row[-1] == b""  # a header keeps no bytes
    assert meta_of_row(row[:-1]) == meta
    assert split_cids(b"".join(map(bytes, parents))) == parents


@given(statements=blobs, cites=st.lists(cids, max_size=4).map(tuple), cid=cids)
def test_a_finding_row_reads_back_as_the_finding(statements: tuple[bytes, ...], cites: tuple[CID, ...],
                                                 cid: CID) -> None:
    assert decode_blobs(encode_blobs(statements)) == statements
    finding = FindingRow(cid, "fork", "c", b"bundle", cites, statements, "two heads", 7)
    row = (bytes(cid), "fork", "c", b"bundle", b"".join(map(bytes, cites)), encode_blobs(statements),
           "two heads", 7)
    assert finding_of_row(row) == finding


@given(head=st.binary(max_size=3), x=st.binary(max_size=4))
def test_a_prefix_range_holds_exactly_what_starts_with_the_head(head: bytes, x: bytes) -> None:
    where, args = prefix_range("between", "above", head)
    if where == ["between"]:
        low, high = args
        assert isinstance(low, bytes) and isinstance(high, bytes)
        inside = low <= x < high
    elif where == ["above"]:
        (low,) = args
        assert isinstance(low, bytes)
        inside = x >= low
    else:
        assert where == [] and not head
        inside = True
    assert inside == x.startswith(head)


def test_the_rows_a_commit_writes_are_the_rows_of_its_records() -> None:
    records = upgrade_history()
    assert record_params(records) == index_params((r.conv, row) for row, r in zip(rows_of(records), [
        r for r in records if r.kind in (*LINE_KINDS, *TARGET_KINDS, "branch")], strict=True))
