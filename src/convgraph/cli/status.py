"""`convgraph status`: one screen that sums up a replica, as `git status` does a work tree.

It shows the conversations (aliases, id, records, heads, last activity), the records held
back (waiting for their parents, or for the clock: beyond the allowed drift), the findings
not yet shown by `convgraph findings`, the configured witnesses with the last cosignature
of each that the replica holds, and the last sync with each peer (`cli/journal.py`). It marks
no finding seen, and writes only what `convgraph findings` would: the findings of checkpoints
not yet settled, which it checks first as `findings` does. Registered by `register`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click
from rich.table import Column, Table
from rich.text import Text

from convgraph.cli import aliases, journal
from convgraph.cli.rooted import listing
from convgraph.cli.shared import _emit, _errors, _replica, json_option, out
from convgraph.core import safe_text, suggestions
from convgraph.core.keys import actor_text, fingerprint
from convgraph.replica import checkpointing, witness_policy

if TYPE_CHECKING:
    from pathlib import Path

    from convgraph.replica import Replica

_FAR_FUTURE_MS = 1 << 62  # every record held for the clock is due before it


def gather(replica: Replica, home: Path) -> dict[str, Any]:
    """Everything `status` shows, as its `--json` prints it."""
    table = aliases.load(home)
    convs = [{"aliases": list(x.names), "conv": x.conv, "records": x.records,
              "heads": len(replica.heads(x.conv)) if x.records else 0,
              "last_ms": x.last.wall_ms if x.last else None} for x in listing(replica, table)]
    held, _ = replica.store.pending_stats()
    for_clock = len(replica.store.pending_due(_FAR_FUTURE_MS))
    found = replica.findings()
    seen = journal.seen(home)
    unseen = [{"id": str(f.id), "kind": f.kind, "conv": f.conv, "summary": f.summary}
              for f in found if str(f.id) not in seen]
    return {
        "home": str(home), "actor": actor_text(replica.actor), "fingerprint": fingerprint(replica.actor),
        "conversations": convs,
        "quarantine": {"waiting_for_parents": held - for_clock, "held_for_clock": for_clock},
        "findings": {"held": len(found), "not_seen": unseen},
        "witnesses": _witnesses(replica, home),
        "syncs": journal.syncs(home),
    }


def _witnesses(replica: Replica, home: Path) -> dict[str, Any]:
    policy = witness_policy.load(home)
    last: dict[bytes, dict[str, Any]] = {}
    if policy.witnesses:  # reading the cosignatures folds each conversation: only when asked for
        for conv in replica.conversations():
            view = checkpointing.ConvView(replica.store, conv)
            for cid, c in checkpointing.cosignatures_of(view, replica.state(conv).entries.values()):
                if c.key not in last or c.time > last[c.key]["time"]:
                    last[c.key] = {"time": c.time, "checkpoint": str(c.checkpoint), "conv": conv,
                                   "attestation": str(cid)}
    return {"k": policy.k, "witnesses": [{"name": w.name, "key": w.key.hex(), "url": w.url,
                                          "last_cosignature": last.get(w.key)} for w in policy.witnesses]}


def _when_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def render(s: dict[str, Any], out: Any) -> None:
    """Print `gather`'s result as one screen; foreign text goes through `safe_text`."""
    out.print(f"replica  {safe_text.line(s['home'])}  (actor {s['fingerprint']})")
    convs = s["conversations"]
    out.print(Text(f"\nconversations: {len(convs)}", "bold"))
    if convs:
        # all but the aliases whole, in 80 columns: an id is what `--conv` takes
        view = Table("alias", *(Column(h, no_wrap=True) for h in ("conversation", "records", "heads")),
                     Column("last activity", no_wrap=True), box=None, padding=(0, 1, 0, 0))
        for c in convs:
            view.add_row(Text(safe_text.line(", ".join(c["aliases"])) or "-"),
                         Text(safe_text.line(c["conv"])), str(c["records"]), str(c["heads"]),
                         _when_ms(c["last_ms"]) if c["last_ms"] is not None else "-")
        out.print(view)
    else:
        out.print(f"  none yet: `{suggestions.NEW}` starts one")
    q = s["quarantine"]
    out.print(Text("\nheld back", "bold"))
    out.print(f"  {q['waiting_for_parents']} record(s) waiting for their parents, {q['held_for_clock']} "
              "held until the clock reaches them (beyond the allowed drift)")
    f = s["findings"]
    out.print(Text("\nfindings", "bold"))
    out.print(f"  {len(f['not_seen'])} not yet seen, of {f['held']} held"
              + (f"; `{suggestions.FINDINGS}` shows them" if f["not_seen"] else ""))
    for x in f["not_seen"]:
        out.print(Text("  " + safe_text.line(f"{x['kind']}  {x['conv'][:48]}  {x['summary']}"), "red"))
    _render_witnesses(s["witnesses"], out)
    _render_syncs(s["syncs"], out)


def _render_witnesses(w: dict[str, Any], out: Any) -> None:
    out.print(Text(f"\nwitnesses: k = {w['k']} of {len(w['witnesses'])}", "bold"))
    if not w["witnesses"]:
        out.print(f"  none configured (`{suggestions.WITNESS_ADD_ANY}`)")
    for x in w["witnesses"]:
        last = x["last_cosignature"]
        said = (f"last cosigned {_when_ms(last['time'] * 1000)} checkpoint …{last['checkpoint'][-10:]}"
                if last else "no cosignature held")
        out.print("  " + safe_text.line(f"{x['name']}  {fingerprint(bytes.fromhex(x['key']))}  {said}"))


def _render_syncs(syncs: dict[str, dict[str, Any]], out: Any) -> None:
    out.print(Text(f"\npeers: {len(syncs)}", "bold"))
    if not syncs:
        out.print(f"  never synced (`{suggestions.SYNC}`)")
    for peer, x in sorted(syncs.items(), key=lambda kv: -int(kv[1].get("at_ms", 0))):
        state = "ok" if x.get("ok") else "NOT in agreement"
        out.print("  " + safe_text.line(
            f"{peer}  last sync {_when_ms(int(x.get('at_ms', 0)))}  {state}, sent {x.get('sent', 0)}, "
            f"received {x.get('received', 0)}"))


def register(cli: click.Group) -> None:
    """Add `status` to `cli`."""

    @cli.command("status")
    @json_option
    @click.pass_context
    @_errors
    def status(ctx: click.Context, as_json: bool) -> None:
        """One screen that sums up the replica: conversations, held records, findings, witnesses, peers."""
        with _replica(ctx) as r:
            summary = gather(r, ctx.obj["home"])
        if as_json:
            _emit(summary)
        else:
            render(summary, out)
