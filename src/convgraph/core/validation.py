"""Causal rules a record must satisfy against the parents it names (pure).

`decode_record` checks what a record says about itself; this module checks what it says
about others, once every parent is known: same conversation, hlc strictly after every
parent's, and the author's chain: `seq == 1` with no own parent, or `seq == n + 1` with
the author's record at `n` among the parents. Invariant: a record accepted here can be
placed in canonical order after all of its parents.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from convgraph.core.cid import CID
from convgraph.core.record import Record, RecordMeta
from convgraph.errors import HlcOrderError, ParentConversationError, SeqChainError


def missing_parents(record: Record, known: Container[CID]) -> list[CID]:
    """Parents of `record` absent from `known`, in the record's order."""
    return [p for p in record.parents if p not in known]


def check_causality(record: Record | RecordMeta, parents: Mapping[CID, RecordMeta | Record]) -> None:
    """Raise a `CausalityError` unless `record` (or a header) is consistent with its parents
    (their headers, or the records themselves)."""
    text = record.cid  # rendered only if an error is shown
    own_seqs: list[int] = []
    for cid in record.parents:
        parent = parents[cid]
        if parent.conv != record.conv:
            raise ParentConversationError(
                f"parent {cid} belongs to conversation {parent.conv!r}, not {record.conv!r}", cid=text
            )
        if parent.hlc >= record.hlc:
            raise HlcOrderError(
                f"hlc {tuple(record.hlc)} is not after parent {cid} at {tuple(parent.hlc)}", cid=text
            )
        if parent.actor == record.actor:
            own_seqs.append(parent.seq)
    if record.seq == 1:
        if own_seqs:
            raise SeqChainError("seq 1 but the author's own record is among the parents", cid=text)
        return
    if record.seq - 1 not in own_seqs:
        raise SeqChainError(
            f"seq {record.seq} needs the author's record at seq {record.seq - 1} among its parents",
            cid=text,
        )
    if max(own_seqs) >= record.seq:
        raise SeqChainError(f"seq {record.seq} names the author's later record as parent", cid=text)
