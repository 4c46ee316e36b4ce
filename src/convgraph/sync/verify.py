"""Checks on what a peer hands over outside the state machine: one record, a set of heads.

`HttpRemote.record`, `heads` and `events` run every record through these, so nothing
reaches their caller on the server's word alone (records inside sync replies go through
full ingest instead). Pure: bytes and records in, a record or a `PeerMisbehavedError` out.
Invariant: a record `checked_record` returns hashes to the CID it was named by, passes
every intrinsic rule of `decode_record`, and belongs to the conversation asked about.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from convgraph import graph
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import DEFAULT_LIMITS, Limits, Record, RecordMeta, decode_record
from convgraph.errors import ConvgraphError, PeerMisbehavedError

HeldLookup = Callable[[CID], RecordMeta | None]
"""The header of a record the caller holds, or None: lets a heads check see deeper ancestry."""


def checked_record(
    data: bytes, cid: CID, *, conv: str | None = None, limits: Limits = DEFAULT_LIMITS
) -> Record:
    """The record `data` encodes, if it is the valid record `cid` names (in `conv`, when given)."""
    try:
        record = decode_record(data, limits=limits, expected_cid=cid)
    except ConvgraphError as exc:
        raise PeerMisbehavedError(f"the peer's record fails the {exc.rule} check: {exc}", cid=cid,
                                  error=exc) from exc
    if conv is not None and record.conv != conv:
        raise PeerMisbehavedError(f"the peer's record belongs to conversation {record.conv!r}, not {conv!r}",
                                  cid=cid)
    return record


def check_heads(heads: Sequence[Record], held: HeldLookup | None = None) -> None:
    """Refuse a head set in which one member is an ancestor of another.

    Ancestry is followed through the heads' own parents and, when `held` is given, through
    the records the caller holds; a server can still hide a newer head that neither knows.
    """
    claimed = {r.cid: r.meta for r in heads}

    def meta(cid: CID) -> RecordMeta | None:
        found = claimed.get(cid)
        return found if found is not None or held is None else held(cid)

    def parents_of(cid: CID) -> tuple[CID, ...] | None:
        m = meta(cid)
        return None if m is None else m.parents

    def hlc_of(cid: CID) -> Hlc | None:
        m = meta(cid)
        return None if m is None else m.hlc

    buried = graph.reaches([p for r in heads for p in r.parents], claimed.keys(), parents_of, hlc_of)
    if buried:
        cid = min(buried)
        raise PeerMisbehavedError("a claimed head is an ancestor of another claimed head", cid=cid)
