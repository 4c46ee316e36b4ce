"""The authority projection as JSON: what `GET /v1/conversations/{conv}/authority` answers.

Pure: it reads an `Authority` (docs/authority.md §7) and writes every CID and actor key in
its text form. Invariant: every capability listed cites the chain of CIDs that gives it, from
the genesis to the last grant, and every exclusion the CIDs that cause it.
"""

from __future__ import annotations

from typing import Any

from convgraph.core.keys import actor_text
from convgraph.projections.authority import Authority


def authority_json(authority: Authority) -> dict[str, Any]:
    """`{conversation, owner, genesis, heads, at_ms, members, pins, audits, excluded, findings}`.

    `members` maps each actor holding `read` to its capabilities, each `{chain, until}`
    (`until`: the wall-clock ms it expires at, or null).
    """
    owner, genesis = authority.owner, authority.genesis
    return {
        "conversation": authority.conv,
        "owner": None if owner is None else actor_text(owner),
        "genesis": None if genesis is None else str(genesis),
        "heads": [str(h) for h in authority.heads],
        "at_ms": authority.at_ms,
        "members": {
            actor_text(actor): {a.capability: {"chain": [str(c) for c in a.chain], "until": a.until}
                                for a in answers}
            for actor, answers in authority.members().items()
        },
        "pins": [
            {"cid": str(r.cid), "author": actor_text(r.actor), "target": str(r.payload["target"]),
             "note": r.payload.get("note")}
            for r in authority.pins()
        ],
        "audits": [
            {"cid": str(r.cid), "author": actor_text(r.actor), "target": str(r.payload["target"]),
             "result": r.payload["result"], "notes": r.payload.get("notes")}
            for r in authority.audits()
        ],
        "excluded": [
            {"cid": str(e.cid), "reason": e.reason, "causes": [str(c) for c in e.causes]}
            for e in authority.excluded()
        ],
        "findings": [
            {"kind": f.kind, "cid": str(f.cid), "evidence": [str(c) for c in f.evidence],
             "missing": [actor_text(a) for a in f.missing], "detail": f.detail,
             **({"newer": [str(c) for c in f.newer]} if f.kind == "stale" else {})}
            for f in authority.findings()
        ],
    }
