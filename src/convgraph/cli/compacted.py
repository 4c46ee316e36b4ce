"""`convgraph show` of a record compacted away: its header, and where its content went.

Compaction (`checkpoint --compact`) drops a record's bytes and keeps its header; what the
record contributed lives on in the snapshot of the checkpoint it was compacted behind.
This says so once, naming the checkpoint and the command that checks it, instead of an
error that repeats the CID.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from convgraph.cli.shared import _emit, out
from convgraph.core import safe_text, suggestions
from convgraph.core.cid import CID
from convgraph.core.keys import actor_text, fingerprint
from convgraph.errors import NotFoundError

if TYPE_CHECKING:  # `show` has opened the replica already
    from convgraph.replica import Replica


def describe(replica: Replica, cid: CID) -> dict[str, Any]:
    """What the replica holds of the compacted record `cid`: its header and its checkpoint."""
    meta = replica.store.metas([cid]).get(cid)
    if meta is None:
        raise NotFoundError(f"no record {cid}")
    snapshot = replica.store.snapshot(meta.conv)
    return {
        "cid": str(cid), "conv": meta.conv, "actor": actor_text(meta.actor),
        "fingerprint": fingerprint(meta.actor), "seq": meta.seq, "hlc": [meta.hlc.wall_ms, meta.hlc.counter],
        "parents": [str(p) for p in meta.parents],
        "compacted": True, "checkpoint": None if snapshot is None else str(snapshot[0]),
    }


def show(replica: Replica, cid: CID, *, as_json: bool) -> None:
    """Print the compacted record's header and where its content went."""

    body = describe(replica, cid)
    if as_json:
        _emit(body)
        return
    for key in ("cid", "conv", "actor", "fingerprint", "seq", "hlc", "parents"):
        value = body[key]
        if key == "parents":
            value = ", ".join(value) or "-"
        out.print(Text.assemble((f"{key:11}", "bold"), " ", safe_text.line(str(value))))
    where = body["checkpoint"]
    status = suggestions.CHECKPOINT_STATUS(cid=where)
    told = (f"compacted behind checkpoint {where}: only this header is held here, and what the record "
            f"contributed is folded into that checkpoint's snapshot (`{status}`)"
            if where else "compacted: only this header is held here, and no checkpoint snapshot of its "
            "conversation is (it came from a peer that had compacted it)")
    out.print(Text.assemble(("payload", "bold"), "     ", told))
