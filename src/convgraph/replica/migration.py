"""Migration: a rooted copy of a legacy conversation's transcript, signed by this replica's key.

A legacy conversation has no owner, so nothing is re-rooted in place (docs/authority.md §2).
`migrate(replica, old)` roots a new conversation owned by the replica's key, its genesis naming
`migrated_from: old` and referring to `old`'s heads, and copies each visible turn of `old`'s
main line, in canonical order, as a record of the same turn kind whose payload's
`meta.migrated` is `{cid, actor, hlc}` of the original. Branch turns no merge accepted are not
copied. Running it again continues the same conversation with the turns not copied yet.
Invariant: `old` is only read, and each original turn is copied at most once per migration.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass
from typing import Any

from convgraph.core.cid import CID
from convgraph.core.record import Record
from convgraph.core.rooted import is_rooted
from convgraph.errors import MigrationError, NotFoundError
from convgraph.projections.state import ConvState, Entry
from convgraph.projections.transcript import transcript
from convgraph.projections.turn import TURN_KINDS, Turn, blocks_of
from convgraph.replica.facade import Draft, Replica


@dataclass(frozen=True)
class Migration:
    """What `migrate` did: the rooted conversation, whether it began it now, turns copied now
    and turns an earlier run had copied already."""

    conv: str
    created: bool
    copied: int
    already: int


def migrated_cid(payload: dict[str, Any]) -> CID | None:
    """The original a copied turn names in `meta.migrated.cid`, or None for any other payload."""
    meta = payload.get("meta")
    migrated = meta.get("migrated") if isinstance(meta, dict) else None
    cid = migrated.get("cid") if isinstance(migrated, dict) else None
    return cid if isinstance(cid, CID) else None


def copied_from(state: ConvState, copier: bytes) -> set[CID]:
    """The originals `copier` has copied into the folded conversation `state` already."""
    found = (migrated_cid(e.payload) for e in state.entries.values() if e.actor == copier)
    return {cid for cid in found if cid is not None}


def copy_drafts(old: str, state: ConvState, new: str, done: Container[CID] = ()) -> list[Draft]:
    """The drafts that copy `old`'s visible main-line turns (folded in `state`) into `new`,
    in canonical order, skipping originals in `done`."""
    return [_copy(old, state, new, turn) for turn in transcript(state) if turn.op not in done]


def _copy(old: str, state: ConvState, new: str, turn: Turn) -> Draft:
    entry: Entry = state.entries[turn.op]
    if entry.kind in TURN_KINDS:
        kind, payload = entry.kind, dict(entry.payload)
        if blocks_of(payload.get("content", payload.get("text", ""))) != turn.content:
            payload.pop("text", None)  # superseded: the copy says what the transcript shows
            payload["content"] = list(turn.content)
    else:  # a merge shown as its synthesis: the words main shows, said by the assistant
        kind, payload = "agent_message", {"role": "assistant", "content": list(turn.content)}
    if payload.get("conversation_id") == old:  # `say` names the record conversation: follow it
        payload["conversation_id"] = new
    origin = {"cid": turn.op, "actor": turn.author, "hlc": [turn.hlc.wall_ms, turn.hlc.counter]}
    meta = payload.get("meta")
    payload["meta"] = {**(meta if isinstance(meta, dict) else {}), "migrated": origin}
    return Draft(kind, payload)


def find_migration(replica: Replica, old: str) -> str | None:
    """The rooted conversation this replica's key migrated `old` into, if it did (the earliest
    genesis in canonical order when there are several)."""
    geneses = _own_geneses(replica, replica.conversations())
    found = [g for g in geneses if g.payload.get("migrated_from") == old]
    return min(found, key=lambda g: g.order_key).conv if found else None


def _own_geneses(replica: Replica, convs: Iterable[str]) -> Iterable[Record]:
    for conv in convs:
        if is_rooted(conv):  # an owner's genesis is its seq 1: one index look-up per conversation
            for cid in replica.store.at_seq(replica.actor, conv, 1):
                record = replica.get(cid)
                if record.kind == "genesis":
                    yield record


def migrate(replica: Replica, old: str, *, title: str | None = None) -> Migration:
    """Copy legacy conversation `old` into a rooted one owned by `replica`'s key (module doc).

    Raises `MigrationError` when `old` is rooted already, `NotFoundError` when the replica
    holds nothing of it. Everything it writes lands in one transaction.
    """
    if is_rooted(old):
        raise MigrationError(f"{old} is a rooted conversation already: there is nothing to migrate")
    with replica.store.transaction():
        heads = replica.heads(old)
        if not heads:
            raise NotFoundError(f"this replica holds no conversation {old[:64]!r}")
        state = replica.state(old)
        conv = find_migration(replica, old)
        created = conv is None
        if conv is None:
            conv = replica.create(title, migrated_from=old, refs=heads)
        done = copied_from(replica.state(conv), replica.actor)
        drafts = copy_drafts(old, state, conv, done)
        if drafts:
            replica.write_many(conv, drafts)
    return Migration(conv, created, len(drafts), len(done))
