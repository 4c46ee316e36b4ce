"""Split views (docs/integrity.md §5): pairwise checks of statements by one key, and which
statements a replica gossips on, as pure functions of values.

Invariant: a `server_equivocation` claim is only made for two statements by one key about
one conversation that `inconsistent` decided under the lookup; its earlier statement is the
one with the smaller (time, CID).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Final

from convgraph.integrity.consistency import Lookup, Verdict, inconsistent
from convgraph.integrity.findings import SERVER_EQUIVOCATION
from convgraph.integrity.remembered import Claim, Undecided
from convgraph.integrity.statement import Statement

MAX_GOSSIP: Final = 16  # statements per section (docs/sync.md, part `gossip`)


def _ordered(a: Statement, b: Statement) -> tuple[Statement, Statement]:
    return (a, b) if (a.time_ms, bytes(a.cid)) <= (b.time_ms, bytes(b.cid)) else (b, a)


def check_pairs(
    fresh: Iterable[Statement], held: Iterable[Statement], lookup: Lookup
) -> tuple[list[Claim], list[Undecided]]:
    """Each fresh statement against every other held (or fresh) one by its key about its
    conversation: the inconsistent pairs, and the pairs not decided yet."""
    fresh, held = list(dict.fromkeys(fresh)), list(dict.fromkeys(held))
    claims: list[Claim] = []
    undecided: list[Undecided] = []
    seen: set[tuple[bytes, bytes]] = set()
    for n in fresh:
        for h in [*held, *fresh]:
            if h.key != n.key or h.conv != n.conv or h.data == n.data:
                continue
            earlier, later = _ordered(n, h)
            pair = (bytes(earlier.cid), bytes(later.cid))
            if pair in seen:
                continue
            seen.add(pair)
            verdict = inconsistent(earlier, later, lookup)
            if verdict is Verdict.YES:
                claims.append(Claim(SERVER_EQUIVOCATION, earlier, later))
            elif verdict is Verdict.UNDECIDED:
                undecided.append(Undecided(SERVER_EQUIVOCATION, (earlier, later)))
    return claims, undecided


def retry(pending: Sequence[Undecided], lookup: Lookup) -> tuple[list[Claim], list[Undecided]]:
    """The kept pairs decided now (inconsistent ones as claims), and those still undecided."""
    claims: list[Claim] = []
    kept: list[Undecided] = []
    for u in pending:
        if len(u.statements) != 2:
            continue
        earlier, later = u.statements
        verdict = inconsistent(earlier, later, lookup)
        if verdict is Verdict.YES:
            claims.append(Claim(SERVER_EQUIVOCATION, earlier, later))
        elif verdict is Verdict.UNDECIDED:
            kept.append(u)
    return claims, kept


def select(statements: Iterable[Statement], conv: str, exclude: Collection[bytes]) -> list[Statement]:
    """What to gossip about `conv`: the latest statement of each key not in `exclude`,
    newest first, at most `MAX_GOSSIP`."""
    latest: dict[bytes, Statement] = {}
    for s in statements:
        if s.conv != conv or s.key in exclude:
            continue
        held = latest.get(s.key)
        if held is None or (s.time_ms, bytes(s.cid)) > (held.time_ms, bytes(held.cid)):
            latest[s.key] = s
    newest = sorted(latest.values(), key=lambda s: (s.time_ms, bytes(s.cid)), reverse=True)
    return newest[:MAX_GOSSIP]
