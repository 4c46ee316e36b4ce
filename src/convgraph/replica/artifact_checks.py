"""Checking the artifact claims of stored records and keeping the false ones as findings
(docs/integrity.md §6.4): the imperative shell around `artifacts.claims` and
`integrity.builders.artifact_claim_finding`.

Invariant: a finding is stored only when its bundle proves from its own bytes, and a claim
whose blocks are not all held is left alone (never a finding, never an error), so records
and blocks may arrive in any order; calling again after blocks arrive finds what is now shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from convgraph.artifacts.claims import CHECKED_KINDS
from convgraph.core.cid import CID
from convgraph.core.record import Record, load_trusted
from convgraph.integrity.builders import artifact_claim_finding
from convgraph.integrity.findings import Finding
from convgraph.replica.checkpointing import finding_row
from convgraph.store.base import Store


def check_records(store: Store, records: Iterable[Record], now_ms: int) -> list[Finding]:
    """The new findings among `records` (its patches and snapshots, read against the blocks
    `store` holds), each stored with `store.add_finding`; one already stored is not new."""
    out: list[Finding] = []
    for record in records:
        if record.kind not in CHECKED_KINDS:
            continue
        finding = artifact_claim_finding(record.data, store.get_block, now_ms)
        if finding is not None and store.add_finding(finding_row(finding)):
            out.append(finding)
    return out


PAGE: Final = 1_000


def check_conversation(store: Store, conv: str, arrived: Iterable[CID], now_ms: int) -> list[Finding]:
    """`check_records` over the records of `conv` that name a block of `arrived`, or a held
    manifest listing one (`Store.records_naming`, `Store.manifests_of`), a page at a time:
    after blocks arrive (a sync, a CAR import), the claims that were pending on them, and
    no other record of the conversation is read."""
    return check_records(store, _records(store, conv, set(arrived)), now_ms)


def _records(store: Store, conv: str, arrived: set[CID]) -> Iterator[Record]:
    around = set(arrived)
    for manifests in store.manifests_of(arrived).values():
        around |= manifests
    namers: set[CID] = set()
    for records in store.records_naming(conv, around).values():
        namers |= records
    ordered = sorted(namers)
    for i in range(0, len(ordered), PAGE):
        page = store.get_many(ordered[i : i + PAGE])  # a compacted record has no bytes to judge
        yield from (load_trusted(page[c], c) for c in ordered[i : i + PAGE] if c in page)
