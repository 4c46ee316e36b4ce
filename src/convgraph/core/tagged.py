"""Values DAG-CBOR cannot hold, as tag maps it can (docs/format.md §2.8). Pure.

`pack` turns a JSON-ish value (maps with text keys, lists, text, bytes, ints, floats, bools,
None, CIDs) into one DAG-CBOR encodes: a NaN or infinite float becomes
`{"$cg": "float", "v": "nan" | "inf" | "-inf"}`, an integer outside DAG-CBOR's
`[-2**64, 2**64 - 1]` becomes `{"$cg": "int", "v": "<decimal>"}`, and a map key made of one
or more `$` then `cg` gets one more `$` (so no literal map ever has the key `"$cg"`). `unpack`
undoes it, and also reads the artifact tags adapters write for large values:
`{"$cg": "artifact", "cid": <link>, "size": n}` (the artifact's bytes are the DAG-CBOR of the
packed value) and `{"$cg": "bytes", "cid": <link>, "size": n}` (its bytes are the value).
Invariant: `unpack(pack(v)) == v` (NaN for NaN) and `codec.encode(pack(v))` never fails for
such a `v`; a value needing no tag is returned as it is, not copied.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, Final

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.errors import SchemaError

TAG: Final = "$cg"
_INT_MIN: Final = -(1 << 64)
_INT_MAX: Final = (1 << 64) - 1
_FLOATS: Final = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
Fetch = Callable[[CID], bytes]


def pack(value: Any) -> Any:
    """`value` with every non-finite float and out-of-range integer tagged and `$…cg` keys escaped."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else {TAG: "float", "v": _float_name(value)}
    if kind is int:
        return value if _INT_MIN <= value <= _INT_MAX else {TAG: "int", "v": str(value)}
    if kind is list or kind is tuple:
        items = [pack(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if kind is dict:
        out = {_escaped(k): pack(v) for k, v in value.items()}
        same = all(k in value and value[k] is v for k, v in out.items())
        return value if same else out
    return value


def unpack(value: Any, fetch: Fetch | None = None) -> Any:
    """The value `pack` was given; artifact tags are read through `fetch` (`SchemaError`
    without one, or for a tag of no known shape)."""
    kind = type(value)
    if kind is list:
        items = [unpack(v, fetch) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if kind is not dict:
        return value
    if TAG in value:
        return _untagged(value, fetch)
    out = {_unescaped(k): unpack(v, fetch) for k, v in value.items()}
    same = all(k in value and value[k] is v for k, v in out.items())
    return value if same else out


def links(value: Any) -> Iterator[CID]:
    """The CIDs of the artifact tags in a packed value, outermost first."""
    if type(value) is list:
        for v in value:
            yield from links(v)
    elif type(value) is dict:
        if value.get(TAG) in ("artifact", "bytes") and type(value.get("cid")) is CID:
            yield value["cid"]
            return
        for v in value.values():
            yield from links(v)


def artifact_tag(cid: CID, size: int, *, raw: bool = False) -> dict[str, Any]:
    """The tag standing for a value stored as artifact `cid` of `size` bytes (`raw`: its
    bytes are the value, else the DAG-CBOR of the packed value)."""
    return {TAG: "bytes" if raw else "artifact", "cid": cid, "size": size}


def _untagged(tag: dict[str, Any], fetch: Fetch | None) -> Any:
    kind, v = tag.get(TAG), tag.get("v")
    if kind == "float" and v in _FLOATS and len(tag) == 2:
        return _FLOATS[v]
    if kind == "int" and type(v) is str and len(tag) == 2:
        return int(v)
    if kind in ("artifact", "bytes") and type(tag.get("cid")) is CID:
        if fetch is None:
            raise SchemaError(f"a value stored as artifact {tag['cid']} and no way to read it")
        data = fetch(tag["cid"])
        return data if kind == "bytes" else unpack(codec.decode(data), fetch)
    raise SchemaError(f"a {TAG!r} tag map of no known shape: {sorted(tag)!r}, {TAG}={kind!r}")


def _float_name(value: float) -> str:
    return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"


def _dollars_cg(key: Any) -> bool:
    """Whether `key` is one or more `$` then `cg`: the keys `pack` escapes."""
    return type(key) is str and len(key) > 2 and key.endswith("cg") and not key[:-2].strip("$")


def _escaped(key: Any) -> Any:
    return "$" + key if _dollars_cg(key) else key


def _unescaped(key: Any) -> Any:
    return key[1:] if _dollars_cg(key) and len(key) > 3 else key
