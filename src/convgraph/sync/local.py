"""The in-process transport: two replicas in one process, one the initiator, one the responder.

It is the same state machine the HTTP transport drives, with a function call where the
network would be, so anything that syncs over HTTP syncs here with identical results.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable

from convgraph.replica import Replica
from convgraph.sync.initiator import SyncReport, synchronize
from convgraph.sync.peer import ReplicaPeer, trusting
from convgraph.sync.responder import Responder
from convgraph.sync.witness_hooks import witness_of


def sync_replicas(
    local: Replica, remote: Replica, convs: Iterable[str] | None = None, *,
    salts: Callable[[], bytes] = lambda: os.urandom(8), max_sessions: int = 2,
) -> SyncReport:
    """Reconcile the named conversations (default: every one either side holds) both ways;
    one `local` forgot is left out (`Replica.forget`), one `remote` forgot it refuses.

    Each side adopts a compacted conversation's base when its checkpoint is signed by
    either replica's key: both are in this process, so both are ours. `remote` signs its
    statements with its key and clock; `local` judges them, and both gossip.
    """
    names = sorted(set(convs) if convs is not None else {*local.conversations(), *remote.conversations()})
    forgot = local.store.forgotten(names)
    names = [n for n in names if n not in forgot]  # never asked for again
    both = trusting([local.actor, remote.actor])
    responder = Responder(ReplicaPeer(remote, adopt_from=both), key=remote.key, clock=remote.clock,
                          witness=witness_of(remote))
    transport = functools.partial(responder.receive, initiator=local.actor)
    return synchronize(ReplicaPeer(local, adopt_from=both), transport, names, salts=salts,
                       max_sessions=max_sessions, witness=witness_of(local),
                       peer_key=remote.actor, clock=local.clock)
