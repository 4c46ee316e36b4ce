"""Every refusal of a statement says what is wrong and why (docs/integrity.md §2.1, §2.2), and
every bound holds exactly at its value."""

from __future__ import annotations

from typing import Any

import pytest

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.keys import SigningKey
from convgraph.errors import StatementError
from convgraph.integrity.statement import (
    MAX_HEADS,
    MAX_STATEMENT_BYTES,
    MAX_STORED,
    decode_statement,
    sign_statement,
)

KEY = SigningKey(bytes(range(32)))
HEAD = CID.of_record(b"head")


def links(n: int) -> list[CID]:
    return sorted(CID.of_record(b"%d" % i) for i in range(n))


def unsigned(**change: Any) -> dict[str, Any]:
    m: dict[str, Any] = {"v": 1, "conv": "c", "count": 1, "heads": [HEAD], "key": KEY.public, "time": 5}
    m.update(change)
    return {k: v for k, v in m.items() if v is not None}


def refusal(m: dict[str, Any], sig: Any = bytes(64)) -> StatementError:
    with pytest.raises(StatementError) as caught:
        decode_statement(codec.encode({**m, "sig": sig}))
    return caught.value


@pytest.mark.parametrize(("change", "text"), [
    ({"conv": ""}, "statement `conv` must be 1 to 256 bytes of text"),
    ({"conv": "x" * 257}, "statement `conv` must be 1 to 256 bytes of text"),
    ({"key": bytes(31)}, "statement `key` must be 32 bytes"),
    ({"count": 0}, "statement `heads` is empty exactly when `count` is 0"),
    ({"heads": []}, "statement `heads` is empty exactly when `count` is 0"),
    ({"heads": "not a list"}, "statement `heads` must be a list of 1 to 65536 links"),
    ({"heads": [HEAD, HEAD]}, "statement `heads` must be sorted with no duplicates"),
    ({"heads": [b"bytes"]}, "statement `heads` holds a value that is not a record link"),
    ({"stored": []}, "statement `stored` must be a list of 1 to 131072 links"),
    ({"stored": [HEAD, HEAD]}, "statement `stored` must be sorted with no duplicates"),
    ({"v": 2}, "statement version 2 is not 1"),
    ({"time": -1}, "statement `time` must be an integer in [0, 2^53)"),
    ({"extra": 1}, "are not those of docs/integrity.md §2.1"),
])
def test_each_malformed_field_is_refused_with_its_own_words(change: dict[str, Any], text: str) -> None:
    error = refusal(unsigned(**change))
    assert error.reason == "schema", str(error)
    # the whole message where it is fixed; the key list varies, so that one by its tail
    assert str(error) == text if text.startswith("statement ") else text in str(error), str(error)


def test_the_signature_the_map_and_the_size_each_have_their_refusal() -> None:
    short = refusal(unsigned(), sig=bytes(63))
    assert (short.reason, str(short)) == ("schema", "statement `sig` must be 64 bytes")
    forged = refusal(unsigned())
    assert (forged.reason, str(forged)) == ("signature", "statement signature does not verify under its `key`")
    with pytest.raises(StatementError) as not_a_map:
        decode_statement(codec.encode([1, 2]))
    assert (not_a_map.value.reason, str(not_a_map.value)) == ("schema", "a statement is a map")
    with pytest.raises(StatementError) as too_big:
        decode_statement(bytes(MAX_STATEMENT_BYTES + 1))
    assert too_big.value.reason == "schema"
    assert str(too_big.value) == f"a statement of {MAX_STATEMENT_BYTES + 1} bytes exceeds {MAX_STATEMENT_BYTES}"
    with pytest.raises(StatementError) as at_the_bound:  # exactly the bound: read, then refused as bytes
        decode_statement(bytes(MAX_STATEMENT_BYTES))
    assert at_the_bound.value.reason == "decode"


def test_heads_and_stored_hold_exactly_their_bound() -> None:
    full = sign_statement(KEY, "c", MAX_HEADS, links(MAX_HEADS), 5, stored=links(MAX_STORED))
    again = decode_statement(full.data)
    assert len(again.heads) == MAX_HEADS and len(again.stored) == MAX_STORED
    with pytest.raises(StatementError, match="`heads` must be a list of 1 to 65536 links"):
        sign_statement(KEY, "c", 1, links(MAX_HEADS + 1), 5)
    with pytest.raises(StatementError, match="`stored` must be a list of 1 to 131072 links"):
        sign_statement(KEY, "c", 1, [HEAD], 5, stored=links(MAX_STORED + 1))
