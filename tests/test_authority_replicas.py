"""One answer everywhere, through real replicas: random grants, revocations, turns, merges and
decisions by four devices, random partial syncs in random orders, then everything everywhere.

Every replica must end with the same authority answers, the same excluded records and
byte-identical transcripts (docs/authority.md; issue 10, "What must hold").
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from convgraph import Replica
from convgraph.core.hlc import ManualClock
from convgraph.core.keys import SigningKey
from convgraph.core.rooted import conv_id
from convgraph.errors import ConvgraphError
from convgraph.projections.transcript import transcript_bytes

T0 = 1_700_000_000_000
CAPS = ("admin", "decide", "merge", "read", "review", "write")


def push(src: Replica, dst: Replica, rng: random.Random, share: float) -> None:
    """Hand `dst` a random part of what `src` holds, shuffled (ingest quarantines the orphans)."""
    datas = [r.data for r in src.iter_records() if rng.random() < share]
    rng.shuffle(datas)
    for lo in range(0, len(datas), 5):
        report = dst.ingest(datas[lo:lo + 5])
        assert not report.rejected, report.rejected  # every replica judges alike


def step(rng: random.Random, me: Replica, conv: str, others: list[Replica]) -> None:
    op = rng.random()
    target = rng.choice(others).actor
    try:
        if op < 0.2:
            rights = sorted({"read", *rng.sample(CAPS, rng.randint(1, 3))})
            me.write(conv, "grant", {"grantee": target, "rights": rights})
        elif op < 0.3:
            me.write(conv, "revocation", {"grantee": target, "rights": sorted(rng.sample(CAPS, 1))})
        elif op < 0.4:
            me.write(conv, "decision_request", {"question": "ship?"})
        elif op < 0.5:
            asks = [r for r in me.records(conv) if r.kind == "decision_request"]
            if asks:
                me.write(conv, "decision", {"request": rng.choice(asks).cid, "choice": "yes"})
        elif op < 0.55 and me.heads(conv):
            me.branch(conv, "exp", me.heads(conv)[0])
        elif op < 0.6:
            work = [r.cid for r in me.records(conv) if r.branch == "exp"]
            me.merge(conv, "exp", accepted=work[-1:], summary="merged")
        elif op < 0.7:
            me.say(conv, "assistant", "on the branch", branch="exp")
        else:
            me.say(conv, "user", f"turn {rng.random():.3f}")
    except ConvgraphError:
        pass  # refused locally before signing: not allowed, or no such branch yet


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_every_replica_ends_with_the_same_authority_and_transcript(seed: int) -> None:
    rng = random.Random(seed)
    clock = ManualClock(T0)
    devices = [Replica.in_memory(SigningKey(bytes([seed % 200 + i + 1]) * 32), clock=clock) for i in range(4)]
    owner = devices[0]
    nonce = rng.randbytes(16)
    conv = conv_id(owner.actor, nonce)
    owner.write(conv, "genesis", {"nonce": nonce})
    for d in devices[1:]:
        rights = sorted({"read", "write", *rng.sample(CAPS, rng.randint(0, 3))})
        owner.write(conv, "grant", {"grantee": d.actor, "rights": rights})
    for d in devices[1:]:
        push(owner, d, rng, 1.0)
    for _ in range(60):
        clock.advance(rng.randint(1, 50))
        if rng.random() < 0.25:
            a, b = rng.sample(devices, 2)
            push(a, b, rng, rng.choice((0.3, 0.7, 1.0)))
        else:
            me = rng.choice(devices)
            step(rng, me, conv, [d for d in devices if d is not me])
    for _ in range(2):  # everything everywhere, in random orders
        for a in devices:
            for b in devices:
                if a is not b:
                    push(a, b, rng, 1.0)
    held = {frozenset(r.cid for r in d.iter_records()) for d in devices}
    assert len(held) == 1
    answers = set()
    for d in devices:
        authority = d.authority(conv, at_ms=T0 + 10**9)
        members = {a: tuple((x.capability, x.chain) for x in v) for a, v in authority.members().items()}
        answers.add((authority.excluded(), authority.findings(), tuple(sorted(members.items())),
                     transcript_bytes(d.transcript(conv)), transcript_bytes(d.transcript(conv, branch="exp"))))
    assert len(answers) == 1
