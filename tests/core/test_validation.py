"""Causal rules against parents: conversation, hlc order, and the author's seq chain."""

from __future__ import annotations

from typing import Any

import pytest

from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import Record, sign_record
from convgraph.core.validation import check_causality, missing_parents
from convgraph.errors import HlcOrderError, ParentConversationError, SeqChainError

A, B = SigningKey(bytes(range(32))), SigningKey(bytes(range(1, 33)))


def rec(key: SigningKey, seq: int, wall: int, parents: list[Record], conv: str = "c", **kw: Any) -> Record:
    return sign_record(key, conv=conv, seq=seq, hlc=Hlc(wall, 0), parents=[p.cid for p in parents],
                       kind="user_message", payload={"content": "x"}, **kw)


def check(r: Record, parents: list[Record]) -> None:
    check_causality(r, {p.cid: p.meta for p in parents})


def test_valid_chain_and_join() -> None:
    a1 = rec(A, 1, 10, [])
    b1 = rec(B, 1, 11, [a1])
    a2 = rec(A, 2, 12, [a1, b1])
    check(a1, [])
    check(b1, [a1])
    check(a2, [a1, b1])


def test_hlc_must_exceed_every_parent() -> None:
    a1 = rec(A, 1, 10, [])
    with pytest.raises(HlcOrderError):
        check(rec(B, 1, 10, [a1]), [a1])
    with pytest.raises(HlcOrderError):
        check(rec(B, 1, 9, [a1]), [a1])


def test_parent_from_another_conversation() -> None:
    other = rec(A, 1, 10, [], conv="elsewhere")
    with pytest.raises(ParentConversationError):
        check(rec(B, 1, 11, [other]), [other])


def test_seq_rules() -> None:
    a1 = rec(A, 1, 10, [])
    a2 = rec(A, 2, 11, [a1])
    b1 = rec(B, 1, 12, [a2])
    with pytest.raises(SeqChainError):  # seq 1 with own parent
        check(rec(A, 1, 13, [a2]), [a2])
    with pytest.raises(SeqChainError):  # skips seq 3
        check(rec(A, 4, 13, [a2]), [a2])
    with pytest.raises(SeqChainError):  # previous own record only reachable, not a parent
        check(rec(A, 3, 13, [b1]), [b1])
    with pytest.raises(SeqChainError):  # seq 2 without any own parent
        check(rec(A, 2, 13, [b1]), [b1])
    with pytest.raises(SeqChainError):  # names its own later record too
        check(rec(A, 2, 13, [a1, a2]), [a1, a2])
    check(rec(A, 3, 13, [a2, b1]), [a2, b1])


def test_missing_parents() -> None:
    a1 = rec(A, 1, 10, [])
    b1 = rec(B, 1, 11, [a1])
    assert missing_parents(b1, {}) == [a1.cid]
    assert missing_parents(b1, {a1.cid: a1.meta}) == []


def test_each_causal_error_names_the_record_and_what_it_contradicts() -> None:
    a1 = rec(A, 1, 10, [])
    a2 = rec(A, 2, 11, [a1])
    other = rec(A, 1, 10, [], conv="elsewhere")
    cases = [
        (rec(B, 1, 11, [other]), [other], ParentConversationError,
         f"parent {other.cid} belongs to conversation 'elsewhere', not 'c'"),
        (rec(B, 1, 10, [a1]), [a1], HlcOrderError, f"hlc (10, 0) is not after parent {a1.cid} at (10, 0)"),
        (rec(A, 1, 13, [a2]), [a2], SeqChainError, "seq 1 but the author's own record is among the parents"),
        (rec(A, 4, 13, [a2]), [a2], SeqChainError, "seq 4 needs the author's record at seq 3 among its parents"),
        (rec(A, 2, 13, [a1, a2]), [a1, a2], SeqChainError, "seq 2 names the author's later record as parent"),
    ]
    for record, parents, error, message in cases:
        with pytest.raises(error) as info:
            check(record, parents)
        assert (info.value.message, info.value.cid) == (message, str(record.cid))
