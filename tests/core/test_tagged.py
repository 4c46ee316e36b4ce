"""Tag maps for what DAG-CBOR cannot hold: any JSON-ish value packs to something the codec
encodes, and unpacks (after a trip through the codec) to the value it was, NaN included."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.tagged import artifact_tag, links, pack, unpack
from convgraph.errors import SchemaError

keys = st.sampled_from(["$cg", "$$cg", "$$$cg", "cg", "v", "cid", "a"]) | st.text(max_size=6)
scalars = (
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**64 - 2, max_value=2**70)
    | st.integers(min_value=-(2**70), max_value=-(2**64) + 2) | st.floats() | st.text(max_size=12)
    | st.binary(max_size=12) | st.binary(min_size=1, max_size=8).map(CID.of_raw)
)
tag_like = st.fixed_dictionaries({"$cg": st.sampled_from(["float", "int", "artifact", "bytes", "x"]),
                                  "v": st.sampled_from(["nan", "inf", "-inf", "12"])})
values = st.recursive(
    scalars | tag_like,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equality, with a NaN equal to a NaN and types kept apart (1 is not 1.0, nor True)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(values)
@example({"$cg": "float", "v": "-inf"})
@example({"$$cg": {"$cg": 1}, "x": [float("nan"), -(2**64) - 1, 2**64]})
def test_pack_encodes_and_unpacks_to_the_value(value: Any) -> None:
    packed = pack(value)
    again = unpack(codec.decode(codec.encode(packed)))
    assert same(again, value)


def test_pinned_shapes() -> None:
    assert pack(float("-inf")) == {"$cg": "float", "v": "-inf"}
    assert pack(float("nan")) == {"$cg": "float", "v": "nan"}
    assert pack(2**64) == {"$cg": "int", "v": "18446744073709551616"}
    assert pack(2**64 - 1) == 2**64 - 1  # DAG-CBOR holds it: no tag
    assert pack({"$cg": "float", "v": "inf"}) == {"$$cg": "float", "v": "inf"}
    assert pack({"$$cg": 1}) == {"$$$cg": 1}


def test_a_value_needing_no_tag_is_not_copied() -> None:
    value = {"a": [1, 2.5, "x", {"b": None}]}
    assert pack(value) is value
    assert unpack(value) is value


def test_artifact_tags_read_through_fetch_and_name_their_links() -> None:
    inner = {"text": "x" * 10, "n": float("inf")}
    data = codec.encode(pack(inner))
    cid, raw_cid = CID.of_raw(data), CID.of_raw(b"raw")
    held = {cid: data, raw_cid: b"raw"}
    packed = {"a": artifact_tag(cid, len(data)), "b": [artifact_tag(raw_cid, 3, raw=True)]}
    assert list(links(packed)) == [cid, raw_cid]
    assert same(unpack(packed, held.__getitem__), {"a": inner, "b": [b"raw"]})
    with pytest.raises(SchemaError, match="no way to read it"):
        unpack(packed)


@pytest.mark.parametrize("bad", [{"$cg": "float", "v": "NaN"}, {"$cg": "int", "v": 3}, {"$cg": "what"},
                                 {"$cg": "float", "v": "inf", "extra": 1}])
def test_an_unknown_tag_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(SchemaError, match="tag map"):
        unpack(bad)
