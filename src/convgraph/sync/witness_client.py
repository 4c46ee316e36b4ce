"""Getting a checkpoint witnessed, and compacting only then (docs/integrity.md §7.4).

For each configured witness: sync the conversation to it, ask it to cosign, check the
cosignature against the checkpoint, and write it into the conversation as an attestation
record. `compact_witnessed` drops the records behind the checkpoint only when at least k
configured witnesses cosigned it. Invariant: no cosignature is written that does not verify
under the configured key, and nothing is compacted behind an unwitnessed checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from convgraph.core.record import Record
from convgraph.errors import ConvgraphError, NoteError, PeerMisbehavedError
from convgraph.integrity import cosignature as cosignature_
from convgraph.integrity import note
from convgraph.projections.state import Entry
from convgraph.replica.witness_policy import Witness, WitnessPolicy, cosigners

if TYPE_CHECKING:
    from convgraph.replica import Replica


@dataclass
class Outcome:
    """What each witness answered, and whether the checkpoint is witnessed now."""

    checkpoint: Record
    cosigned: dict[str, Record] = field(default_factory=dict)  # witness name -> attestation written
    refused: dict[str, str] = field(default_factory=dict)  # witness name -> why not
    witnesses: set[str] = field(default_factory=set)  # configured witnesses whose cosignature is held
    k: int = 0

    @property
    def witnessed(self) -> bool:
        """At least k configured witnesses cosigned."""
        return len(self.witnesses) >= self.k


def ask(
    replica: Replica, witness: Witness, checkpoint: Record, *, timeout_s: float
) -> cosignature_.Cosignature:
    """Sync the checkpoint's conversation to `witness` and return its verified cosignature."""
    from convgraph.sync.http import HttpRemote  # noqa: PLC0415 - httpx only for this path
    from convgraph.sync.initiator import synchronize  # noqa: PLC0415
    from convgraph.sync.peer import ReplicaPeer, trusting  # noqa: PLC0415
    from convgraph.sync.witness_hooks import witness_of  # noqa: PLC0415

    conv = checkpoint.conv
    with HttpRemote(witness.url, replica.key) as remote:
        # its statements must be signed by the configured key: the witness signs with its server key
        synchronize(ReplicaPeer(replica, adopt_from=trusting([replica.actor])), remote, [conv],
                    salts=lambda: os.urandom(8), timeout_s=timeout_s, witness=witness_of(replica),
                    peer_key=witness.key, clock=replica.clock)
        answer = remote.cosign(conv, checkpoint.cid)
    return cosignature_from_answer(witness, checkpoint, answer)


def cosignature_from_answer(
    witness: Witness, checkpoint: Record, answer: dict[str, object]
) -> cosignature_.Cosignature:
    """The cosignature a witness answered, checked: by the configured key, over the checkpoint."""
    body = note.checkpoint_body(checkpoint).text
    try:
        line = note.parse_note(body + "\n" + str(answer["cosignature"]) + "\n").signatures[0]
        c = cosignature_.cosignature_of_line(checkpoint.cid, witness.key, line)
    except (NoteError, KeyError, IndexError) as exc:
        raise PeerMisbehavedError(f"witness {witness.name} answered no cosignature/v1 by its key: {exc}",
                                  cid=checkpoint.cid) from exc
    if not cosignature_.verify(c, checkpoint):
        raise PeerMisbehavedError(f"witness {witness.name}'s cosignature does not verify", cid=checkpoint.cid)
    return c


def witness_checkpoint(
    replica: Replica, checkpoint: Record, policy: WitnessPolicy, *, timeout_s: float = 60.0,
    asker: Callable[..., cosignature_.Cosignature] = ask,
) -> Outcome:
    """Ask every configured witness to cosign `checkpoint`; write each cosignature obtained as
    an attestation record. A witness that fails or refuses is reported, not raised."""
    outcome = Outcome(checkpoint, k=policy.k)
    for w in policy.witnesses:
        try:
            c = asker(replica, w, checkpoint, timeout_s=timeout_s)
        except ConvgraphError as exc:
            outcome.refused[w.name] = f"{exc.rule}: {exc}"
            continue
        outcome.cosigned[w.name] = replica.write(checkpoint.conv, "attestation", c.payload())
    outcome.witnesses = cosigners(replica.store, checkpoint.cid, policy, _entries(replica))
    return outcome


def _entries(replica: Replica) -> Callable[[str], Iterable[Entry]]:
    return lambda conv: replica.state(conv).entries.values()


def compact_witnessed(replica: Replica, checkpoint: Record, policy: WitnessPolicy) -> None:
    """Compact behind `checkpoint` when it is witnessed under `policy`, else `UnwitnessedError`."""
    replica.compact_behind(checkpoint.cid, policy)
