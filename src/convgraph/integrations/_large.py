"""Large values as artifacts, for the adapters: a value whose packed encoding passes
`THRESHOLD` is stored as a content-addressed, chunked artifact (docs/format.md §17) and the
record holds its tag (`core.tagged`) and names it in `refs`, so sync carries it and `verify`
checks it. Invariant: `loaded(replica, stored(replica, pack(v)))` equals `v`.

`THRESHOLD` is 256 KiB, a quarter of a record's 1 MiB limit: a record holds one message or
item and its residual beside the content, or a checkpoint's several channel values, and
each part staying under a quarter leaves room for the rest; it is also one artifact chunk,
so a value that stays inline is never one an artifact would split.
"""

from __future__ import annotations

from typing import Any, Final

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.tagged import artifact_tag, links, unpack
from convgraph.replica import Replica

THRESHOLD: Final = 256 * 1024


def stored(replica: Replica, packed: Any) -> dict[str, Any]:
    """The tag of the artifact holding `packed`'s DAG-CBOR, stored now."""
    data = codec.encode(packed)
    return artifact_tag(replica.put(data), len(data))


def offloaded_bytes(replica: Replica, data: bytes) -> bytes | dict[str, Any]:
    """`data`, or the tag of the artifact holding it when it passes `THRESHOLD`."""
    return data if len(data) <= THRESHOLD else artifact_tag(replica.put(data), len(data), raw=True)


def loaded(replica: Replica, value: Any) -> Any:
    """The value a packed one stood for, artifacts read (checked) from `replica`."""
    return unpack(value, replica.get_artifact)


def refs_of(payload: Any) -> list[CID]:
    """The artifacts a payload's tags name, once each, for the record's `refs`."""
    return list(dict.fromkeys(links(payload)))


def too_large(payload: Any) -> bool:
    """Whether a payload's encoding passes `THRESHOLD` (it can be encoded at all)."""
    return len(codec.encode(payload)) > THRESHOLD


def note(tag: Any) -> str:
    """The text a slimmed turn shows in place of its content: what `tag` stored, and where."""
    if type(tag) is dict and type(tag.get("cid")) is CID:
        return f"[{tag.get('size')} bytes stored as artifact {tag['cid']}]"
    return "[content stored with the message in this turn's meta]"


def slim(payload: dict[str, Any], text: str, meta: dict[str, Any]) -> dict[str, Any]:
    """A turn payload too large for a record, cut to what the transcript needs to stay well
    formed (its role, its calls by id and name, the call it answers), with `text` for content
    and `meta`, which holds the value whole or its artifact's tag."""
    keep = ("conversation_id", "role", "tool_use_id", "is_error", "provider")
    out = {k: payload[k] for k in keep if k in payload}
    out["content"] = [{"type": "text", "text": text}]
    calls = payload.get("tool_calls")
    if calls:
        out["tool_calls"] = [{"id": c["id"], "name": c["name"], "input": {}} for c in calls]
    out["meta"] = meta
    return out
