"""What the viewer's pages show, read from a replica: plain values for the templates.

Every text here that others wrote (names, titles, branch names, content, payloads) has
passed through `safe_text`, so a bidi override or a control character reaches the page as
a visible escape (`\\u202e`), and the template engine escapes the rest for HTML. Reading
only: nothing here writes but what `Replica.findings` settles itself (checkpoints it checks
on the way, as `convgraph findings` does). Invariant: a view of a conversation is built
only after the caller has checked that its reader may read it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from convgraph.core import safe_text
from convgraph.core.cid import CID
from convgraph.core.codec import to_json
from convgraph.core.hlc import Hlc
from convgraph.core.keys import actor_text, fingerprint
from convgraph.core.record import Record, decode_record, load_trusted
from convgraph.core.rooted import is_rooted
from convgraph.errors import ConvgraphError
from convgraph.integrity.findings import reason
from convgraph.projections.authority import Authority
from convgraph.projections.turn import Turn
from convgraph.replica import Replica
from convgraph.viewer import code
from convgraph.viewer.code import CodeView
from convgraph.viewer.layout import Layout, Point, layout
from convgraph.viewer.links import Mention

GRAPH_WINDOW: Final = 300  # the records the graph draws, newest; the transcript shows as many turns
_SUMMARY_FIELDS: Final = ("content", "text", "body", "question", "summary", "name", "title", "note")


def utc(hlc: Hlc) -> str:
    """The stamp as UTC to the millisecond; a counter above 0 follows as `+n`."""
    wall = datetime.fromtimestamp(hlc.wall_ms / 1000, tz=UTC)
    return wall.strftime("%Y-%m-%d %H:%M:%S.") + f"{hlc.wall_ms % 1000:03d}Z" + (
        f"+{hlc.counter}" if hlc.counter else "")


def short(cid: CID) -> str:
    return str(cid)[-10:]


def summary(r: Record, width: int = 72) -> str:
    """One line saying what a record holds, made safe."""
    p = r.payload
    raw: Any = next((p[f] for f in _SUMMARY_FIELDS if f in p), "")
    if r.kind in ("grant", "revocation") and isinstance(p.get("grantee"), bytes):
        raw = f"{fingerprint(p['grantee'])[:8]} {', '.join(map(str, p.get('rights', ())))}"
    if not isinstance(raw, str):
        raw = json.dumps(to_json(raw), separators=(",", ":"))
    text = safe_text.line(" ".join(raw.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class ConvRow:
    """One line of the conversation list."""

    conv: str
    name: str  # the id, made safe
    title: str
    aliases: tuple[str, ...]
    count: int
    heads: int
    last: str
    findings: int
    rooted: bool


@dataclass(frozen=True)
class Badges:
    """What the authority and integrity projections say of one conversation, where they apply:
    `writers` (None: a legacy conversation, whose server configuration decides), the records
    the authority projection excludes, and the findings held."""

    writers: tuple[str, ...] | None = None
    owner: str | None = None
    excluded: Mapping[CID, str] = field(default_factory=dict)
    findings: tuple[tuple[str, str], ...] = ()  # (kind, summary), safe


@dataclass(frozen=True)
class GraphNode:
    cid: CID
    short: str
    kind: str
    branch: str
    author: str
    summary: str
    time: str
    excluded: str | None


@dataclass(frozen=True)
class ConvView:
    """A conversation page: the graph of its newest records, its transcript, its badges."""

    conv: str
    name: str
    title: str
    branch: str | None
    branches: tuple[str, ...]
    count: int
    shown: int
    graph: Layout[CID]
    nodes: Mapping[CID, GraphNode]
    turns: tuple[Turn, ...]
    badges: Badges
    authors: tuple[str, ...]  # fingerprints, in the graph's author order


@dataclass(frozen=True)
class RecordView:
    """A record's detail page; `data` is None when it was compacted (its header is kept)."""

    cid: CID
    conv: str
    conv_name: str
    kind: str
    branch: str | None
    actor: str
    fingerprint: str
    seq: int
    time: str
    hlc: str
    parents: tuple[tuple[CID, bool], ...]  # each with whether this replica holds it
    refs: tuple[tuple[CID, bool], ...]
    verified: str | None  # None: the signature and every intrinsic rule check out; else why not
    payload: str | None
    excluded: str | None
    code: CodeView | None = None  # a snapshot's files, a patch's diff, what a review names
    notes: tuple[str, ...] = ()  # what the authority projection finds of it: stale, omitted review
    named_by: tuple[tuple[Mention, str | None], ...] = ()  # reviews, requests, decisions; why excluded


def conversations(replica: Replica, readable: Iterable[str], aliases: Mapping[str, str]) -> list[ConvRow]:
    """The rows of the conversation list, of `readable` (names aliased as in `aliases`)."""
    by_conv: dict[str, list[str]] = {}
    for alias, conv in aliases.items():
        by_conv.setdefault(conv, []).append(safe_text.line(alias))
    found = Counter(f.conv for f in replica.findings())
    rows = []
    for conv in readable:
        last = replica.store.records(conv, 1)
        first = replica.store.first(conv) if is_rooted(conv) else None
        title = load_trusted(first[1], first[0]).payload.get("title") if first else None
        rows.append(ConvRow(
            conv, safe_text.line(conv), safe_text.line(title) if isinstance(title, str) else "",
            tuple(sorted(by_conv.get(conv, ()))), replica.store.count(conv), len(replica.heads(conv)),
            utc(load_trusted(last[0][1], last[0][0]).hlc) if last else "-", found[conv], is_rooted(conv)))
    return sorted(rows, key=lambda r: r.last, reverse=True)


