"""The authority projection as JSON: every list filled, every CID and key as text."""

from __future__ import annotations

import json
from typing import Any

from convgraph.core.keys import actor_text
from convgraph.projections.authority import Authority
from convgraph.projections.authority_json import authority_json
from projections.authority_world import OWNER, T0, A, B, C, World


def story() -> tuple[World, dict[str, Any]]:
    """A member with an expiring grant, a revocation and the turn concurrent with it, a pin,
    an audit and a decision that skipped its review."""
    w = World()
    w.grant(OWNER, A, "read", "write", "review", expires_ms=T0 + 10**12)
    w.grant(OWNER, B, "read", "write")
    w.grant(OWNER, C, "read")
    before = w.heads()
    w.revoke(OWNER, B, "read")
    w.say(B, "with old parents", parents=before)  # concurrent with its revocation
    turn = w.say(A, "the patch")
    w.write(OWNER, "pin", {"target": turn.cid, "note": "approved"})
    w.write(A, "audit", {"target": turn.cid, "result": "pass"})
    ask = w.write(OWNER, "decision_request", {"question": "ship?", "reviews": 1})
    w.write(OWNER, "decision", {"request": ask.cid, "choice": "ship"})
    authority = Authority(w.conv, w.state, w.heads(), T0 + 10**9)
    return w, authority_json(authority)


def test_every_part_of_the_projection_is_there_in_text() -> None:
    w, body = story()
    # JSON all the way down: no bytes, no CID objects left
    assert json.loads(json.dumps(body)) == body
    genesis = str(w.genesis.cid)
    assert body["conversation"] == w.conv and body["genesis"] == genesis
    assert body["owner"] == actor_text(OWNER.public) and body["at_ms"] == T0 + 10**9
    assert body["heads"] == [str(h) for h in w.heads()]
    a = body["members"][actor_text(A.public)]
    assert set(a) == {"read", "write", "review"} and a["write"]["until"] == T0 + 10**12
    assert a["write"]["chain"] == [genesis, str(w.records[1].cid)]
    assert body["members"][actor_text(C.public)] == {"read": {"chain": [genesis, str(w.records[3].cid)],
                                                              "until": None}}
    assert actor_text(B.public) not in body["members"]
    revocation, late = w.records[4], w.records[5]
    assert body["excluded"] == [{"cid": str(late.cid), "reason": "revoked_concurrently",
                                 "causes": [str(revocation.cid)]}]
    turn = w.records[6]
    assert body["pins"] == [{"cid": str(w.records[7].cid), "author": actor_text(OWNER.public),
                             "target": str(turn.cid), "note": "approved"}]
    assert body["audits"] == [{"cid": str(w.records[8].cid), "author": actor_text(A.public),
                               "target": str(turn.cid), "result": "pass", "notes": None}]
    (finding,) = body["findings"]
    assert finding == {"kind": "omitted_review", "cid": str(w.records[10].cid),
                       "evidence": [str(w.records[9].cid)], "missing": [], "detail": "0 of 1 reviews"}
