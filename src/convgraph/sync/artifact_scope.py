"""Which artifact blocks a conversation's sync may move: its scope, and the checks on arrival.

A conversation's **scope** is every CID its records name as artifacts (`Store.artifact_refs`)
plus the chunks of every manifest among them that the replica holds (the links `put_blocks`
kept when the manifest was stored, so no manifest is decoded to answer). Sync serves a block
only when it is in the scope of the section's conversation, and stores a block a peer sent
only when it hashes to its CID, is in that scope (manifests that came with the same batch
count), and, under a dag-cbor CID, is a §17 manifest. Invariant: a block never enters or
leaves through sync under a conversation whose records do not name it, so a key that may
not read a conversation cannot reach its artifacts by guessing a CID.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from convgraph.artifacts.blocks import checked, decode_manifest, verify_block
from convgraph.core.cid import CID, DAG_CBOR
from convgraph.errors import ArtifactScopeError, ConvgraphError
from convgraph.replica.artifacts import spans
from convgraph.store.base import Store
from convgraph.sync.artifact_exchange import BlockOutcome


def _union(groups: Iterable[set[CID]]) -> set[CID]:
    out: set[CID] = set()
    for group in groups:
        out |= group
    return out


def in_scope(store: Store, conv: str, cids: Iterable[CID]) -> set[CID]:
    """The CIDs among `cids` this replica may serve under `conv`: admitted for it (their bytes
    came here for `conv`, or this replica wrote a record of `conv` naming them). Naming a CID
    in a record is not enough: a key could name a block it never had, in a conversation of its
    own, and fetch another conversation's bytes by their hash."""
    return store.admitted(conv, cids)


def unadmitted(store: Store, conv: str) -> list[CID]:
    """The blocks `conv`'s artifacts span (`replica_artifacts.spans`) that are not admitted for
    it, held or not: what a peer is asked to send for `conv`. In binary CID order."""
    blocks = spans(store, conv)
    return sorted(blocks - store.admitted(conv, blocks))


def named_scope(store: Store, conv: str, cids: Iterable[CID]) -> set[CID]:
    """The CIDs among `cids` that lie in `conv`'s artifact scope on this replica (named by its
    records, or a chunk of a held manifest they name): a few look-ups of the asked CIDs and
    their manifests, whatever else `conv` names."""
    asked = set(cids)
    found = set(store.records_naming(conv, asked))
    if rest := asked - found:  # only then are manifests looked up
        owners = store.manifests_of(rest)
        named = set(store.records_naming(conv, _union(owners.values()))) if owners else set()
        found |= {c for c, manifests in owners.items() if manifests & named}
    return found


def serve(store: Store, conv: str, cids: Sequence[CID]) -> Iterator[tuple[CID, bytes]]:
    """The blocks among `cids` held here and in `conv`'s scope: manifests first, then the
    rest, each group in the order asked, each read only when the caller takes it (a reply
    stops at its budget, so a want of 100 MB of chunks never holds them all). Blocks are
    checked: a rotten one is not served."""
    allowed = in_scope(store, conv, cids)
    ordered = [c for c in cids if c in allowed and c.codec == DAG_CBOR] + [
        c for c in cids if c in allowed and c.codec != DAG_CBOR]
    for cid in dict.fromkeys(ordered):
        # a rotten block is not served: better missing at the peer than wrong there
        if (data := checked(cid, store.get_block(cid))) is not None:
            yield cid, data


def take(store: Store, conv: str, blocks: Sequence[tuple[CID, bytes]]) -> BlockOutcome:
    """Check and store blocks a peer sent for `conv`; each bad one is refused on its own."""
    cids = {c for c, _ in blocks}
    # what `conv` names among these blocks and the held manifests listing them: all
    # `take_named` asks about, read without reading the rest of what `conv` names
    around = cids | _union(store.manifests_of(cids).values())
    outcome = take_named(store, set(store.records_naming(conv, around)), blocks, where=f"of {conv!r}")
    store.admit_blocks(conv, outcome.accepted)  # the peer had these bytes, for `conv`
    return outcome


def take_named(store: Store, named: set[CID], blocks: Sequence[tuple[CID, bytes]], *,
               where: str = "") -> BlockOutcome:
    """Store the blocks that hash to their CID and are in the scope `named` spans (named, or a
    chunk of a named manifest held or in this batch); refuse each other one on its own.

    Manifests go first, so the chunks they name (in the same batch) are in scope after them.
    Held manifests are found by their links (`Store.manifests_of`), one look-up per batch.
    """
    outcome = BlockOutcome()
    ordered = sorted(blocks, key=lambda b: b[0].codec != DAG_CBOR)
    batch: set[CID] = set()  # chunks of the named manifests of this batch
    with store.transaction():
        held = store.has_blocks(c for c, _ in blocks)
        owners = store.manifests_of({c for c, _ in blocks} - named)
        for cid, data in ordered:
            try:
                verify_block(cid, data)
                # a record's bytes are no artifact block: a dag-cbor block must be a manifest
                chunks = decode_manifest(data).chunks if cid.codec == DAG_CBOR else ()
                if cid not in named and cid not in batch and not owners.get(cid, set()) & named:
                    why = f"no record {where} names this block" if where else "no record names this block"
                    raise ArtifactScopeError(why, cid=str(cid))
            except ConvgraphError as exc:
                outcome.refused.append((cid, exc.rule, str(exc)))
                continue
            if cid in named:
                batch.update(chunks)
            outcome.accepted.append(cid)
            if cid in held:
                outcome.duplicate += 1
                continue
            store.put_blocks([(cid, data)])
            held.add(cid)
            outcome.stored.append(cid)
    return outcome


PAGE = 500  # named CIDs whose manifest links `export_blocks` reads in one look-up


def export_blocks(store: Store, conv: str, seen: set[CID]) -> Iterator[tuple[CID, bytes]]:
    """The artifact blocks `conv`'s records name that are held here, each manifest followed by
    its held chunks, in CID order, leaving out those in `seen` (which it extends)."""
    named = sorted(store.artifact_refs(conv))
    for i in range(0, len(named), PAGE):
        page = named[i : i + PAGE]
        links = store.chunks_of(c for c in page if c.codec == DAG_CBOR)
        for cid in page:
            data = None if cid in seen else store.get_block(cid)
            if data is None:
                continue
            seen.add(cid)
            yield cid, data
            for chunk in sorted(links.get(cid, set()) - seen):
                block = store.get_block(chunk)
                if block is not None:
                    seen.add(chunk)
                    yield chunk, block


__all__ = ["BlockOutcome", "export_blocks", "in_scope", "named_scope", "serve", "take",
           "take_named", "unadmitted"]