def badges(replica: Replica, conv: str) -> Badges:
    """The authority and findings badges of `conv`, where the projections provide them."""
    found = tuple((safe_text.line(f.kind), safe_text.line(reason(f.kind, f.summary)))
                  for f in replica.findings(conv))
    authority = _authority(replica, conv)
    if authority is None:
        return Badges(findings=found)
    writers = tuple(sorted(fingerprint(a) for a in authority.members()
                           if authority.who_can(a, "write").allowed))
    owner = authority.owner
    excluded = {e.cid: safe_text.line(e.reason) for e in authority.excluded()}
    return Badges(writers, None if owner is None else fingerprint(owner), excluded, found)


def conversation(replica: Replica, conv: str, branch: str | None = None) -> ConvView:
    """The conversation page of `conv`: the newest `GRAPH_WINDOW` records and turns (of `branch`)."""
    records = replica.records(conv, last=GRAPH_WINDOW)
    marks = badges(replica, conv)
    points = [Point(r.cid, r.parents, r.actor, r.branch, _merges(r)) for r in records]
    drawn = layout(points)
    nodes = {r.cid: GraphNode(r.cid, short(r.cid), safe_text.line(r.kind),
                              safe_text.line(r.branch) if r.branch else "", fingerprint(r.actor)[:8],
                              summary(r), utc(r.hlc), marks.excluded.get(r.cid)) for r in records}
    branches = sorted({r.branch for r in records if r.branch is not None} | ({branch} if branch else set()))
    turns = replica.transcript(conv, branch=branch, last=GRAPH_WINDOW)
    first = replica.store.first(conv) if is_rooted(conv) else None
    title = load_trusted(first[1], first[0]).payload.get("title") if first else None
    return ConvView(conv, safe_text.line(conv), safe_text.line(title) if isinstance(title, str) else "",
                    branch, tuple(branches), replica.store.count(conv), len(records), drawn, nodes,
                    tuple(turns), marks, tuple(fingerprint(a)[:8] for a in drawn.authors))


def record(replica: Replica, cid: CID) -> RecordView | None:
    """The detail of record `cid`, or None when this replica holds no such record."""
    metas = replica.store.metas([cid])
    if cid not in metas:
        return None
    meta = metas[cid]
    data = replica.store.get(cid)
    held = replica.store.metas([*meta.parents])
    verified: str | None = None
    rec: Record | None = None
    if data is not None:
        try:
            rec = decode_record(data, limits=replica.config.limits, expected_cid=cid)
        except ConvgraphError as exc:
            verified = safe_text.line(str(exc))
            rec = load_trusted(data, cid)
    authority = _authority(replica, meta.conv)
    why = {e.cid: safe_text.line(e.reason) for e in authority.excluded()} if authority else {}
    excluded = why.get(cid)
    found = authority.findings() if authority else ()
    notes = tuple(safe_text.line(f.sentence()) for f in found if f.cid == cid)
    refs = tuple(rec.refs) if rec is not None else ()
    held_refs = replica.store.metas(refs)
    return RecordView(
        cid, meta.conv, safe_text.line(meta.conv), safe_text.line(rec.kind) if rec else "?",
        safe_text.line(rec.branch) if rec and rec.branch else None, actor_text(meta.actor),
        fingerprint(meta.actor), meta.seq, utc(meta.hlc), f"{meta.hlc.wall_ms}.{meta.hlc.counter}",
        tuple((p, p in held) for p in meta.parents), tuple((r, r in held_refs) for r in refs),
        verified, safe_text.json_text(to_json(rec.payload)) if rec else None, excluded,
        code.view(replica, rec) if rec is not None and verified is None else None, notes,
        tuple((m, why.get(m.cid)) for m in code.mentions(replica, meta.conv, cid)))


def turn_text(turn: Turn) -> str:
    """A turn's text for the transcript, line breaks kept, every other control made visible."""
    parts = [safe_text.block(turn.text)]
    parts += [f"→ {safe_text.line(c.name)}({safe_text.line(json.dumps(to_json(c.input)))})"
              for c in turn.tool_calls]
    if turn.tool_use_id:
        parts.insert(0, f"[{safe_text.line(turn.tool_use_id)}]")
    return "\n".join(p for p in parts if p)


def _merges(r: Record) -> str | None:
    name = r.payload.get("branch") if r.kind == "merge" else None
    return name if isinstance(name, str) else None


def _authority(replica: Replica, conv: str) -> Authority | None:
    if not is_rooted(conv):
        return None
    try:
        return replica.authority(conv)
    except ConvgraphError:  # held without its genesis: nothing to say yet
        return None
