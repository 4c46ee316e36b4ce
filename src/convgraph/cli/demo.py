"""The end-to-end demo behind `convgraph demo` (and `scripts/demo`).

Two devices of one user hold SQLite replicas of one rooted conversation: the laptop's key
owns it (its id is derived from that key) and grants the phone's key read and write (later a
tablet is granted and revoked, and a stranger is refused). They
write at the same moment without seeing each other, exchange their records, join the two
lines with the next write, refuse a tampered copy, verify everything and agree on one
history; then both fold the same transcript and resume it, valid, for each provider.

The replicas live in a temporary directory, deleted when the demo ends (it says so), unless
`--dir DIR` keeps them; each kept replica has the alias `ALIAS` for the conversation, so
`convgraph --home DIR/laptop log --conv trip` reads it again.
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from convgraph.cli import aliases, graph_view
from convgraph.cli.shared import _label
from convgraph.core import safe_text, suggestions
from convgraph.core.hlc import Hlc
from convgraph.core.keys import fingerprint
from convgraph.core.record import sign_record
from convgraph.errors import AuthorityError
from convgraph.projections import validity
from convgraph.projections.resume import PROVIDERS
from convgraph.projections.transcript import transcript_cid
from convgraph.replica import Replica
from convgraph.sync.local import sync_replicas

TITLE = "trip planning"
ALIAS = "trip"  # what each replica kept with --dir calls the conversation


def _sync(out: Console, laptop: Replica, phone: Replica, conv_id: str, other: str = "phone") -> None:
    """Reconcile the conversation both ways with the sync protocol (in process)."""
    report = sync_replicas(laptop, phone, [conv_id])
    conv = report.convs[conv_id]
    out.print(
        f"  sync: {report.round_trips} round trip(s), {report.bytes_sent + report.bytes_received} bytes; "
        f"laptop received {conv.accepted_here}, {other} received {conv.accepted_there}; "
        f"{'in sync' if report.converged else 'STILL DIFFERENT'}"
    )


def _digest(replica: Replica, conv: str) -> str:
    order = b"".join(bytes(r.cid) for r in replica.records(conv))
    return hashlib.sha256(order).hexdigest()[:16]


def run(out: Console, where: Path | None) -> dict[str, Any]:
    """Run the demo, printing each step; raises if the replicas disagree. Returns what the two
    replicas agreed on (for `demo --json`)."""
    with tempfile.TemporaryDirectory(prefix="convgraph-demo-") as tmp:
        base = where or Path(tmp)
        laptop, phone = Replica.open(base / "laptop"), Replica.open(base / "phone")
        with laptop, phone:
            kept = "kept" if where else \
                "a temporary directory, deleted when the demo ends; --dir DIR keeps them"
            out.print(f"[bold]Two replicas[/bold] in {escape(str(base))} ({kept})", markup=True)
            out.print(f"  laptop actor {fingerprint(laptop.actor)}, phone actor {fingerprint(phone.actor)}")
            conv = laptop.create(TITLE)
            out.print(f'[bold]The laptop starts a conversation[/bold], "{TITLE}": {conv}', markup=True)
            out.print("  its id is derived from the laptop's key, so the laptop owns it")
            laptop.write(conv, "grant", {"grantee": phone.actor, "rights": ["read", "write"]})
            out.print(f"  and grants the phone ({fingerprint(phone.actor)[:8]}) read and write")
            laptop.write(conv, "user_message", {"role": "user", "content": "Plan three days in Lisbon."})
            _sync(out, laptop, phone, conv)

            out.print("[bold]Both write at the same moment[/bold], neither sees the other:", markup=True)
            barrier = threading.Barrier(2)

            def on_laptop() -> None:
                barrier.wait()
                laptop.write(conv, "agent_message", {
                    "role": "assistant", "content": "Day 1: Alfama and the castle.",
                    "tool_calls": [{"id": "call_1", "name": "weather", "input": {"city": "Lisbon"}}],
                })
                laptop.write(conv, "tool_result", {"tool_use_id": "call_1", "content": "sunny, 24 C"})

            def on_phone() -> None:
                barrier.wait()
                phone.write(conv, "user_message", {"role": "user", "content": "Budget is 800 EUR."})

            threads = [threading.Thread(target=on_laptop), threading.Thread(target=on_phone)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            out.print(f"  laptop heads {len(laptop.heads(conv))}, phone heads {len(phone.heads(conv))}")
            _sync(out, laptop, phone, conv)
            out.print(f"  after sync: {len(laptop.heads(conv))} heads on each side (a fork)")

            joined = laptop.write(conv, "agent_message", {
                "role": "assistant", "content": "Noted the 800 EUR budget; here is the revised plan.",
            })
            out.print(f"  the next write names {len(joined.parents)} parents, joining the lines")
            _sync(out, laptop, phone, conv)

            _tampered(out, phone, joined.data)

            _authority(out, base, laptop, phone, conv)

            out.print("[bold]Verify[/bold] every stored record from its bytes:", markup=True)
            for name, replica in (("laptop", laptop), ("phone", phone)):
                v = replica.verify()
                out.print(f"  {name:7} {v.checked} records, {len(v.failures)} failures")
                if not v.ok:
                    raise SystemExit(1)

            out.print("[bold]The DAG[/bold] (newest first):", markup=True)
            for line in graph_view.render(laptop.records(conv), _label):
                out.print("  " + line)
            same = laptop.heads(conv) == phone.heads(conv) and _digest(laptop, conv) == _digest(phone, conv)
            out.print(
                f"[bold]Same history on both replicas:[/bold] {'yes' if same else 'NO'} "
                f"(order digest {_digest(laptop, conv)})", markup=True,
            )
            if not same:
                raise SystemExit(1)
            _resume(out, laptop, phone, conv)
            _coda(out, where, conv)
            return {"dir": str(where) if where else None, "conv": conv, "records": len(laptop.records(conv)),
                    "heads": [str(h) for h in laptop.heads(conv)], "order_digest": _digest(laptop, conv),
                    "same": same, "turns": len(laptop.transcript(conv))}


def _alias(base: Path, conv: str) -> None:
    """Name `conv` `ALIAS` in every replica the demo makes under `base` (each will hold it)."""
    for name in ("laptop", "phone", "tablet", "stranger"):
        with aliases.editing(base / name) as table:
            table[ALIAS] = conv


def _coda(out: Console, where: Path | None, conv: str) -> None:
    """How to look at the replicas again: where they are kept (aliasing `conv` there), or how
    to keep them."""
    if where is None:
        out.print("[bold]The replicas are deleted now[/bold] (a temporary directory); to keep them and "
                  f"read them again: `{suggestions.DEMO_KEEP}`, then "
                  f"`{suggestions.LOG_HOME(home='DIR/laptop', conv=ALIAS)}`", markup=True)
        return
    _alias(where, conv)
    out.print(f"[bold]The replicas are kept[/bold] in {escape(str(where))} (laptop, phone, tablet, "
              f"stranger), the conversation aliased {ALIAS!r} in each: "
              f"`{escape(suggestions.LOG_HOME(home=where / 'laptop', conv=ALIAS))}`", markup=True)


def _tampered(out: Console, phone: Replica, data: bytes) -> None:
    out.print("[bold]A tampered copy is refused[/bold]:", markup=True)
    forged = bytearray(data)
    at = forged.find(b"800")
    forged[at : at + 3] = b"900"
    report = phone.ingest([bytes(forged)])
    out.print(f"  rejected: {report.rejected[0].rule}: {report.rejected[0].error.message}")


def _authority(out: Console, base: Path, laptop: Replica, phone: Replica, conv: str) -> None:
    """A third device is granted and then revoked; a stranger is refused; the chains are cited."""
    out.print("[bold]Who may write[/bold]: a third device, then a stranger:", markup=True)
    with Replica.open(base / "tablet") as tablet, Replica.open(base / "stranger") as stranger:
        laptop.write(conv, "grant", {"grantee": tablet.actor, "rights": ["read", "write"]})
        _sync(out, laptop, tablet, conv, "tablet")
        out.print(f"  the laptop granted the tablet ({fingerprint(tablet.actor)[:8]}) read and write")
        laptop.write(conv, "revocation", {"grantee": tablet.actor, "rights": ["read"], "reason": "lost"})
        tablet.write(conv, "user_message", {"role": "user", "content": "Cancel the trip."})
        out.print("  the tablet is lost: the laptop revokes it while the tablet, unaware, writes")
        _sync(out, laptop, tablet, conv, "tablet")
        excluded = laptop.authority(conv).excluded()
        out.print(f"  after sync: the tablet's write is kept but excluded ({excluded[0].reason}), "
                  f"so it is in no transcript")
        stranger.ingest([r.data for r in laptop.records(conv)])
        try:
            stranger.write(conv, "user_message", {"role": "user", "content": "Book a yacht."})
        except AuthorityError as exc:
            out.print(f"  a stranger's replica refuses to sign a turn: it lacks `{exc.capability}`")
        mine = sign_record(stranger.key, conv=conv, seq=1, hlc=Hlc(laptop.now().wall_ms + 1, 0),
                           parents=laptop.heads(conv), kind="user_message",
                           payload={"role": "user", "content": "Book a yacht."})
        report = laptop.ingest([mine.data])
        out.print(f"  signed by hand and pushed anyway, it is rejected: {report.rejected[0].rule}")
    _sync(out, laptop, phone, conv)
    answer = phone.authority(conv).who_can(phone.actor, "write")
    out.print(f"  the phone may write, by the chain {' -> '.join(str(c)[-8:] for c in answer.chain)} "
              "(genesis, then the laptop's grant)")


def _resume(out: Console, laptop: Replica, phone: Replica, conv: str) -> None:
    """The transcript both replicas fold, and the provider requests it resumes to."""
    mine, theirs = laptop.transcript(conv), phone.transcript(conv)
    same = transcript_cid(mine) == transcript_cid(theirs)
    out.print(f"[bold]The transcript[/bold] ({len(mine)} turns, same on both: {'yes' if same else 'NO'}):",
              markup=True)
    for t in mine:
        calls = "".join(f" -> {c.name}({c.input})" for c in t.tool_calls)
        out.print(f"  {t.role.value:9} {safe_text.line(t.text + calls)}")
    out.print("[bold]Resumed for each provider[/bold] (repaired, then checked against its rules):",
              markup=True)
    for provider in PROVIDERS:
        wire = laptop.resume(conv, provider)
        faults = validity.check(provider, wire)
        out.print(f"  {provider:17} {len(wire)} entries, {len(faults)} violations")
        if faults or not same:
            raise SystemExit(1)
