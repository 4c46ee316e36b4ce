"""The authority projection of a rooted conversation: who may do what, judged in the DAG.

Implements docs/authority.md. `check(state, record)` is the ingest rule (sections 4 and 8): it
judges a record against its own causal past and raises a typed error. `apply` adds a record that
passed. The answers (`who_can`, `members`, `excluded`, `findings`, `Authority.pins/audits`) judge
with everything the state holds, so a revocation that arrives later excludes what it is
concurrent with. Invariant: every answer is a function of the set of records applied, never of
their order, and every yes cites the chain of CIDs from the genesis to the grant that gives it.

Modules: `needs` (what a record asks of its author, §3), `state` (the applied records), `judge`
(holding a capability at a position, §5-§6), `rules` (the graph kinds, §8), `answers` (the doors
and answers, §4, §7), `stale` (decisions whose subject changed before them, §8.7), `values`
(the answer types).
"""

from convgraph.projections.authority.answers import (
    Authority,
    check,
    effective_records,
    excluded,
    findings,
    hidden,
    members,
    require,
    who_can,
)
from convgraph.projections.authority.fold import apply, fold
from convgraph.projections.authority.judge import order_key
from convgraph.projections.authority.needs import ADMIN, READ
from convgraph.projections.authority.state import AuthorityState
from convgraph.projections.authority.values import Answer, Exclusion, Finding

__all__ = [
    "ADMIN",
    "READ",
    "Answer",
    "Authority",
    "AuthorityState",
    "Exclusion",
    "Finding",
    "apply",
    "check",
    "effective_records",
    "excluded",
    "findings",
    "fold",
    "hidden",
    "members",
    "order_key",
    "require",
    "who_can",
]
