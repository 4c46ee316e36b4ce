"""The report part of a reply: where each pushed record stands after the receiver ingested it.

Pure: it takes the ingest's report and the quarantine entries the shell read, and returns
the entries `docs/sync.md` (*The report*) defines. Invariant: every record of the pushed
list gets exactly one entry, in the list's order, then one RELEASED entry for each record
of the same conversation that left the quarantine because of them; the whole report holds
at most `limit` entries (releases past it are left out, never pushed records).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence

from convgraph.core.cid import CID
from convgraph.replica.ingest import IngestReport
from convgraph.store.rows import Pending
from convgraph.sync.messages import DEFAULT_LIMITS, Fate, Reported


def fates(
    digests: Sequence[bytes | None], report: IngestReport, waiting: Mapping[bytes, Pending],
    released_elsewhere: Collection[CID], *, max_drift_ms: int, limit: int = DEFAULT_LIMITS.max_records,
) -> tuple[Reported, ...]:
    """The entries for the records pushed in one section (their `digests`, in order; None
    for bytes over the size limit, never hashed) and ingested as `report` says.

    `waiting` maps the digest of each pushed record that waits in the receiver's
    quarantine to its entry; `released_elsewhere` are released records of this
    conversation that were not pushed here.
    """
    # where each record stands, the later lines overriding the earlier: a record released
    # was also waiting; one accepted or rejected was decided whatever else it went through
    stands: dict[bytes, Reported] = {}
    for d, entry in waiting.items():
        stands[d] = (
            # too_far_ahead holds while wall_ms > now + drift: from wall_ms - drift on it does not
            Reported(Fate.HELD, d, retry_ms=max(0, entry.wall_ms - max_drift_ms)) if entry.reason == "clock"
            else Reported(Fate.QUARANTINED, d, parents=tuple(c.digest for c in entry.missing))
        )
    stands |= {c.digest: Reported(Fate.EVICTED, c.digest) for c in report.evicted}
    stands |= {c.digest: Reported(Fate.ACCEPTED, c.digest) for c in report.accepted}
    stands |= {c.digest: Reported(Fate.RELEASED, c.digest) for c in report.released}
    stands |= {r.cid.digest: Reported(Fate.REJECTED, r.cid.digest, rule=r.rule)
               for r in report.rejected if r.cid is not None}
    out: list[Reported] = []
    seen: set[bytes] = set()
    for i, digest in enumerate(digests):
        if digest is None:  # never hashed: refused by its size alone
            out.append(Reported(Fate.REJECTED_AT, index=i, rule="size"))
            continue
        # a second copy in one message, or a record already stored, is a duplicate
        same = Reported(Fate.DUPLICATE, digest)
        out.append(same if digest in seen else stands.get(digest, same))
        seen.add(digest)
    room = max(0, limit - len(out))
    out += [Reported(Fate.RELEASED, c.digest) for c in list(released_elsewhere)[:room]]
    return tuple(out)


def refused(records: Sequence[bytes], rule: str, *, max_bytes: int) -> tuple[Reported, ...]:
    """Every record of `records` rejected for one `rule` (a key that may not write, say)."""
    return tuple(
        Reported(Fate.REJECTED_AT, index=i, rule=rule) if len(data) > max_bytes
        else Reported(Fate.REJECTED, hashlib.sha256(data).digest(), rule=rule)
        for i, data in enumerate(records)
    )
