"""Stale decisions: a decision whose request's subject (a patch or snapshot) was followed, before
the decision, by a newer patch no one reviewed (docs/authority.md §8.7).

Invariant: the answer for a decision depends only on the records in its causal past (what the
decider had seen), so every replica holding it gives the same answer, in any delivery order.
"""

from __future__ import annotations

from collections import defaultdict

from convgraph.core.cid import CID
from convgraph.projections.authority.judge import order_key
from convgraph.projections.authority.state import AuthorityState
from convgraph.projections.authority.values import Finding


def stale_findings(state: AuthorityState, out: frozenset[CID]) -> list[Finding]:
    """A `stale` finding for each decision (not in `out`, the excluded records) on a request
    whose subject has an unreviewed successor in the decision's causal past."""
    by_base: defaultdict[CID, list[CID]] = defaultdict(list)
    by_path: defaultdict[str, list[CID]] = defaultdict(list)
    for c, (kind, _, base, path) in state.subjects.items():
        if kind == "patch" and c not in out and base is not None:
            by_base[base].append(c)
            if path is not None:
                by_path[path].append(c)
    reviewed: defaultdict[CID, list[CID]] = defaultdict(list)  # subject -> its reviews, any verdict
    for kind, field in (("review_comment", "target"), ("attestation", "subject")):
        for r in state.kept.get(kind, ()):
            if r not in out:
                reviewed[state.records[r].payload[field]].append(r)
    found = []
    for d in state.kept.get("decision", ()):
        if d in out:
            continue
        q = state.records[d].payload["request"]
        s = state.records[q].payload.get("subject")
        if s is None or s in out or s not in state.subjects:
            continue

        def unreviewed(n: CID, d: CID = d) -> bool:
            return not any(state.ancestry.precedes(r, d) for r in reviewed[n])

        newer = tuple(sorted(filter(unreviewed, _successors(state, s, d, by_base, by_path)),
                             key=lambda n: order_key(state, n)))
        if newer:
            detail = f"subject {s} was followed by patch {newer[-1]} before the decision, unreviewed"
            found.append(Finding("stale", d, (q, s, *newer), detail=detail, newer=newer))
    return found


def _successors(state: AuthorityState, s: CID, d: CID, by_base: dict[CID, list[CID]],
                by_path: dict[str, list[CID]]) -> set[CID]:
    """The patches in `d`'s causal past that continue `s` (§8.7), transitively: a patch whose
    `base` is a member's `result` (a snapshot's `blob`), or that names a member's `path` with
    that member in its causal past; never `s` or a record in the causal past of `s`."""
    ancestry = state.ancestry
    members, stack = {s}, [s]
    while stack:
        x = stack.pop()
        _, made, _, path = state.subjects[x]
        candidates = list(by_base.get(made, ())) if made is not None else []
        if path is not None:
            candidates += [n for n in by_path.get(path, ()) if ancestry.precedes(x, n)]
        for n in candidates:
            if n not in members and ancestry.precedes(n, d) and not ancestry.precedes(n, s):
                members.add(n)
                stack.append(n)
    return members - {s}
