"""What a `false_patch` or `false_snapshot` bundle proves (docs/integrity.md §6.4).

Pure: the bundle's record arrives decoded and verified (`evidence.verify_bundle` step 2) and its
blocks as bytes; each block is found by the sha2-256 of its bytes, so the verifier computes
every CID itself. Invariant: a claim is proven only when `artifacts.claims.check`, the check a
replica runs over its store, gives the claimed `FALSE` answer over the bundle's blocks alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from convgraph.artifacts.claims import PATCH_CHECKS, SNAPSHOT_CHECKS, ClaimStatus, check_claim
from convgraph.core.cid import CID
from convgraph.core.keys import fingerprint
from convgraph.core.record import Record
from convgraph.integrity.findings import ARTIFACT_KINDS, FALSE_PATCH, FALSE_SNAPSHOT

CHECKS_OF: dict[str, tuple[str, ...]] = {FALSE_PATCH: PATCH_CHECKS, FALSE_SNAPSHOT: SNAPSHOT_CHECKS}
"""The `check` values a claim of each kind may name."""


class Unproven(Exception):  # noqa: N818 - a verdict, not a failure: the bundle says too little
    """The claim is not proven by the bundle, and why."""


def prove(kind: str, claim: Mapping[str, Any], records: Mapping[CID, Record], blocks: Sequence[bytes]) -> str:
    """The reason the claim of an artifact `kind` holds over the bundle; `Unproven` when it does not."""
    by_digest: dict[bytes, bytes] = {}
    for i, block in enumerate(blocks):
        digest = hashlib.sha256(block).digest()
        if digest in by_digest:
            raise Unproven(f"block {i} is in the bundle twice")
        by_digest[digest] = block
    cid: CID = claim["record"]
    record = records.get(cid)
    if record is None:
        raise Unproven(f"the claim names {cid}, which is not among the bundle's records")
    if record.kind != ARTIFACT_KINDS[kind]:
        raise Unproven(f"a `{kind}` claim is about a `{ARTIFACT_KINDS[kind]}`, not a `{record.kind}`")
    answer = check_claim(record, lambda c: by_digest.get(c.digest))
    if answer is None or answer.status is not ClaimStatus.FALSE:
        status = "no answer" if answer is None else answer.status.value
        raise Unproven(f"over the bundle's blocks the record's claim is {status}: "
                       f"{answer.reason if answer else ''}")
    if answer.check != claim["check"]:
        raise Unproven(f"the claim names the check {claim['check']!r}, but {answer.check!r} fails first")
    return f"actor {fingerprint(record.actor)} signed {cid}, whose claim is false: {answer.reason}"
